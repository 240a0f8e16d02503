"""Everything the operator creates for a fresh job, in the order it creates them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gang import GangScheduler, gang_objects_of
from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.desired.config import new_config_map
from mpi_operator.desired.kinds import Child
from mpi_operator.desired.launcher import new_launcher_job
from mpi_operator.desired.pod_templates import is_suspended
from mpi_operator.desired.transports import transport_of
from mpi_operator.desired.transports.kubectl_exec import exec_access
from mpi_operator.desired.transports.ssh import (
    SSHKeyPair,
    generate_ssh_key_pair,
    new_service,
    new_ssh_secret,
)
from mpi_operator.desired.workers import new_worker_pod


def children(job: DefaultedMPIJob, gang: GangScheduler | None) -> tuple[Child, ...]:
    """The job's children in creation order: everything the launcher needs exists before it
    starts, and the gang's objects before the pods that join them; the transport names its
    own before and after the workers. A suspended job gets neither gang objects nor workers
    (nor the transport's after them), and a suspended launcher Job.

    Rendering and the operator's sync both walk this list, so a new child, or a new rule of
    when one exists, is one edit here.
    """
    transport = transport_of(job)
    order = [*transport.before_workers]
    if not is_suspended(job):
        if gang_objects_of(gang) is not None:
            order.append(Child.GANG_OBJECTS)
        order.append(Child.WORKERS)
        order += transport.after_workers
    order.append(Child.LAUNCHER)
    return tuple(order)


def desired_objects(
    job: DefaultedMPIJob,
    facts: ClusterFacts,
    gang: GangScheduler | None,
    ssh_key: SSHKeyPair | None = None,
) -> list[dict[str, Any]]:
    """Every object of ``children``, in order. A key pair is generated when ``ssh_key`` is
    None."""
    return list(iter_desired_objects(job, facts, gang, ssh_key))


def iter_desired_objects(
    job: DefaultedMPIJob,
    facts: ClusterFacts,
    gang: GangScheduler | None,
    ssh_key: SSHKeyPair | None = None,
) -> Iterator[dict[str, Any]]:
    """``desired_objects`` one at a time: a job's worker pods need not all be in memory."""
    for child in children(job, gang):
        if child is Child.SERVICE:
            yield new_service(job)
        elif child is Child.CONFIG_MAP:
            yield new_config_map(job, facts)
        elif child is Child.SSH_SECRET:
            yield new_ssh_secret(job, ssh_key or generate_ssh_key_pair())
        elif child is Child.EXEC_ACCESS:
            yield from (obj for _, obj in exec_access(job, names.worker_names(job)))
        elif child is Child.GANG_OBJECTS and (with_objects := gang_objects_of(gang)):
            yield from with_objects.gang_objects(job, facts)
        elif child is Child.WORKERS:
            for index in range(job.replicas(c.WORKER)):
                yield new_worker_pod(job, index, facts, gang)
        elif child is Child.LAUNCHER:
            yield new_launcher_job(job, facts, gang)
