"""What the launcher and the workers share: a copied template, operator labels, restart policy.

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
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import controller_reference
from mpi_operator.api.models import ReplicaSpec
from mpi_operator.field_errors import FieldError
from mpi_operator.pod_rules.template import (
    annotation_errors,
)

HOSTFILE_PATH: Final = f"{c.CONFIG_MOUNT_PATH}/{c.HOSTFILE_NAME}"
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
) -> dict[str, Any]:
    """A copy of the role's template with the operator's labels (the replica-index label only
    when ``replica_index`` is given) and the pod's hostname, which lets mpirun recognise the
    launcher's own entry in the hostfile (the transport may make it resolvable)."""
    labels = operator_labels(job, role)
    if replica_index is not None:
        labels[c.LABEL_REPLICA_INDEX] = str(replica_index)
    template = copy_template(spec)
    overlay_labels(template, labels)
    template["spec"]["hostname"] = hostname
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
