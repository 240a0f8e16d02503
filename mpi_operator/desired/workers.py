"""Worker pods: where the launcher's mpirun starts ranks, through the job's transport."""

from __future__ import annotations

from typing import Any

from gang import GangScheduler, place_worker
from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.desired import pod_templates
from mpi_operator.desired.transports import transport_of


def worker_replica_index(job: DefaultedMPIJob, index: int) -> int:
    """The replica-index label: shifted by one when the launcher holds index 0 as a worker."""
    return index + 1 if pod_templates.launcher_runs_as_worker(job) else index


def new_worker_pod(
    job: DefaultedMPIJob, index: int, facts: ClusterFacts, gang: GangScheduler | None
) -> dict[str, Any]:
    """Worker pod ``index`` (0-based) of a defaulted, valid job."""
    spec = pod_templates.replica_spec(job, c.WORKER)
    name = names.worker_name(job, index)
    template = pod_templates.role_template(
        job, spec, c.ROLE_WORKER, name, worker_replica_index(job, index)
    )
    transport = transport_of(job)
    transport.set_host_identity(template, job, facts)
    pod_templates.set_restart_policy(template, spec, in_job=False)
    container = pod_templates.main_container(template)
    pod_templates.keep_last_words(container)
    transport.prepare_worker(template, job)
    pod_templates.append_to(
        container, "env", {"name": pod_templates.ROLE_ENV, "value": c.ROLE_WORKER}
    )
    transport.decorate(template, job, c.WORKER, facts)
    pod = place_worker(
        gang, pod_templates.owned_pod_template(template, job, gang), job, index, facts
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": job.namespace, **pod["metadata"]},
        "spec": pod["spec"],
    }
