"""Everything the operator creates for a fresh job, in the order it creates them."""

from __future__ import annotations

from typing import Any

from gang import GangScheduler
from mpi_operator.api import constants as c
from mpi_operator.api.v2beta1 import MPIJob
from mpi_operator.desired.config import new_config_map
from mpi_operator.desired.facts import ClusterFacts
from mpi_operator.desired.launcher import new_launcher_job
from mpi_operator.desired.pod_templates import is_suspended
from mpi_operator.desired.service import new_service
from mpi_operator.desired.ssh import SSHKeyPair, generate_ssh_key_pair, new_ssh_secret
from mpi_operator.desired.workers import new_worker_pod


def desired_objects(
    job: MPIJob,
    facts: ClusterFacts,
    gang: GangScheduler | None,
    ssh_key: SSHKeyPair | None = None,
) -> list[dict[str, Any]]:
    """Service, ConfigMap, Secret, PodGroup, workers 0..N-1, then the launcher Job.

    Everything the launcher needs exists before it starts. A suspended job gets neither
    PodGroup nor workers, and a suspended launcher Job. A key pair is generated when
    ``ssh_key`` is None.
    """
    objects = [
        new_service(job),
        new_config_map(job, facts),
        new_ssh_secret(job, ssh_key or generate_ssh_key_pair()),
    ]
    if not is_suspended(job):
        if gang is not None:
            objects.append(gang.pod_group(job, facts))
        objects += [
            new_worker_pod(job, index, facts, gang) for index in range(job.replicas(c.WORKER))
        ]
    objects.append(new_launcher_job(job, facts, gang))
    return objects
