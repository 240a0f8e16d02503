"""What needs no cluster: validating a job and rendering the objects the operator would create.

Both use the operator's own code (``api.validation``, ``desired``), so a job that passes here
passes the operator, and ``render`` prints what ``mpi-operator render`` prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from gang import select_gang_scheduler
from mpi_operator.api.errors import FieldError, InvalidMPIJobError
from mpi_operator.api.v2beta1 import MPIJob
from mpi_operator.api.validation import load_valid_mpijob, parse_mpijob
from mpi_operator.api.validation import validate as _rules
from mpi_operator.desired.facts import ClusterFacts
from mpi_operator.desired.objects import desired_objects


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


def validate(job: JobLike) -> list[FieldError]:
    """Every problem the operator would find, by field path; empty when the job is valid."""
    try:
        parsed = parse_mpijob(wire_form(job))
    except InvalidMPIJobError as invalid:
        return invalid.errors
    return _rules(parsed)


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
) -> list[dict[str, Any]]:
    """The objects the operator would create, in creation order (Service, ConfigMap, Secret,
    PodGroup, worker Pods, launcher Job); as ``mpi-operator render`` with the same options.

    A job without a namespace renders in ``default``, where the API server would put it."""
    facts = ClusterFacts(cluster_domain=cluster_domain, priority_classes=priority_classes or {})
    valid = load_valid_mpijob(in_default_namespace(wire_form(job)))
    return desired_objects(valid, facts, select_gang_scheduler(gang_scheduling))


def in_default_namespace(document: Any) -> Any:
    """The job as the API server would store it when created without a namespace."""
    if isinstance(document, dict):
        metadata = document.get("metadata")
        if isinstance(metadata, dict) and not metadata.get("namespace"):
            return {**document, "metadata": {**metadata, "namespace": "default"}}
    return document
