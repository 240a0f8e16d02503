"""What the launcher and the workers share: a copied template, operator labels, SSH keys.

A pod template stays a plain dict from the user's MPIJob to the created object. Each
builder deep-copies it and overlays only the fields the operator owns, so a pod field
this code has never heard of still reaches the pod.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, Final

from gang import GangScheduler
from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import controller_reference
from mpi_operator.api.models import ReplicaSpec
from mpi_operator.field_errors import FieldError, quoted
from mpi_operator.pod_rules import dns
from mpi_operator.pod_rules.template import (
    MAX_DNS_SEARCH_CHARACTERS,
    MAX_DNS_SEARCHES,
    annotation_errors,
    searches_of,
)

SSH_PRIVATE_KEY: Final = "ssh-privatekey"
SSH_PUBLIC_KEY: Final = "ssh-publickey"
# The files of a secret volume are root's. ssh refuses a private key of its own user that the
# group or others may read, and sshd (StrictModes) an authorized_keys they may write. At
# /root/.ssh root uses them: 0600. At any other path a non-root user reads them through the
# pod's fsGroup, which the kubelet gives the files (0440), or without one as any other user
# (0444); ssh accepts a key that another user owns, and no one may write them.
ROOT_SSH_KEY_MODE: Final = 0o600
FS_GROUP_SSH_KEY_MODE: Final = 0o440
NO_FS_GROUP_SSH_KEY_MODE: Final = 0o444
# OpenSSH's default file names, so neither ssh nor sshd needs configuration.
SSH_VOLUME_ITEMS: Final = (
    {"key": SSH_PRIVATE_KEY, "path": "id_rsa"},
    {"key": SSH_PUBLIC_KEY, "path": "id_rsa.pub"},
    {"key": SSH_PUBLIC_KEY, "path": "authorized_keys"},
)
HOST_NETWORK_DNS_POLICY: Final = "ClusterFirstWithHostNet"
# Upstream always appends cluster.local; a cluster configured with another domain gets its own.
DEFAULT_CLUSTER_DOMAIN: Final = "cluster.local"
ROLE_ENV: Final = "K_MPI_JOB_ROLE"
TERMINATION_MESSAGE_POLICY: Final = "FallbackToLogsOnError"


def replica_spec(job: DefaultedMPIJob, replica_type: str) -> ReplicaSpec:
    """The role's spec; a defaulted, valid job has the Launcher and any rendered Worker."""
    spec = job.replica_spec(replica_type)
    if spec is None:
        raise ValueError(f"MPIJob {job.namespace}/{job.name} has no {replica_type} replica spec")
    return spec


def copy_template(spec: ReplicaSpec) -> dict[str, Any]:
    """A deep copy of the role's pod template with ``metadata`` and ``spec`` as dicts."""
    template = copy.deepcopy(spec.template or {})
    if not isinstance(template.get("metadata"), dict):
        template["metadata"] = {}
    if not isinstance(template.get("spec"), dict):
        template["spec"] = {}
    return template


def operator_labels(job: DefaultedMPIJob, role: str) -> dict[str, str]:
    """Labels selecting a role's pods (and, without the role, the job's Service)."""
    return {
        c.LABEL_OPERATOR_NAME: c.OPERATOR_NAME,
        c.LABEL_JOB_NAME: job.name,
        c.LABEL_JOB_ROLE: role,
    }


def overlay_labels(template: dict[str, Any], labels: dict[str, str]) -> None:
    """Add ``labels`` to the template's; the operator's win, or its selectors would miss."""
    metadata = template["metadata"]
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}


def main_container(template: dict[str, Any]) -> dict[str, Any]:
    """Container 0: the only one the operator configures, sidecars are the user's."""
    container: dict[str, Any] = template["spec"]["containers"][0]
    return container


def append_to(obj: dict[str, Any], field: str, *items: dict[str, Any]) -> None:
    """Append after the user's entries: for env, the API keeps the last duplicate."""
    obj[field] = [*(obj.get(field) or []), *items]


