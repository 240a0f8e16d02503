"""A job's validation, whole: the one place that says whether an MPIJob can run.

First the job's own rules (``api.validation``: the API server's, kubeflow/mpi-operator's and
those it misses, every problem by field path), with those of its transport, which this module
finds for it; then the problems that only show once its objects meet the cluster's facts and
the gang scheduler (:func:`render_errors`). The operator's admission and ``render`` both ask
here, so a job refused by one is refused by the other.
"""

from __future__ import annotations

from gang import GangScheduler
from mpi_operator.api.accounts import operator_account_errors
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob, with_defaults
from mpi_operator.api.errors import InvalidMPIJobError
from mpi_operator.api.models import MPIJob
from mpi_operator.api.validation import parse_with_defaults, rule_errors
from mpi_operator.desired.config import config_map_errors
from mpi_operator.desired.pod_templates import gang_annotation_errors
from mpi_operator.desired.transports import transport_of
from mpi_operator.field_errors import FieldError


def validate(job: MPIJob) -> list[FieldError]:
    """Every problem of ``job`` by its rules, evaluated with defaults applied."""
    return with_defaults_and_errors(job)[1]


def with_defaults_and_errors(job: MPIJob) -> tuple[DefaultedMPIJob, list[FieldError]]:
    """``with_defaults`` of ``job`` and :func:`validate` of it, from one copy of the job
    (a sync needs both, and the deep copy is the expensive part)."""
    defaulted = with_defaults(job)
    return defaulted, rule_errors(defaulted, transport_of(defaulted))


def parse_with_defaults_and_errors(
    obj: object, *, within_bounds: bool = False, admitted_at: tuple[str, ...] | None = None
) -> tuple[DefaultedMPIJob, list[FieldError]]:
    """The job ``obj`` holds, with defaults, and its problems by its rules; raises
    InvalidMPIJobError when ``obj`` is no MPIJob at all. ``within_bounds`` as for
    ``api.validation.parse_with_defaults``, ``admitted_at`` as for its ``rule_errors``."""
    job = parse_with_defaults(obj, within_bounds=within_bounds)
    return job, rule_errors(job, transport_of(job), admitted_at)


def load_valid_mpijob(obj: object) -> DefaultedMPIJob:
    """Parse and validate by the job's rules; returns the job with defaults applied."""
    job, errors = parse_with_defaults_and_errors(obj)
    if errors:
        raise InvalidMPIJobError(errors)
    return job


def job_errors(
    obj: object,
    facts: ClusterFacts,
    gang: GangScheduler | None,
    *,
    within_bounds: bool = False,
    admitted_at: tuple[str, ...] | None = None,
) -> tuple[DefaultedMPIJob, list[FieldError]]:
    """The job ``obj`` holds, with defaults, and every problem of it (none: it can run);
    raises InvalidMPIJobError when ``obj`` is no MPIJob at all. ``within_bounds`` and
    ``admitted_at`` as for :func:`parse_with_defaults_and_errors`."""
    job, errors = parse_with_defaults_and_errors(
        obj, within_bounds=within_bounds, admitted_at=admitted_at
    )
    return job, errors or render_errors(job, facts, gang)


def load_valid_job(obj: object, facts: ClusterFacts, gang: GangScheduler | None) -> DefaultedMPIJob:
    """The job ``obj`` holds, with defaults; raises InvalidMPIJobError naming every problem."""
    job, errors = job_errors(obj, facts, gang)
    if errors:
        raise InvalidMPIJobError(errors)
    return job


def render_errors(
    job: DefaultedMPIJob, facts: ClusterFacts, gang: GangScheduler | None
) -> list[FieldError]:
    """Problems of a valid job that only show once its objects meet the cluster's facts and
    the gang scheduler: a ConfigMap too large for the API server, the transport's objects it
    would refuse (a DNS search list, a Role), pod annotations over its limit with the gang
    scheduler's added, a template naming the operator's own account in its namespace."""
    transport = transport_of(job)
    return [
        *config_map_errors(job, facts),
        *transport.errors(job, facts),
        *gang_annotation_errors(job, gang),
        *operator_account_errors(job, facts, transport),
    ]
