"""In-memory defaults of an MPIJob, applied before validation and rendering.

Like upstream, defaults are never written back to the stored object: users reading
their MPIJob see what they wrote (plus what the CRD schema defaults).
"""

from __future__ import annotations

from typing import TypeVar

from mpi_operator.api import constants as c
from mpi_operator.api.models import APIModel, MPIJob, MPIJobSpec, ReplicaSpec, RunPolicy
from mpi_operator.api.rules import creating_api

_Narrowed = TypeVar("_Narrowed", bound=APIModel)


class DefaultedMPIJobSpec(MPIJobSpec):
    """An MPIJobSpec with its defaults applied: the runPolicy is always there."""

    run_policy: RunPolicy


class DefaultedMPIJob(MPIJob):
    """An MPIJob with its defaults applied: what validation, rendering and the sync read, so
    none of them checks for a missing spec or runPolicy.

    Only the types are narrower: the CRD is generated from ``MPIJob`` alone (these models are
    not part of the API), and ``to_dict`` writes the same fields the plain model would."""

    spec: DefaultedMPIJobSpec


def with_defaults(job: MPIJob) -> DefaultedMPIJob:
    """A copy of ``job`` with every default filled in; ``job`` is left untouched."""
    return fill_in_defaults(job.model_copy(deep=True))


def fill_in_defaults(job: MPIJob) -> DefaultedMPIJob:
    """``job`` with every default filled in, without a copy: for a job just parsed, which
    nothing else holds. Defaults go into its models only; the dicts it shares with the document
    it was parsed from (pod templates) are not written."""
    spec = job.spec or MPIJobSpec()
    run_policy = spec.run_policy or RunPolicy()
    if spec.transport is None:
        # What the CRD defaults it to in the version the job was written in.
        version = (job.api_version or "").rpartition("/")[2]
        spec.transport = c.DEFAULT_TRANSPORT.get(version, c.TRANSPORT_SSH)
    if run_policy.clean_pod_policy is None:
        # kubeflow.org/v1's deprecated spec-level field stands in for it.
        run_policy.clean_pod_policy = spec.clean_pod_policy or c.CLEAN_POD_POLICY_NONE
    if spec.slots_per_worker is None:
        spec.slots_per_worker = c.DEFAULT_SLOTS_PER_WORKER
    if spec.ssh_auth_mount_path is None:
        spec.ssh_auth_mount_path = c.DEFAULT_SSH_AUTH_MOUNT_PATH
    if spec.mpi_implementation is None:
        spec.mpi_implementation = c.OPENMPI
    if spec.launcher_creation_policy is None:
        spec.launcher_creation_policy = c.LAUNCHER_CREATION_AT_STARTUP
    if spec.run_launcher_as_worker is None:
        spec.run_launcher_as_worker = False
    replica_specs = spec.mpi_replica_specs
    if replica_specs is not None:
        launcher = replica_specs.get(c.LAUNCHER)
        if launcher is not None:
            restart = creating_api(job).launcher_restart_policy
            _default_replica(launcher, restart, replicas=1)
        worker = replica_specs.get(c.WORKER)
        if worker is not None:
            # Worker replicas stay unset: validation reports a missing count by name.
            _default_replica(worker, c.RESTART_POLICY_NEVER, replicas=None)
    spec.run_policy = run_policy
    job.spec = _narrowed(DefaultedMPIJobSpec, spec)
    return _narrowed(DefaultedMPIJob, job)


def _default_replica(spec: ReplicaSpec, restart_policy: str, replicas: int | None) -> None:
    if spec.restart_policy is None:
        spec.restart_policy = restart_policy
    if spec.replicas is None and replicas is not None:
        spec.replicas = replicas


def _narrowed(cls: type[_Narrowed], model: APIModel) -> _Narrowed:
    """``model``, whose values already fit ``cls`` (a subclass narrowing some field types), as
    a ``cls``: the same values, unknown fields and record of the fields set.

    Fields are passed by their wire names: an unknown field may have a field's Python name
    (``run_policy`` beside ``runPolicy``), and must stay unknown."""
    values = {
        field.alias or name: getattr(model, name)
        for name, field in type(model).model_fields.items()
    }
    return cls.model_construct(set(model.model_fields_set), **values, **(model.model_extra or {}))
