"""The job's ConfigMap: the static hostfile and the discover_hosts.sh script (and, over
kubectl exec, mpirun's remote shell, kubexec.sh).

The hostfile lists every host the spec asks for; discover_hosts.sh lists the hosts that
are running right now, for Elastic Horovod's host discovery. Over SSH a host is the pod's
name in the job's Service domain; over kubectl exec it is the pod's name, which kubexec.sh
is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import child_metadata
from mpi_operator.desired.kubectl_exec import kubexec_script
from mpi_operator.desired.pod_templates import launcher_runs_as_worker
from mpi_operator.field_errors import FieldError

MAX_CONFIG_MAP_BYTES: Final = 1024 * 1024
"""The API server's limit on the total size of a ConfigMap's values."""


def host_fqdn(job: DefaultedMPIJob, pod_name: str, facts: ClusterFacts) -> str:
    """The pod's name through the headless Service (over kubectl exec, the pod's name).

    Without a configured cluster domain the name stops at ``svc`` and relies on the pods'
    DNS search path, as upstream does.
    """
    if not job.uses_ssh:
        return pod_name
    fqdn = f"{pod_name}.{names.service_name(job)}.{job.namespace}.svc"
    return f"{fqdn}.{facts.cluster_domain}" if facts.cluster_domain else fqdn


def _hostfile_line(job: DefaultedMPIJob, fqdn: str) -> str:
    slots = job.spec.slots_per_worker
    if job.spec.mpi_implementation == c.OPENMPI:
        return f"{fqdn} slots={slots}\n"
    # Intel MPI and MPICH (Hydra) read `host:slots`.
    return f"{fqdn}:{slots}\n"


def _static_pod_names(job: DefaultedMPIJob) -> list[str]:
    workers = names.worker_names(job)
    if launcher_runs_as_worker(job):
        return [names.launcher_name(job), *workers]
    return workers


def hostfile(job: DefaultedMPIJob, facts: ClusterFacts) -> str:
    """One line per host from the spec's replica count: launcher first when it works too."""
    return "".join(
        _hostfile_line(job, host_fqdn(job, pod, facts)) for pod in _static_pod_names(job)
    )


def discover_hosts_script(
    job: DefaultedMPIJob, facts: ClusterFacts, running_worker_names: Iterable[str]
) -> str:
    """A shell script printing the launcher (when it works too) and the running workers.

    Workers are sorted by name as plain strings, like upstream (worker-10 before worker-2),
    so the script only changes when the set of running workers does.
    """
    hosts = [names.launcher_name(job)] if launcher_runs_as_worker(job) else []
    hosts += sorted(running_worker_names)
    # training-operator's lines over kubectl exec name the slots, as horovodrun reads them.
    slots = "" if job.uses_ssh else f":{job.spec.slots_per_worker}"
    return "#!/bin/sh\n" + "".join(f"echo {host_fqdn(job, pod, facts)}{slots}\n" for pod in hosts)


def new_config_map(
    job: DefaultedMPIJob, facts: ClusterFacts, running_worker_names: Iterable[str] = ()
) -> dict[str, Any]:
    """The ConfigMap mounted at /etc/mpi in the launcher."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": child_metadata(job, names.config_map_name(job), {c.LABEL_APP: job.name}),
        "data": {
            c.HOSTFILE_NAME: hostfile(job, facts),
            c.DISCOVER_HOSTS_SCRIPT_NAME: discover_hosts_script(job, facts, running_worker_names),
            **({} if job.uses_ssh else {c.KUBEXEC_SCRIPT_NAME: kubexec_script(job)}),
        },
    }


def config_map_errors(job: DefaultedMPIJob, facts: ClusterFacts) -> Iterator[FieldError]:
    """Whether the ConfigMap fits the API server's limit, with every worker running.

    discover_hosts.sh lists the running workers, so the ConfigMap is largest once all of them
    run; a job must fit then too, or its ConfigMap update would be refused mid-run.
    """
    all_workers = names.worker_names(job)
    data = new_config_map(job, facts, all_workers)["data"]
    size = sum(len(value.encode()) for value in data.values())
    if size > MAX_CONFIG_MAP_BYTES:
        yield FieldError(
            f"spec.mpiReplicaSpecs[{c.WORKER}].replicas",
            f"{job.replicas(c.WORKER)} workers need a hostfile and discover_hosts.sh of "
            f"{size} bytes; a ConfigMap holds at most {MAX_CONFIG_MAP_BYTES}",
        )
