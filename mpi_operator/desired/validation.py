"""A job's validation, whole: the one place that says whether an MPIJob can run.

First the job's own rules (``api.validation``: the API server's, kubeflow/mpi-operator's and
those it misses, every problem by field path), then the problems that only show once its
objects meet the cluster's facts and the gang scheduler (:func:`render_errors`). The operator's
admission and ``render`` both ask here, so a job refused by one is refused by the other.
"""

from __future__ import annotations

from gang import GangScheduler
from mpi_operator.api.accounts import operator_account_errors
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.errors import InvalidMPIJobError
from mpi_operator.api.validation import parse_with_defaults_and_errors
from mpi_operator.desired.config import config_map_errors
from mpi_operator.desired.pod_templates import gang_annotation_errors
from mpi_operator.desired.transports import transport_of
from mpi_operator.field_errors import FieldError


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
    ``admitted_at`` as for ``api.validation.parse_with_defaults_and_errors``."""
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
    return [
        *config_map_errors(job, facts),
        *transport_of(job).errors(job, facts),
        *gang_annotation_errors(job, gang),
        *operator_account_errors(job, facts),
    ]
