"""Upstream's Prometheus metrics, with the names and labels dashboards already query.

``mpi_operator_is_leader`` lives with leader election (``runtime/leader.py``).
"""

from __future__ import annotations

import platform
from datetime import datetime
from typing import Any, Final

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

from mpi_operator import __version__
from mpi_operator.api import constants as c
from mpi_operator.controller.conditions import Condition, find_condition, is_true
from mpi_operator.controller.ttl import parse_time

# No `<counter>_created` series: Go's client (upstream's, every Kubernetes controller's) exposes
# none, and each would be one more series per counter for dashboards to ignore.
disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus_client

JOBS_CREATED: Final = Counter(
    "mpi_operator_jobs_created", "Counts number of MPI jobs created"
)  # exposed as mpi_operator_jobs_created_total, as upstream's counter is
JOBS_SUCCESSFUL: Final = Counter(
    "mpi_operator_jobs_successful", "Counts number of MPI jobs successful"
)
JOBS_FAILED: Final = Counter("mpi_operator_jobs_failed", "Counts number of MPI jobs failed")
JOB_INFO: Final = Gauge(
    "mpi_operator_job_info",
    "Information about MPIJob",
    ["launcher", "namespace"],
)

# Ours, not upstream's.
# Always 1: the labels say which build answers, as Kubernetes' own components' build info does.
BUILD_INFO: Final = Gauge(
    "mpi_operator_build_info",
    "The operator's version and the Python it runs on; always 1",
    ["version", "python"],
)
BUILD_INFO.labels(__version__, platform.python_version()).set(1)
GANG_CAPACITY_NUDGES: Final = Counter(
    "mpi_operator_gang_capacity_nudges",
    "Waiting gangs whose scheduler was told that the cluster may have room for them",
)

# Seconds to a month: a job's pods start in seconds, a queued job may wait for days and a
# training run may last weeks. One set for both histograms, so their panels line up.
JOB_TIME_BUCKETS: Final = (
    1.0,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
    7200.0,
    14400.0,
    28800.0,
    86400.0,
    172800.0,
    604800.0,
    2592000.0,
)
JOBS_CREATION_TO_RUNNING: Final = Histogram(
    "mpi_operator_jobs_creation_to_running_seconds",
    "Seconds from an MPI job's creation to each time its Running condition turned True; "
    "includes the time it waited suspended, e.g. queued by Kueue",
    buckets=JOB_TIME_BUCKETS,
)
JOBS_DURATION: Final = Histogram(
    "mpi_operator_jobs_duration_seconds",
    "Seconds from an MPI job's startTime (set when it starts or resumes) to its "
    "completionTime, by outcome (succeeded or failed)",
    ["outcome"],
    buckets=JOB_TIME_BUCKETS,
)


def observe_transitions(
    metadata: dict[str, Any], before: dict[str, Any], after: dict[str, Any]
) -> None:
    """Observe the Running and finished transitions from status ``before`` to ``after``.

    The caller passes the status it replaced and the one the API server accepted, so each
    transition is observed once whatever the retries or restarts; the values are read from
    the job's own timestamps, never from when the operator happened to see them.
    """
    old = before.get("conditions") or []
    new = after.get("conditions") or []
    if is_true(new, c.CONDITION_RUNNING) and not is_true(old, c.CONDITION_RUNNING):
        running = find_condition(new, c.CONDITION_RUNNING) or {}
        waited = _seconds(metadata.get("creationTimestamp"), running.get("lastTransitionTime"))
        if waited is not None:
            JOBS_CREATION_TO_RUNNING.observe(waited)
    outcome = _outcome(new)
    if outcome and not _outcome(old):
        ran = _seconds(after.get("startTime"), after.get("completionTime"))
        if ran is not None:
            JOBS_DURATION.labels(outcome).observe(ran)


def _outcome(conditions: list[Condition]) -> str:
    if is_true(conditions, c.CONDITION_SUCCEEDED):
        return "succeeded"
    if is_true(conditions, c.CONDITION_FAILED):
        return "failed"
    return ""


def _time(value: Any) -> datetime | None:
    return parse_time(value) if isinstance(value, str) else None


def _seconds(start: Any, end: Any) -> float | None:
    """Seconds from ``start`` to ``end``; None unless both are ISO 8601 times with a zone, in order.

    Anyone allowed to write the status can put anything there: a bad value loses one
    observation, never the sync.
    """
    first, last = _time(start), _time(end)
    if first is None or last is None or last < first:
        return None
    return (last - first).total_seconds()
