"""The MPIJob status a sync computes from what it observed: pure, no I/O.

Mirrors kubeflow/mpi-operator's status rules (conditions, reasons, messages, replica
counts, timestamps) so dashboards and scripts keep working, with the fixes listed in
docs/differences.md: eviction really finishes the job, Running is announced once per
transition, and a failed launcher's reason says what failed.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import metadata_of
from mpi_operator.controller.conditions import (
    Condition,
    find_condition,
    is_finished,
    set_condition,
)
from mpi_operator.controller.failures import (
    WorkerFailures,
    bounded,
    phase,
    pod_failure,
)
from mpi_operator.controller.ttl import parse_time

REASON_CREATED: Final = "MPIJobCreated"
REASON_RUNNING: Final = "MPIJobRunning"
REASON_SUCCEEDED: Final = "MPIJobSucceeded"
REASON_SUSPENDED: Final = "MPIJobSuspended"
REASON_RESUMED: Final = "MPIJobResumed"
REASON_FAILED: Final = "MPIJobFailed"
REASON_EVICTED: Final = "MPIJobEvicted"
REASON_RESTARTING: Final = "MPIJobRestarting"
REASON_WORKER_FAILED: Final = "WorkerFailed"
BACKOFF_LIMIT_EXCEEDED: Final = "BackoffLimitExceeded"
# The Job controller's message when a Job's backoffLimit is spent.
BACKOFF_LIMIT_MESSAGE: Final = "Job has reached the specified backoff limit"

WORKER_COUNTS_HOLD: Final = 30.0
"""Seconds after the last running worker started during which their count waits for the
launcher to run, so that one status write records both (docs/differences.md C18)."""

NORMAL: Final = "Normal"
WARNING: Final = "Warning"


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str


@dataclass
class StatusOutcome:
    """The new status and what the sync should announce about it."""

    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    succeeded: bool = False
    failed: bool = False
    # The status records a step that the next sync continues from (Running, then Succeeded).
    continued: bool = False


@dataclass(frozen=True)
class Observed:
    """What the sync saw in its caches this round."""

    launcher: dict[str, Any] | None
    launcher_pods: Sequence[dict[str, Any]]
    workers: Sequence[dict[str, Any]]
    suspended: bool
    failures: WorkerFailures = field(default_factory=WorkerFailures)


def current_status(job: DefaultedMPIJob) -> dict[str, Any]:
    """A private, mutable copy of the job's stored status."""
    if job.status is None:
        return {}
    return copy.deepcopy(job.status.model_dump(by_alias=True, exclude_none=True, mode="json"))


def mark_created(job: DefaultedMPIJob, status: dict[str, Any], now: str) -> Event | None:
    """The Created condition of a job seen for the first time (upstream: no conditions yet)."""
    conditions = status.setdefault("conditions", [])
    if conditions:
        return None
    message = f"MPIJob {job.namespace}/{job.name} is created."
    set_condition(conditions, c.CONDITION_CREATED, "True", REASON_CREATED, message, now)
    return Event(NORMAL, REASON_CREATED, message)


