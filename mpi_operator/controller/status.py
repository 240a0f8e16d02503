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
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api.v2beta1 import MPIJob
from mpi_operator.controller.conditions import (
    find_condition,
    is_finished,
    set_condition,
)

REASON_CREATED: Final = "MPIJobCreated"
REASON_RUNNING: Final = "MPIJobRunning"
REASON_SUCCEEDED: Final = "MPIJobSucceeded"
REASON_SUSPENDED: Final = "MPIJobSuspended"
REASON_RESUMED: Final = "MPIJobResumed"
REASON_FAILED: Final = "MPIJobFailed"
REASON_EVICTED: Final = "MPIJobEvicted"
BACKOFF_LIMIT_EXCEEDED: Final = "BackoffLimitExceeded"
MAX_MESSAGE_LENGTH: Final = 1024

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


@dataclass(frozen=True)
class Observed:
    """What the sync saw in its caches this round."""

    launcher: dict[str, Any] | None
    launcher_pods: Sequence[dict[str, Any]]
    workers: Sequence[dict[str, Any]]
    suspended: bool


def truncate(message: str) -> str:
    if len(message) <= MAX_MESSAGE_LENGTH:
        return message
    return message[: MAX_MESSAGE_LENGTH - 3] + "..."


def current_status(job: MPIJob) -> dict[str, Any]:
    """A private, mutable copy of the job's stored status."""
    if job.status is None:
        return {}
    return copy.deepcopy(job.status.model_dump(by_alias=True, exclude_none=True, mode="json"))


def mark_created(job: MPIJob, status: dict[str, Any], now: str) -> Event | None:
    """The Created condition of a job seen for the first time (upstream: no conditions yet)."""
    conditions = status.setdefault("conditions", [])
    if conditions:
        return None
    message = f"MPIJob {job.namespace}/{job.name} is created."
    set_condition(conditions, c.CONDITION_CREATED, "True", REASON_CREATED, message, now)
    return Event(NORMAL, REASON_CREATED, message)


def compute_status(job: MPIJob, status: dict[str, Any], seen: Observed, now: str) -> StatusOutcome:
    """Status after observing the launcher Job, its pods and the worker pods."""
    out = StatusOutcome(status=copy.deepcopy(status))
    status = out.status
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    replica_statuses: dict[str, Any] = status.setdefault("replicaStatuses", {})
    key = f"{job.namespace}/{job.name}"

    _update_suspension(out, seen.suspended, now)

    running_launchers = 0
    if seen.launcher is not None:
        running_launchers = sum(1 for pod in seen.launcher_pods if _phase(pod) == "Running")
        launcher_status: dict[str, Any] = {}
        failed = int((seen.launcher.get("status") or {}).get("failed") or 0)
        if failed:
            launcher_status["failed"] = failed
        completed = _job_condition(seen.launcher, "Complete") is not None
        if completed:
            launcher_status["succeeded"] = 1
        if completed and _ran_unseen(conditions, seen):
            _record_unseen_run(out, key, seen.launcher, now)
        elif completed:
            message = f"MPIJob {key} successfully completed."
            out.events.append(Event(NORMAL, REASON_SUCCEEDED, message))
            if not status.get("completionTime"):
                completion = (seen.launcher.get("status") or {}).get("completionTime")
                status["completionTime"] = completion or now
            set_condition(conditions, c.CONDITION_SUCCEEDED, "True", REASON_SUCCEEDED, message, now)
            out.succeeded = True
        elif failed_condition := _job_condition(seen.launcher, "Failed"):
            reason, message = _launcher_failure(key, failed_condition, seen.launcher_pods)
            out.events.append(Event(WARNING, reason, message))
            status.setdefault("completionTime", now)
            set_condition(conditions, c.CONDITION_FAILED, "True", reason, message, now)
            out.failed = True
        elif running_launchers:
            launcher_status["active"] = running_launchers
        replica_statuses[c.LAUNCHER] = launcher_status

    worker_status, running_workers, evicted = _count_workers(seen.workers)
    replica_statuses[c.WORKER] = worker_status

    if evicted:
        message = f"{evicted}/{len(seen.workers)} workers are evicted"
        if set_condition(conditions, c.CONDITION_FAILED, "True", REASON_EVICTED, message, now):
            out.events.append(Event(WARNING, REASON_EVICTED, message))
        # Upstream leaves completionTime unset here, so the job never finishes and its pods
        # are never cleaned up (kubeflow/mpi-operator#647).
        status.setdefault("completionTime", now)

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


def _ran_unseen(conditions: list[dict[str, Any]], seen: Observed) -> bool:
    """Whether a completed launcher ran before any sync saw the job running: child changes
    are synced in batches (docs/differences.md C18), and a short job fits in one."""
    return (
        not seen.suspended
        and not is_finished(conditions)
        and find_condition(conditions, c.CONDITION_RUNNING) is None
    )


def _record_unseen_run(out: StatusOutcome, key: str, launcher: dict[str, Any], now: str) -> None:
    # Running first, dated when the launcher started; the write triggers the next sync, which
    # records Succeeded. Watchers and Kueue see the job's real history, not a skipped phase.
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


def _count_workers(workers: Sequence[dict[str, Any]]) -> tuple[dict[str, int], int, int]:
    counts = {"active": 0, "succeeded": 0, "failed": 0}
    evicted = 0
    for pod in workers:
        phase = _phase(pod)
        if phase == "Failed":
            counts["failed"] += 1
            evicted += (pod.get("status") or {}).get("reason") == "Evicted"
        elif phase == "Succeeded":
            counts["succeeded"] += 1
        elif phase == "Running":
            counts["active"] += 1
    # Zero counts are omitted on the wire, as upstream's omitempty does.
    return {k: v for k, v in counts.items() if v}, counts["active"], evicted


def _launcher_failure(
    key: str, condition: dict[str, Any], pods: Sequence[dict[str, Any]]
) -> tuple[str, str]:
    reason = condition.get("reason") or REASON_FAILED
    message = condition.get("message") or f"MPIJob {key} has failed"
    if reason == BACKOFF_LIMIT_EXCEEDED:
        failed = [pod for pod in pods if _phase(pod) == "Failed"]
        if failed:
            last = max(failed, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp", ""))
            pod_reason, pod_message = _pod_failure(last)
            reason = f"{reason}/{pod_reason}"
            message = f"{message}: {pod_message}"
    return reason, truncate(message)


def _pod_failure(pod: dict[str, Any]) -> tuple[str, str]:
    """Why a pod failed: its own reason, else its first terminated container's."""
    status = pod.get("status") or {}
    if status.get("reason"):
        return status["reason"], status.get("message", "")
    # Pods failed by their containers carry no pod-level reason; upstream then reports
    # "BackoffLimitExceeded/" with an empty message.
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated:
            reason = terminated.get("reason") or "Error"
            detail = (
                f"container {container.get('name')} exited with code {terminated.get('exitCode')}"
            )
            if terminated.get("message"):
                detail += f": {terminated['message']}"
            return reason, detail
    return "", status.get("message", "")


def _job_condition(job: dict[str, Any], condition_type: str) -> dict[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == condition_type and cond.get("status") == "True":
            return dict(cond)
    return None


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")
