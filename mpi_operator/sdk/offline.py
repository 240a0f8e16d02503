"""What needs no cluster: validating a job and rendering the objects the operator would create.

Both use the operator's own code (``desired.validation``, ``desired``), so a job that passes here
passes the operator, and ``render`` prints what ``mpi-operator render`` prints.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Final, Protocol

from gang import scheduler_name_of, select_gang_scheduler
from mpi_operator.api.accounts import operator_account_errors
from mpi_operator.api.cluster import (
    STANDARD_OPERATOR_ACCOUNT,
    ClusterFacts,
    operator_account_of,
    operator_account_problems,
    rendering_flag_problems,
)
from mpi_operator.api.errors import InvalidMPIJobError
from mpi_operator.api.models import MPIJob
from mpi_operator.api.validation import parse_mpijob
from mpi_operator.desired.objects import iter_desired_objects
from mpi_operator.desired.transports import transport_of
from mpi_operator.desired.validation import load_valid_job, with_defaults_and_errors
from mpi_operator.desired.validation import validate as _rules
from mpi_operator.field_errors import FieldError


class _Buildable(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


JobLike = MPIJob | Mapping[str, Any] | _Buildable
"""A job as a model, as its wire form (a dict, e.g. from YAML), or as a ``JobBuilder``."""


def wire_form(job: JobLike) -> Any:
    """The job's wire form; anything else is returned as is, for the parser to refuse."""
    if isinstance(job, MPIJob):
        return job.to_dict()
    if isinstance(job, Mapping):
        return dict(job)
    to_dict = getattr(job, "to_dict", None)
    return to_dict() if callable(to_dict) else job


def validate(
    job: JobLike, *, operator_account: str = STANDARD_OPERATOR_ACCOUNT
) -> list[FieldError]:
    """Every problem the operator would find, by field path; empty when the job is valid.

    ``operator_account``: the NAMESPACE/NAME of the account the operator runs as, which no
    template in its namespace may name (empty: unknown); an invalid one raises ``ValueError``.
    """
    facts = _facts(operator_account=operator_account)
    try:
        parsed = parse_mpijob(wire_form(job))
    except InvalidMPIJobError as invalid:
        return invalid.errors
    defaulted, errors = with_defaults_and_errors(parsed)
    return [*errors, *operator_account_errors(defaulted, facts, transport_of(defaulted))]


def checked(job: JobLike) -> MPIJob:
    """The job as given (no defaults added); raises ``InvalidJobError`` listing every problem."""
    parsed = parse_mpijob(wire_form(job))
    errors = _rules(parsed)
    if errors:
        raise InvalidMPIJobError(errors)
    return parsed


def render(
    job: JobLike,
    *,
    gang_scheduling: str | None = None,
    cluster_domain: str = "",
    priority_classes: Mapping[str, int] | None = None,
    operator_account: str = STANDARD_OPERATOR_ACCOUNT,
) -> list[dict[str, Any]]:
    """The objects the operator would create, in creation order (Service, ConfigMap, Secret,
    PodGroup, worker Pods, launcher Job); as ``mpi-operator render`` with the same options.

    A job without a namespace renders in ``default``, where the API server would put it."""
    return list(
        iter_render(
            job,
            gang_scheduling=gang_scheduling,
            cluster_domain=cluster_domain,
            priority_classes=priority_classes,
            operator_account=operator_account,
        )
    )


def iter_render(
    job: JobLike,
    *,
    gang_scheduling: str | None = None,
    cluster_domain: str = "",
    priority_classes: Mapping[str, int] | None = None,
    operator_account: str = STANDARD_OPERATOR_ACCOUNT,
) -> Iterator[dict[str, Any]]:
    """``render``, one object at a time, so thousands of worker pods are never all in memory.

    Everything is checked before the first object: a job that cannot be rendered raises
    ``InvalidMPIJobError`` (one problem per field path), an option that would land invalid in
    every pod, or an invalid ``operator_account`` (as ``validate``'s), raises ``ValueError``."""
    facts = _facts(gang_scheduling, cluster_domain, priority_classes, operator_account)
    gang = select_gang_scheduler(gang_scheduling)
    valid = load_valid_job(as_stored(wire_form(job)), facts, gang)
    return iter_desired_objects(valid, facts, gang)


def _facts(
    gang_scheduling: str | None = None,
    cluster_domain: str = "",
    priority_classes: Mapping[str, int] | None = None,
    operator_account: str = STANDARD_OPERATOR_ACCOUNT,
) -> ClusterFacts:
    """The options as the cluster's facts; raises ``ValueError`` naming every bad one."""
    problems = [
        *rendering_flag_problems(scheduler_name_of(gang_scheduling or ""), cluster_domain),
        *operator_account_problems(operator_account),
    ]
    if problems:
        raise ValueError("; ".join(problems))
    return ClusterFacts(
        cluster_domain=cluster_domain,
        priority_classes=priority_classes or {},
        operator_account=operator_account_of(operator_account),
    )


def as_stored(document: Any) -> Any:
    """The job as the API server would store it: in the default namespace when it names none,
    and with a uid, which every child's ownerReference needs (the API server refuses an
    empty one). A manifest has none, so it gets one derived from the namespace and name: the
    same input always renders the same objects."""
    if not isinstance(document, dict):
        return document
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return document
    stored = dict(metadata)
    if stored.get("namespace") in (None, ""):
        stored["namespace"] = "default"
    if stored.get("uid") in (None, ""):
        identity = f"{stored.get('namespace')}/{stored.get('name')}"
        stored["uid"] = str(uuid.uuid5(_RENDER_UID_NAMESPACE, identity))
    return {**document, "metadata": stored}


# Any fixed UUID works; this one is uuid5(NAMESPACE_URL, "kubeflow.org/mpijobs").
_RENDER_UID_NAMESPACE: Final = uuid.uuid5(uuid.NAMESPACE_URL, "kubeflow.org/mpijobs")