def compute_status(
    job: DefaultedMPIJob,
    status: dict[str, Any],
    seen: Observed,
    now: str,
    *,
    log_tail: bool = True,
) -> StatusOutcome:
    """Status after observing the launcher Job, its pods and the worker pods. Without
    ``log_tail``, failure messages leave out the failed containers' termination messages."""
    out = StatusOutcome(status=copy.deepcopy(status))
    status = out.status
    conditions: list[Condition] = status.setdefault("conditions", [])
    replica_statuses: dict[str, Any] = status.setdefault("replicaStatuses", {})
    key = f"{job.namespace}/{job.name}"

    _update_suspension(out, seen.suspended, now)

    running_launchers = 0
    if seen.launcher is not None:
        running_launchers = sum(1 for pod in seen.launcher_pods if phase(pod) == "Running")
        launcher_status: dict[str, Any] = {}
        failed = int((seen.launcher.get("status") or {}).get("failed") or 0)
        if failed:
            launcher_status["failed"] = failed
        completed = _job_condition(seen.launcher, "Complete") is not None
        if completed:
            launcher_status["succeeded"] = 1
        if completed and _ran_unseen(conditions, seen):
            _record_unseen_run(out, key, seen.launcher, now)
            out.continued = True
        elif completed:
            message = f"MPIJob {key} successfully completed."
            out.events.append(Event(NORMAL, REASON_SUCCEEDED, message))
            if not status.get("completionTime"):
                completion = (seen.launcher.get("status") or {}).get("completionTime")
                status["completionTime"] = completion or now
            set_condition(conditions, c.CONDITION_SUCCEEDED, "True", REASON_SUCCEEDED, message, now)
            out.succeeded = True
        elif failed_condition := _job_condition(seen.launcher, "Failed"):
            reason, message = _launcher_failure(
                key, failed_condition, seen.launcher_pods, log_tail=log_tail
            )
            _fail(out, reason, message, now)
        elif seen.failures.spent_by_launcher:
            condition: Condition = {
                "reason": BACKOFF_LIMIT_EXCEEDED,
                "message": f"{BACKOFF_LIMIT_MESSAGE} ({_shared_budget(seen.failures)})",
            }
            reason, message = _launcher_failure(
                key, condition, seen.launcher_pods, log_tail=log_tail
            )
            _fail(out, reason, message, now)
        elif running_launchers:
            launcher_status["active"] = running_launchers
        replica_statuses[c.LAUNCHER] = launcher_status

    worker_status, running_workers = _count_workers(seen.workers, seen.failures.recorded)
    replica_statuses[c.WORKER] = worker_status
    if not is_finished(conditions):
        _record_worker_failures(out, key, seen.failures, now, log_tail=log_tail)

    if seen.suspended:
        message = f"MPIJob {key} is suspended."
        set_condition(conditions, c.CONDITION_RUNNING, "False", REASON_SUSPENDED, message, now)
    elif is_finished(conditions):
        if find_condition(conditions, c.CONDITION_RUNNING) is None:
            at = status.get("completionTime") or now
            conditions.append(
                {
                    "type": c.CONDITION_RUNNING,
                    "status": "False",
                    "reason": REASON_RUNNING,
                    "message": f"MPIJob {key} is finished but Running condition was never set.",
                    "lastUpdateTime": at,
                    "lastTransitionTime": at,
                }
            )
    elif (
        seen.launcher is not None and running_launchers > 0 and running_workers == len(seen.workers)
    ):
        message = f"MPIJob {key} is running."
        if set_condition(conditions, c.CONDITION_RUNNING, "True", REASON_RUNNING, message, now):
            out.events.append(Event(NORMAL, REASON_RUNNING, f"MPIJob {key} is running"))
    return out


def worker_counts_hold(
    stored: dict[str, Any], computed: dict[str, Any], seen: Observed, now: str
) -> float | None:
    """Seconds to keep the ``stored`` status when ``computed`` differs from it only in the
    number of active workers and the launcher has been created but does not run yet; None
    means write ``computed``.

    Under load the scheduler starts a launcher's pod, created with the workers, tens of
    seconds after them: the launcher's start, which sets Running, writes the count with it.
    Held at most ``WORKER_COUNTS_HOLD`` after the last running worker started, and never a
    failure, a condition or a finished job's count."""
    if seen.suspended or seen.launcher is None or is_finished(computed.get("conditions") or []):
        return None
    if any(phase(pod) == "Running" for pod in seen.launcher_pods):
        return None
    if computed == stored or _with_active_workers_of(computed, stored) != stored:
        return None
    started, current = _last_worker_start(seen.workers), parse_time(now)
    if started is None or current is None:
        return None
    left = WORKER_COUNTS_HOLD - (current - started).total_seconds()
    # A start ahead of this clock (a node's clock skewed) holds nothing.
    return left if 0 < left <= WORKER_COUNTS_HOLD else None


def _last_worker_start(workers: Sequence[dict[str, Any]]) -> datetime | None:
    """When the last running worker's last container started; None when none runs or a
    running worker does not say (a container restarting, say)."""
    latest: datetime | None = None
    for pod in workers:
        if phase(pod) != "Running":
            continue
        started = [
            parse_time(str(((container.get("state") or {}).get("running") or {}).get("startedAt")))
            for container in (pod.get("status") or {}).get("containerStatuses") or []
        ]
        if not started or None in started:
            return None
        latest = max(filter(None, [latest, *started]))
    return latest


