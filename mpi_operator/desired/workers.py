"""Worker pods: sshd servers the launcher's mpirun starts ranks on, or pods it execs into."""

from __future__ import annotations

from typing import Any, Final

from gang import GangScheduler, place_worker
from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.desired import kubectl_exec, pod_templates

DEFAULT_WORKER_COMMAND: Final = ("/usr/sbin/sshd", "-De")


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
        job, spec, c.ROLE_WORKER, name, worker_replica_index(job, index), facts
    )
    pod_templates.set_restart_policy(template, spec, in_job=False)
    container = pod_templates.main_container(template)
    pod_templates.keep_last_words(container)
    if not job.uses_ssh:
        kubectl_exec.keep_worker_alive(container)
        kubectl_exec.withhold_worker_token(template)
    elif not container.get("command") and not container.get("args"):
        # mpirun reaches workers over ssh; a container that chose its own command or args
        # (an entrypoint that starts sshd itself, say) keeps it.
        container["command"] = list(DEFAULT_WORKER_COMMAND)
    pod_templates.append_to(
        container, "env", {"name": pod_templates.ROLE_ENV, "value": c.ROLE_WORKER}
    )
    if job.uses_ssh:
        pod_templates.mount_ssh_auth(template, job)
    else:
        kubectl_exec.mount_kubexec(template, job)
    pod = place_worker(gang, pod_templates.owned_pod_template(template, job, gang), job, index)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": job.namespace, **pod["metadata"]},
        "spec": pod["spec"],
    }
