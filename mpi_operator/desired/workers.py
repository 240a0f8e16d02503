"""Worker pods: sshd servers the launcher's mpirun starts ranks on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from gang import GangScheduler
from mpi_operator.api import constants as c
from mpi_operator.api import dns
from mpi_operator.api.errors import FieldError, quoted
from mpi_operator.api.pod_template import (
    MAX_DNS_SEARCH_CHARACTERS,
    MAX_DNS_SEARCHES,
    searches_of,
)
from mpi_operator.api.v2beta1 import MPIJob
from mpi_operator.desired import names, pod_templates
from mpi_operator.desired.facts import ClusterFacts

DEFAULT_WORKER_COMMAND: Final = ("/usr/sbin/sshd", "-De")
# Upstream always appends cluster.local; a cluster configured with another domain gets its own.
DEFAULT_CLUSTER_DOMAIN: Final = "cluster.local"


def dns_search_domain(job: MPIJob, facts: ClusterFacts) -> str:
    """The job's Service domain, so workers resolve the launcher by its short hostname."""
    domain = facts.cluster_domain or DEFAULT_CLUSTER_DOMAIN
    return f"{names.service_name(job)}.{job.namespace}.svc.{domain}"


def worker_dns_errors(job: MPIJob, facts: ClusterFacts) -> Iterator[FieldError]:
    """Whether the search list, once the job's domain is appended, is one the API server takes."""
    if job.replicas(c.WORKER) == 0:
        return
    path = f"spec.mpiReplicaSpecs[{c.WORKER}].template.spec.dnsConfig.searches"
    ours = dns_search_domain(job, facts)
    for problem in dns.dns1123_subdomain(ours):
        yield FieldError(path, f"the operator adds the search domain {quoted(ours)}: {problem}")
    template = pod_templates.replica_spec(job, c.WORKER).template or {}
    pod_spec = template.get("spec")
    searches = [*searches_of(pod_spec if isinstance(pod_spec, dict) else {}), ours]
    if len(searches) > MAX_DNS_SEARCHES:
        yield FieldError(
            path,
            f"must have at most {MAX_DNS_SEARCHES - 1} entries: the operator adds {quoted(ours)}",
        )
    characters = len(" ".join(searches))
    if characters > MAX_DNS_SEARCH_CHARACTERS:
        yield FieldError(
            path,
            f"must have at most {MAX_DNS_SEARCH_CHARACTERS} characters with the operator's "
            f"{quoted(ours)}, found {characters}",
        )


def worker_replica_index(job: MPIJob, index: int) -> int:
    """The replica-index label: shifted by one when the launcher holds index 0 as a worker."""
    return index + 1 if pod_templates.launcher_runs_as_worker(job) else index


def new_worker_pod(
    job: MPIJob, index: int, facts: ClusterFacts, gang: GangScheduler | None
) -> dict[str, Any]:
    """Worker pod ``index`` (0-based) of a defaulted, valid job."""
    spec = pod_templates.replica_spec(job, c.WORKER)
    name = names.worker_name(job, index)
    template = pod_templates.role_template(
        job, spec, c.ROLE_WORKER, name, worker_replica_index(job, index)
    )
    pod_spec = template["spec"]
    dns_config = pod_spec.get("dnsConfig")
    if not isinstance(dns_config, dict):
        dns_config = pod_spec["dnsConfig"] = {}
    dns_config["searches"] = [*(dns_config.get("searches") or []), dns_search_domain(job, facts)]
    pod_templates.set_restart_policy(template, spec)
    container = pod_templates.main_container(template)
    # mpirun reaches workers over ssh; a container that chose its own command or args
    # (an entrypoint that starts sshd itself, say) keeps it.
    if not container.get("command") and not container.get("args"):
        container["command"] = list(DEFAULT_WORKER_COMMAND)
    pod_templates.append_to(
        container, "env", {"name": pod_templates.ROLE_ENV, "value": c.ROLE_WORKER}
    )
    pod_templates.mount_ssh_auth(template, job)
    pod = pod_templates.owned_pod_template(template, job, gang)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": job.namespace, **pod["metadata"]},
        "spec": pod["spec"],
    }
