"""Validation of an MPIJob: kubeflow/mpi-operator's rules, in its order, plus the ones it misses.

Every problem is reported with the path of the field at fault; validation never stops at
the first error, so a user fixes a job in one round.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from pydantic import BaseModel, ValidationError

from mpi_operator.api import constants as c
from mpi_operator.api.accounts import launcher_account_errors
from mpi_operator.api.bounds import document_errors
from mpi_operator.api.defaults import DefaultedMPIJob, fill_in_defaults
from mpi_operator.api.errors import InvalidMPIJobError, from_pydantic
from mpi_operator.api.models import MPIJob, ReplicaSpec, crd_keywords, integer_maximum
from mpi_operator.api.rules import declared_versions, restart_policies
from mpi_operator.api.topology import topology_errors
from mpi_operator.api.transport_checks import TransportChecks
from mpi_operator.field_errors import FieldError, quoted, unknown_field
from mpi_operator.pod_rules import dns
from mpi_operator.pod_rules.template import (
    OperatorMounts,
    annotation_errors,
    label_errors,
    resource_list_errors,
    template_errors,
)


def parse_mpijob(obj: object) -> MPIJob:
    """Parse a kubeflow.org/v2beta1 or v1 MPIJob from its wire form; raises
    InvalidMPIJobError."""
    return _parsed(obj, within_bounds=False)


def _parsed(obj: object, *, within_bounds: bool) -> MPIJob:
    if not isinstance(obj, Mapping):
        raise InvalidMPIJobError(
            [FieldError("", f"must be an MPIJob object, found {_kind_of(obj)}")]
        )
    problems = [] if within_bounds else document_errors(obj)
    if problems:
        raise InvalidMPIJobError(problems)
    mismatched = [
        *_one_of("apiVersion", obj.get("apiVersion"), c.API_VERSIONS),
        *_one_of("kind", obj.get("kind"), (c.KIND,)),
    ]
    if mismatched:
        raise InvalidMPIJobError(mismatched)
    try:
        # By wire name only: a Python name (slots_per_worker) is a field the API server drops.
        return MPIJob.model_validate(dict(obj), by_alias=True, by_name=False)
    except ValidationError as error:
        raise InvalidMPIJobError(from_pydantic(error)) from None


def parse_with_defaults(obj: object, *, within_bounds: bool = False) -> DefaultedMPIJob:
    """:func:`parse_mpijob` of ``obj`` with its defaults filled in, without copying it (nothing
    else holds it); raises InvalidMPIJobError. ``within_bounds``: the caller found ``obj``
    within the document limits (``bounds.values_within_bounds``)."""
    return fill_in_defaults(_parsed(obj, within_bounds=within_bounds))


def rule_errors(
    job: DefaultedMPIJob, transport: TransportChecks, admitted_at: tuple[str, ...] | None = None
) -> list[FieldError]:
    """Every problem of ``job``, its defaults filled in, by the API's rules and by those of
    ``transport``, the job's. ``admitted_at``: the versions whose per-version rules apply
    (``rules.STORED`` for an object read back from the API server); by default the one the
    job declares."""
    return list(_errors(job, admitted_at or declared_versions(job), transport))


def _errors(
    job: DefaultedMPIJob, admitted_at: tuple[str, ...], transport: TransportChecks
) -> Iterator[FieldError]:
    yield from _metadata_errors(job, transport)
    yield from _unknown_field_errors(job)
    spec = job.spec
    yield from _maximum_errors(job)
    yield from _replica_specs_errors(job, restart_policies(admitted_at), transport)
    if spec.slots_per_worker is not None and spec.slots_per_worker < 0:
        yield FieldError("spec.slotsPerWorker", "must be greater than or equal to 0")
    run_policy = spec.run_policy
    yield from _one_of(
        "spec.runPolicy.cleanPodPolicy", run_policy.clean_pod_policy, c.CLEAN_POD_POLICIES
    )
    if spec.clean_pod_policy is not None:
        yield from _one_of("spec.cleanPodPolicy", spec.clean_pod_policy, c.CLEAN_POD_POLICIES)
    yield from _one_of("spec.transport", spec.transport, c.TRANSPORTS)
    for field, value in (
        ("ttlSecondsAfterFinished", run_policy.ttl_seconds_after_finished),
        ("activeDeadlineSeconds", run_policy.active_deadline_seconds),
        ("backoffLimit", run_policy.backoff_limit),
    ):
        yield from _non_negative(f"spec.runPolicy.{field}", value)
    if run_policy.managed_by is not None:
        yield from _one_of("spec.runPolicy.managedBy", run_policy.managed_by, c.MANAGED_BY_VALUES)
    yield from transport.spec_errors(job)
    yield from _one_of("spec.mpiImplementation", spec.mpi_implementation, c.MPI_IMPLEMENTATIONS)
    yield from _one_of(
        "spec.launcherCreationPolicy", spec.launcher_creation_policy, c.LAUNCHER_CREATION_POLICIES
    )
    yield from _scheduling_policy_errors(job)


def _metadata_errors(job: DefaultedMPIJob, transport: TransportChecks) -> Iterator[FieldError]:
    metadata = job.metadata
    typed = True
    for field in ("name", "namespace", "uid"):
        if metadata.get(field) is not None and not isinstance(metadata[field], str):
            yield FieldError(f"metadata.{field}", "must be a string")
            typed = False
    yield from label_errors("metadata.labels", metadata.get("labels"))
    yield from annotation_errors("metadata.annotations", metadata.get("annotations"))
    if not typed:
        return
    if metadata.get("namespace"):
        for problem in dns.dns1123_label(metadata["namespace"]):
            yield FieldError(
                "metadata.namespace", f"invalid value {quoted(job.namespace)}: {problem}"
            )
    yield from _name_errors(job, transport)


def _name_errors(job: DefaultedMPIJob, transport: TransportChecks) -> Iterator[FieldError]:
    if not job.name:
        yield FieldError("metadata.name", "is required")
        return
    yield from transport.name_errors(job)
    # The last worker's pod name doubles as its DNS hostname, so it bounds the job name.
    last_worker = f"{job.name}-worker-{max(job.replicas(c.WORKER), 1) - 1}"
    if len(last_worker) > dns.DNS1123_LABEL_MAX:
        yield FieldError(
            "metadata.name",
            f'too long: worker pod name "{last_worker}" must be no more than '
            f"{dns.DNS1123_LABEL_MAX} characters",
        )


def _models(model: BaseModel, path: str) -> Iterator[tuple[BaseModel, str]]:
    """``model`` and every model within it, each with its field path."""
    yield model, path
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        where = f"{path}.{field.alias or name}"
        if isinstance(value, BaseModel):
            yield from _models(value, where)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, BaseModel):
                    yield from _models(item, f"{where}[{key}]")


def _unknown_field_errors(job: DefaultedMPIJob) -> Iterator[FieldError]:
    """Fields no model declares: the API server would drop them, so a typo is refused. The
    status is the operator's to write, and its changes must not change the admission."""
    for model, path in [(job, ""), *_models(job.spec, "spec")]:
        known = [field.alias or name for name, field in type(model).model_fields.items()]
        for name in model.model_extra or {}:
            yield unknown_field(path, name, known)


