"""Validation of an MPIJob: kubeflow/mpi-operator's rules, in its order, plus the ones it misses.

Every problem is reported with the path of the field at fault; validation never stops at
the first error, so a user fixes a job in one round.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from pydantic import ValidationError

from mpi_operator.api import constants as c
from mpi_operator.api.bounds import document_errors
from mpi_operator.api.defaults import with_defaults
from mpi_operator.api.errors import FieldError, InvalidMPIJobError, from_pydantic, quoted
from mpi_operator.api.v2beta1 import MPIJob, ReplicaSpec
from mpi_operator.quantity import InvalidQuantityError, Quantity

_DNS1035: Final = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_MAX: Final = 63


def parse_mpijob(obj: object) -> MPIJob:
    """Parse a kubeflow.org/v2beta1 MPIJob from its wire form; raises InvalidMPIJobError."""
    if not isinstance(obj, Mapping):
        raise InvalidMPIJobError(
            [FieldError("", f"must be an MPIJob object, found {_kind_of(obj)}")]
        )
    problems = document_errors(obj)
    if problems:
        raise InvalidMPIJobError(problems)
    mismatched = [
        FieldError(field, f"unsupported value {quoted(obj.get(field))}: must be {quoted(expected)}")
        for field, expected in (("apiVersion", c.API_VERSION), ("kind", c.KIND))
        if obj.get(field) != expected
    ]
    if mismatched:
        raise InvalidMPIJobError(mismatched)
    try:
        return MPIJob.model_validate(dict(obj), by_alias=True)
    except ValidationError as error:
        raise InvalidMPIJobError(from_pydantic(error)) from None


def validate(job: MPIJob) -> list[FieldError]:
    """Every problem of ``job``, evaluated with defaults applied."""
    return list(_errors(with_defaults(job)))


def load_valid_mpijob(obj: object) -> MPIJob:
    """Parse and validate; returns the job with defaults applied."""
    job = parse_mpijob(obj)
    errors = validate(job)
    if errors:
        raise InvalidMPIJobError(errors)
    return with_defaults(job)


def _errors(job: MPIJob) -> Iterator[FieldError]:
    yield from _name_errors(job)
    spec = job.spec
    if spec is None:
        yield FieldError("spec", "is required")
        return
    yield from _replica_specs_errors(job)
    if spec.slots_per_worker is not None and spec.slots_per_worker < 0:
        yield FieldError("spec.slotsPerWorker", "must be greater than or equal to 0")
    run_policy = spec.run_policy
    assert run_policy is not None  # filled in by with_defaults
    yield from _one_of(
        "spec.runPolicy.cleanPodPolicy", run_policy.clean_pod_policy, c.CLEAN_POD_POLICIES
    )
    for field, value in (
        ("ttlSecondsAfterFinished", run_policy.ttl_seconds_after_finished),
        ("activeDeadlineSeconds", run_policy.active_deadline_seconds),
        ("backoffLimit", run_policy.backoff_limit),
    ):
        yield from _non_negative(f"spec.runPolicy.{field}", value)
    if run_policy.managed_by is not None:
        yield from _one_of("spec.runPolicy.managedBy", run_policy.managed_by, c.MANAGED_BY_VALUES)
    if not spec.ssh_auth_mount_path:
        yield FieldError("spec.sshAuthMountPath", "must have a mount path for SSH credentials")
    yield from _one_of("spec.mpiImplementation", spec.mpi_implementation, c.MPI_IMPLEMENTATIONS)
    yield from _one_of(
        "spec.launcherCreationPolicy", spec.launcher_creation_policy, c.LAUNCHER_CREATION_POLICIES
    )
    yield from _scheduling_policy_errors(job)


def _name_errors(job: MPIJob) -> Iterator[FieldError]:
    if not job.name:
        yield FieldError("metadata.name", "is required")
        return
    # The last worker's pod name doubles as its DNS hostname, so it bounds the job name.
    last_worker = f"{job.name}-worker-{max(job.replicas(c.WORKER), 1) - 1}"
    if len(last_worker) > _DNS1035_MAX:
        yield FieldError(
            "metadata.name",
            f'too long: worker pod name "{last_worker}" must be no more than '
            f"{_DNS1035_MAX} characters",
        )
    elif not _DNS1035.match(last_worker):
        yield FieldError(
            "metadata.name",
            f'worker pod name "{last_worker}" is not a valid DNS-1035 label: it must consist '
            "of lower case alphanumeric characters or '-', start with a letter and end with "
            "an alphanumeric character",
        )


def _replica_specs_errors(job: MPIJob) -> Iterator[FieldError]:
    assert job.spec is not None
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
        yield from _replica_errors(path, launcher)
        if launcher.replicas is not None and launcher.replicas != 1:
            yield FieldError(f"{path}.replicas", "must be 1")
    worker = specs.get(c.WORKER)
    if worker is not None:
        path = f"{base}[{c.WORKER}]"
        yield from _replica_errors(path, worker)
        if worker.replicas is None:
            yield FieldError(f"{path}.replicas", "must define number of replicas (at least 1)")
        elif worker.replicas < 1:
            yield FieldError(f"{path}.replicas", "must be greater than or equal to 1")


def _replica_errors(path: str, spec: ReplicaSpec) -> Iterator[FieldError]:
    yield from _one_of(f"{path}.restartPolicy", spec.restart_policy, c.RESTART_POLICIES)
    yield from _template_errors(f"{path}.template", spec.template)


def _template_errors(path: str, template: dict[str, Any] | None) -> Iterator[FieldError]:
    """Shape checks on every part of a pod template the operator reads or extends."""
    template = template or {}
    metadata = template.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            yield FieldError(f"{path}.metadata", "must be an object")
        else:
            for field in ("labels", "annotations"):
                yield from _string_map(f"{path}.metadata.{field}", metadata.get(field))
    pod_spec = template.get("spec")
    if pod_spec is not None and not isinstance(pod_spec, dict):
        yield FieldError(f"{path}.spec", "must be an object")
        return
    pod_spec = pod_spec or {}
    containers = pod_spec.get("containers")
    if not containers:
        yield FieldError(f"{path}.spec.containers", "must define at least one container")
    elif not isinstance(containers, list):
        yield FieldError(f"{path}.spec.containers", "must be a list")
    else:
        for index, container in enumerate(containers):
            yield from _container_errors(f"{path}.spec.containers[{index}]", container)
    for index, container in enumerate(_list(pod_spec.get("initContainers"))):
        yield from _container_errors(f"{path}.spec.initContainers[{index}]", container)
    yield from _typed(f"{path}.spec.volumes", pod_spec.get("volumes"), list, "a list")
    yield from _typed(
        f"{path}.spec.hostNetwork", pod_spec.get("hostNetwork"), bool, "true or false"
    )
    for field in ("priorityClassName", "schedulerName"):
        yield from _typed(f"{path}.spec.{field}", pod_spec.get(field), str, "a string")
    dns_config = pod_spec.get("dnsConfig")
    yield from _typed(f"{path}.spec.dnsConfig", dns_config, dict, "an object")
    if isinstance(dns_config, dict):
        yield from _typed(
            f"{path}.spec.dnsConfig.searches", dns_config.get("searches"), list, "a list"
        )
    yield from _resource_list_errors(f"{path}.spec.overhead", pod_spec.get("overhead"))


def _container_errors(path: str, container: object) -> Iterator[FieldError]:
    if not isinstance(container, dict):
        yield FieldError(path, "must be an object")
        return
    for field in ("env", "volumeMounts", "command", "args"):
        yield from _typed(f"{path}.{field}", container.get(field), list, "a list")
    resources = container.get("resources")
    yield from _typed(f"{path}.resources", resources, dict, "an object")
    if isinstance(resources, dict):
        for field in ("requests", "limits"):
            yield from _resource_list_errors(f"{path}.resources.{field}", resources.get(field))


def _resource_list_errors(path: str, resources: object) -> Iterator[FieldError]:
    if resources is None:
        return
    if not isinstance(resources, dict):
        yield FieldError(path, "must be an object")
        return
    for name, raw in resources.items():
        try:
            Quantity.parse(raw)
        except InvalidQuantityError as error:
            yield FieldError(f"{path}[{name}]", str(error))


def _scheduling_policy_errors(job: MPIJob) -> Iterator[FieldError]:
    assert job.spec is not None and job.spec.run_policy is not None
    policy = job.spec.run_policy.scheduling_policy
    if policy is None:
        return
    path = "spec.runPolicy.schedulingPolicy"
    yield from _non_negative(f"{path}.minAvailable", policy.min_available)
    yield from _non_negative(f"{path}.scheduleTimeoutSeconds", policy.schedule_timeout_seconds)
    yield from _resource_list_errors(f"{path}.minResources", policy.min_resources)


def _one_of(path: str, value: str | None, allowed: tuple[str, ...]) -> Iterator[FieldError]:
    if value not in allowed:
        choices = ", ".join(f'"{a}"' for a in allowed)
        yield FieldError(path, f'unsupported value "{value}": must be one of {choices}')


def _non_negative(path: str, value: int | None) -> Iterator[FieldError]:
    if value is not None and value < 0:
        yield FieldError(path, "must be greater than or equal to 0")


def _typed(path: str, value: object, kind: type, noun: str) -> Iterator[FieldError]:
    if value is not None and not isinstance(value, kind):
        yield FieldError(path, f"must be {noun}")


def _string_map(path: str, value: object) -> Iterator[FieldError]:
    if value is None:
        return
    if not isinstance(value, dict):
        yield FieldError(path, "must be an object")
        return
    for key, item in value.items():
        if not isinstance(item, str):
            yield FieldError(f"{path}[{key}]", "must be a string")


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


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