def _with_active_workers_of(status: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """``status`` with ``other``'s count of active workers."""
    replicas = dict(status.get("replicaStatuses") or {})
    workers = dict(replicas.get(c.WORKER) or {})
    active = ((other.get("replicaStatuses") or {}).get(c.WORKER) or {}).get("active")
    workers.pop("active", None)
    if active is not None:
        workers["active"] = active
    replicas[c.WORKER] = workers
    return {**status, "replicaStatuses": replicas}


def _ran_unseen(conditions: list[Condition], seen: Observed) -> bool:
    """Whether a completed launcher ran before any sync saw the job running: child changes
    are synced in batches (docs/differences.md C18), and a short job fits in one."""
    return (
        not seen.suspended
        and not is_finished(conditions)
        and find_condition(conditions, c.CONDITION_RUNNING) is None
    )


def _record_unseen_run(out: StatusOutcome, key: str, launcher: dict[str, Any], now: str) -> None:
    # Running first, dated when the launcher started; the next sync, which the status write's
    # watch event starts, records Succeeded. Watchers and Kueue see the job's real history,
    # not a skipped phase.
    started = (launcher.get("status") or {}).get("startTime") or now
    set_condition(
        out.status["conditions"],
        c.CONDITION_RUNNING,
        "True",
        REASON_RUNNING,
        f"MPIJob {key} is running.",
        started,
    )
    out.events.append(Event(NORMAL, REASON_RUNNING, f"MPIJob {key} is running"))


def _update_suspension(out: StatusOutcome, suspended: bool, now: str) -> None:
    conditions = out.status["conditions"]
    if suspended:
        if set_condition(
            conditions, c.CONDITION_SUSPENDED, "True", REASON_SUSPENDED, "MPIJob suspended", now
        ):
            out.events.append(Event(NORMAL, REASON_SUSPENDED, "MPIJob suspended"))
    elif find_condition(conditions, c.CONDITION_SUSPENDED) is not None and set_condition(
        conditions, c.CONDITION_SUSPENDED, "False", REASON_RESUMED, "MPIJob resumed", now
    ):
        out.events.append(Event(NORMAL, REASON_RESUMED, "MPIJob resumed"))
        out.status["startTime"] = now


def _count_workers(
    workers: Sequence[dict[str, Any]], recorded_failures: int
) -> tuple[dict[str, int], int]:
    """Active and succeeded workers as seen; failed ones as recorded over the job's life,
    since a failed worker is replaced (like the Job controller's ``failed``)."""
    counts = {"active": 0, "succeeded": 0, "failed": recorded_failures}
    for pod in workers:
        if phase(pod) == "Succeeded":
            counts["succeeded"] += 1
        elif phase(pod) == "Running":
            counts["active"] += 1
    # Zero counts are omitted on the wire, as upstream's omitempty does.
    return {k: v for k, v in counts.items() if v}, counts["active"]


def _record_worker_failures(
    out: StatusOutcome, key: str, failures: WorkerFailures, now: str, *, log_tail: bool
) -> None:
    """An event and the Restarting condition for each replaced worker; the Failed condition
    for the one that spent the job's retries."""
    namespace = key.partition("/")[0]
    # Failures recorded before this sync's, which count in index order, the fatal one last.
    earlier = failures.recorded - len(failures.replaced) - (failures.fatal is not None)
    for index, pod in enumerate(failures.replaced):
        name = metadata_of(pod).get("name", "")
        used = earlier + index + 1 + failures.launcher_failures
        message = pod_failure(pod, log_tail=log_tail).message(
            f"Worker pod {namespace}/{name} failed and is created again "
            f"({used} of {failures.limit} retries used)"
        )
        out.events.append(Event(WARNING, REASON_RESTARTING, message))
        conditions = out.status["conditions"]
        set_condition(conditions, c.CONDITION_RESTARTING, "True", REASON_RESTARTING, message, now)
    for pod in failures.ended:
        name = metadata_of(pod).get("name", "")
        message = f"Worker pod {namespace}/{name} ended before the launcher started; created again"
        out.events.append(Event(WARNING, REASON_RESTARTING, message))
    if failures.fatal is not None:
        name = metadata_of(failures.fatal).get("name", "")
        failure = pod_failure(failures.fatal, log_tail=log_tail)
        if failure.reason == "Evicted":
            reason = REASON_EVICTED
        else:
            reason = "/".join(filter(None, (REASON_WORKER_FAILED, failure.reason)))
        message = failure.message(
            f"Worker pod {namespace}/{name} failed and the job's retries are spent "
            f"({_shared_budget(failures)})"
        )
        _fail(out, reason, message, now)


def _shared_budget(failures: WorkerFailures) -> str:
    return (
        f"backoffLimit {failures.limit}: {failures.recorded} worker and "
        f"{failures.launcher_failures} launcher failures"
    )


def _fail(out: StatusOutcome, reason: str, message: str, now: str) -> None:
    out.events.append(Event(WARNING, reason, message))
    out.status.setdefault("completionTime", now)
    set_condition(out.status["conditions"], c.CONDITION_FAILED, "True", reason, message, now)
    out.failed = True


def _launcher_failure(
    key: str, condition: Condition, pods: Sequence[dict[str, Any]], *, log_tail: bool
) -> tuple[str, str]:
    reason = condition.get("reason") or REASON_FAILED
    message = condition.get("message") or f"MPIJob {key} has failed"
    if reason == BACKOFF_LIMIT_EXCEEDED:
        failed = [pod for pod in pods if phase(pod) == "Failed"]
        if failed:
            last = max(failed, key=lambda p: metadata_of(p).get("creationTimestamp", ""))
            failure = pod_failure(last, log_tail=log_tail)
            return f"{reason}/{failure.reason}", failure.message(message)
    return reason, bounded(message)


def _job_condition(job: dict[str, Any], condition_type: str) -> Condition | None:
    conditions: list[Condition] = (job.get("status") or {}).get("conditions") or []
    for cond in conditions:
        if cond.get("type") == condition_type and cond.get("status") == "True":
            return {**cond}
    return None
