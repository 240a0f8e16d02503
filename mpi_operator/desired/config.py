"""The job's ConfigMap: the static hostfile, the discover_hosts.sh script and the
transport's scripts (kubectl exec's remote shell, kubexec.sh).

The hostfile lists every host the spec asks for; discover_hosts.sh lists the hosts that
are running right now, for Elastic Horovod's host discovery. The transport names the hosts.

A job with a network domain (``schedulingPolicy.topology``) lists its workers in topology
order once every one of them is placed: by domain, then node, then index, so consecutive
ranks share the closest domain. One label gives one level, so the order is a sort key, not a
graph walk.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import child_metadata
from mpi_operator.desired.pod_templates import launcher_runs_as_worker
from mpi_operator.desired.transports import transport_of
from mpi_operator.field_errors import FieldError

MAX_CONFIG_MAP_BYTES: Final = 1024 * 1024
"""The API server's limit on the total size of a ConfigMap's values."""


def _hostfile_line(job: DefaultedMPIJob, fqdn: str) -> str:
    slots = job.spec.slots_per_worker
    if job.spec.mpi_implementation == c.OPENMPI:
        return f"{fqdn} slots={slots}\n"
    # Intel MPI and MPICH (Hydra) read `host:slots`.
    return f"{fqdn}:{slots}\n"


Placements = Mapping[str, tuple[str, str]]
"""Worker pod name -> (its node's value of the topology label, its node's name), for the
workers placed on a node carrying that label."""


def topology_order(workers: Iterable[str], placements: Placements) -> list[str]:
    """``workers`` by domain, then node, keeping their order within a node; unchanged unless
    every one of them is placed."""
    listed = list(workers)
    if not listed or any(worker not in placements for worker in listed):
        return listed
    position = {worker: i for i, worker in enumerate(listed)}
    return sorted(listed, key=lambda worker: (*placements[worker], position[worker]))


def _static_pod_names(job: DefaultedMPIJob, placements: Placements) -> list[str]:
    workers = topology_order(names.worker_names(job), placements)
    if launcher_runs_as_worker(job):
        return [names.launcher_name(job), *workers]
    return workers


def hostfile(job: DefaultedMPIJob, facts: ClusterFacts, placements: Placements) -> str:
    """One line per host from the spec's replica count: launcher first when it works too, the
    workers in topology order once placed."""
    transport = transport_of(job)
    return "".join(
        _hostfile_line(job, transport.host_name(job, pod, facts))
        for pod in _static_pod_names(job, placements)
    )


def discover_hosts_script(
    job: DefaultedMPIJob,
    facts: ClusterFacts,
    running_worker_names: Iterable[str],
    placements: Placements,
) -> str:
    """A shell script printing the launcher (when it works too) and the running workers.

    Workers are sorted by name as plain strings, like upstream (worker-10 before worker-2),
    so the script only changes when the set of running workers does; in topology order
    when every running worker is placed in a domain.
    """
    hosts = [names.launcher_name(job)] if launcher_runs_as_worker(job) else []
    hosts += topology_order(sorted(running_worker_names), placements)
    transport = transport_of(job)
    lines = (f"echo {transport.discovered_host(job, pod, facts)}\n" for pod in hosts)
    return "#!/bin/sh\n" + "".join(lines)


def new_config_map(
    job: DefaultedMPIJob,
    facts: ClusterFacts,
    running_worker_names: Iterable[str] = (),
    placements: Placements | None = None,
) -> dict[str, Any]:
    """The ConfigMap mounted at /etc/mpi in the launcher; ``placements`` of the workers
    (none before they are placed, or without a network domain)."""
    placed = placements or {}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": child_metadata(job, names.config_map_name(job), {c.LABEL_APP: job.name}),
        "data": {
            c.HOSTFILE_NAME: hostfile(job, facts, placed),
            c.DISCOVER_HOSTS_SCRIPT_NAME: discover_hosts_script(
                job, facts, running_worker_names, placed
            ),
            **transport_of(job).config_scripts(job),
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