def dns_search_domain(job: DefaultedMPIJob, facts: ClusterFacts) -> str:
    """The job's Service domain, in which every pod of the job has its short hostname."""
    domain = facts.cluster_domain or DEFAULT_CLUSTER_DOMAIN
    return f"{names.service_name(job)}.{job.namespace}.svc.{domain}"


def dns_search_errors(job: DefaultedMPIJob, facts: ClusterFacts) -> Iterator[FieldError]:
    """Whether each role's search list, once the job's domain is appended, is one the API
    server takes (every pod of the job gets the domain, the launcher as well as workers)."""
    ours = dns_search_domain(job, facts)
    for role in (c.LAUNCHER, c.WORKER):
        if job.replicas(role) == 0:
            continue
        path = f"spec.mpiReplicaSpecs[{role}].template.spec.dnsConfig.searches"
        for problem in dns.dns1123_subdomain(ours):
            yield FieldError(path, f"the operator adds the search domain {quoted(ours)}: {problem}")
        template = replica_spec(job, role).template or {}
        pod_spec = template.get("spec")
        searches = [*searches_of(pod_spec if isinstance(pod_spec, dict) else {}), ours]
        if len(searches) > MAX_DNS_SEARCHES:
            yield FieldError(
                path,
                f"must have at most {MAX_DNS_SEARCHES - 1} entries: the operator adds "
                f"{quoted(ours)}",
            )
        characters = len(" ".join(searches))
        if characters > MAX_DNS_SEARCH_CHARACTERS:
            yield FieldError(
                path,
                f"must have at most {MAX_DNS_SEARCH_CHARACTERS} characters with the operator's "
                f"{quoted(ours)}, found {characters}",
            )


def set_host_identity(
    template: dict[str, Any], job: DefaultedMPIJob, hostname: str, facts: ClusterFacts
) -> None:
    """Hostname, subdomain and DNS search path that make the pod resolvable through the
    job's Service, and let it resolve every pod of the job (itself included) by short name.

    Over kubectl exec, hosts are pod names and nothing resolves them: the hostname alone
    lets mpirun recognise the launcher's own entry in the hostfile."""
    spec = template["spec"]
    spec["hostname"] = hostname
    if not job.uses_ssh:
        return
    spec["subdomain"] = names.service_name(job)
    if spec.get("hostNetwork") is True:
        # Without it a host-network pod resolves with the node's resolv.conf and never
        # finds its peers' Service names.
        spec["dnsPolicy"] = HOST_NETWORK_DNS_POLICY
    dns_config = spec.get("dnsConfig")
    if not isinstance(dns_config, dict):
        dns_config = spec["dnsConfig"] = {}
    dns_config["searches"] = [*(dns_config.get("searches") or []), dns_search_domain(job, facts)]


def set_restart_policy(template: dict[str, Any], spec: ReplicaSpec, *, in_job: bool) -> None:
    """The replica-level restart policy replaces the template's. kubeflow.org/v1's ExitCode
    leaves retries to the job's failure budget, so the kubelet restarts nothing; a Job's pods
    (the launcher's) cannot restart Always, only OnFailure."""
    policy = spec.restart_policy
    if policy == c.RESTART_POLICY_EXIT_CODE:
        policy = c.RESTART_POLICY_NEVER
    elif policy == c.RESTART_POLICY_ALWAYS and in_job:
        policy = c.RESTART_POLICY_ON_FAILURE
    template["spec"]["restartPolicy"] = policy


def keep_last_words(container: dict[str, Any]) -> None:
    """Have the kubelet keep the tail of a failed main container's log (2 KiB, 80 lines) in
    the pod's status, where the failure's condition message finds it after the pod is gone;
    a policy the template chose stays."""
    container.setdefault("terminationMessagePolicy", TERMINATION_MESSAGE_POLICY)