def _maximum_errors(job: DefaultedMPIJob) -> Iterator[FieldError]:
    """Integers above their Go type's range (or a lower documented maximum), at any depth."""
    for model, path in _models(job.spec, "spec"):
        for name, field in type(model).model_fields.items():
            value = getattr(model, name)
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            keywords = crd_keywords(field)
            maximum = integer_maximum(keywords)
            if maximum is not None and value > maximum:
                reason = keywords.get("maximum_reason")
                yield FieldError(
                    f"{path}.{field.alias or name}",
                    f"must be less than or equal to {maximum}" + (f": {reason}" if reason else ""),
                )


def _replica_specs_errors(
    job: DefaultedMPIJob, allowed_restarts: tuple[str, ...], transport: TransportChecks
) -> Iterator[FieldError]:
    specs = job.spec.mpi_replica_specs
    base = "spec.mpiReplicaSpecs"
    if not specs:
        yield FieldError(base, "must have replica specs")
        return
    for replica_type in specs:
        if replica_type not in c.REPLICA_TYPES:
            yield FieldError(
                f"{base}[{replica_type}]",
                f"unsupported replica type: must be {c.LAUNCHER} or {c.WORKER}",
            )
    launcher = specs.get(c.LAUNCHER)
    if launcher is None:
        yield FieldError(f"{base}[{c.LAUNCHER}]", "must have Launcher replica spec")
    else:
        path = f"{base}[{c.LAUNCHER}]"
        yield from _replica_errors(path, launcher, job, c.LAUNCHER, allowed_restarts, transport)
        if launcher.replicas is not None and launcher.replicas != 1:
            yield FieldError(f"{path}.replicas", "must be 1")
    worker = specs.get(c.WORKER)
    if worker is not None:
        path = f"{base}[{c.WORKER}]"
        yield from _replica_errors(path, worker, job, c.WORKER, allowed_restarts, transport)
        if worker.replicas is None:
            yield FieldError(f"{path}.replicas", "must define number of replicas (at least 1)")
        elif worker.replicas < 1:
            yield FieldError(f"{path}.replicas", "must be greater than or equal to 1")


def _replica_errors(
    path: str,
    spec: ReplicaSpec,
    job: DefaultedMPIJob,
    role: str,
    allowed_restarts: tuple[str, ...],
    transport: TransportChecks,
) -> Iterator[FieldError]:
    yield from _one_of(f"{path}.restartPolicy", spec.restart_policy, allowed_restarts)
    mounts = OperatorMounts(transport.operator_mounts(job, role), c.RESERVED_VOLUMES)
    yield from template_errors(f"{path}.template", spec.template, mounts)
    if not transport.replaces_account(role):
        yield from launcher_account_errors(f"{path}.template", spec.template)


def _scheduling_policy_errors(job: DefaultedMPIJob) -> Iterator[FieldError]:
    policy = job.spec.run_policy.scheduling_policy
    if policy is None:
        return
    path = "spec.runPolicy.schedulingPolicy"
    yield from _non_negative(f"{path}.minAvailable", policy.min_available)
    yield from _non_negative(f"{path}.scheduleTimeoutSeconds", policy.schedule_timeout_seconds)
    yield from resource_list_errors(f"{path}.minResources", policy.min_resources)
    yield from topology_errors(job)


def _one_of(path: str, value: str | None, allowed: tuple[str, ...]) -> Iterator[FieldError]:
    if value not in allowed:
        choices = ", ".join(f'"{a}"' for a in allowed)
        expected = f"one of {choices}" if len(allowed) > 1 else choices
        yield FieldError(path, f"unsupported value {quoted(value)}: must be {expected}")


def _non_negative(path: str, value: int | None) -> Iterator[FieldError]:
    if value is not None and value < 0:
        yield FieldError(path, "must be greater than or equal to 0")


def _kind_of(value: object) -> str:
    """What a non-object document is, in the user's terms."""
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null" if value is None else type(value).__name__