def mount_ssh_auth(template: dict[str, Any], job: DefaultedMPIJob) -> None:
    """Mount the job's SSH key pair in container 0 at spec.sshAuthMountPath."""
    mount_path = job.spec.ssh_auth_mount_path
    secret: dict[str, Any] = {
        "secretName": names.ssh_secret_name(job),
        "items": [dict(item) for item in SSH_VOLUME_ITEMS],
        "defaultMode": ssh_key_mode(mount_path, template["spec"]),
    }
    append_to(template["spec"], "volumes", {"name": c.SSH_AUTH_VOLUME, "secret": secret})
    append_to(
        main_container(template),
        "volumeMounts",
        {"name": c.SSH_AUTH_VOLUME, "mountPath": mount_path},
    )


def ssh_key_mode(mount_path: str | None, pod_spec: dict[str, Any]) -> int:
    """The mode of the SSH key files mounted at ``mount_path`` in a pod of ``pod_spec``."""
    if mount_path == c.DEFAULT_SSH_AUTH_MOUNT_PATH:
        return ROOT_SSH_KEY_MODE
    security_context = pod_spec.get("securityContext")
    if isinstance(security_context, dict) and security_context.get("fsGroup") is not None:
        return FS_GROUP_SSH_KEY_MODE
    return NO_FS_GROUP_SSH_KEY_MODE


def hand_to_gang(
    template: dict[str, Any], job: DefaultedMPIJob, gang: GangScheduler | None
) -> dict[str, Any]:
    """The template as the gang scheduler wants it; unchanged without gang scheduling."""
    return template if gang is None else gang.decorate_pod_template(template, job)


def gang_annotation_errors(
    job: DefaultedMPIJob, gang: GangScheduler | None
) -> Iterator[FieldError]:
    """Whether each role's pods still fit the API server's annotation limit once the gang
    scheduler has added its own: validation checks a template's annotations alone."""
    if gang is None:
        return
    for replica_type, role in ((c.LAUNCHER, c.ROLE_LAUNCHER), (c.WORKER, c.ROLE_WORKER)):
        spec = job.replica_spec(replica_type)
        if spec is None:
            continue
        own = ((spec.template or {}).get("metadata") or {}).get("annotations") or {}
        marked = gang.decorate_pod_template(
            {"metadata": {"labels": operator_labels(job, role)}}, job
        )
        added = marked["metadata"].get("annotations") or {}
        path = f"spec.mpiReplicaSpecs[{replica_type}].template.metadata.annotations"
        for error in annotation_errors(path, {**own, **added} if added else {}):
            yield FieldError(error.path, f"{error.message}, with the gang scheduler's annotations")


def pod_metadata(template: dict[str, Any]) -> dict[str, Any]:
    """Labels and annotations of a rendered template: the only metadata pods inherit."""
    metadata = template.get("metadata") or {}
    result: dict[str, Any] = {"labels": dict(metadata.get("labels") or {})}
    if metadata.get("annotations"):
        result["annotations"] = dict(metadata["annotations"])
    return result


def role_template(
    job: DefaultedMPIJob,
    spec: ReplicaSpec,
    role: str,
    hostname: str,
    replica_index: int | None,
    facts: ClusterFacts,
) -> dict[str, Any]:
    """A copy of the role's template with the operator's labels (the replica-index label only
    when ``replica_index`` is given) and the pod's host identity."""
    labels = operator_labels(job, role)
    if replica_index is not None:
        labels[c.LABEL_REPLICA_INDEX] = str(replica_index)
    template = copy_template(spec)
    overlay_labels(template, labels)
    set_host_identity(template, job, hostname, facts)
    return template


def owned_pod_template(
    template: dict[str, Any], job: DefaultedMPIJob, gang: GangScheduler | None
) -> dict[str, Any]:
    """The finished template as the gang scheduler wants it, with only the metadata pods
    inherit plus the job's controller reference."""
    template = hand_to_gang(template, job, gang)
    return {
        "metadata": {**pod_metadata(template), "ownerReferences": [controller_reference(job)]},
        "spec": template["spec"],
    }


def launcher_runs_as_worker(job: DefaultedMPIJob) -> bool:
    return bool(job.spec.run_launcher_as_worker)


def is_suspended(job: DefaultedMPIJob) -> bool:
    return bool(job.spec.run_policy.suspend)
