"""Job conditions with kubeflow/mpi-operator's exact update semantics.

Users and tools (Kueue, dashboards) read condition order and timestamps, so these rules
follow upstream precisely: same status and reason is a no-op, a changed condition moves to
the end of the list, and a terminal condition turns Running (and a previous Failed) False.
One addition, made when the status is written: the newest True condition that tells the job's
state goes last (``state_last``), so that ``.status.conditions[-1:].type``, the Kubeflow
family's State column and what dashboards read, names the job's state.
"""

from __future__ import annotations

from typing import TypedDict

from mpi_operator.api import constants as c


class Condition(TypedDict, total=False):
    """A condition of the MPIJob's status, or of its launcher Job (whose lastProbeTime is
    never read). Stored conditions may lack any key, so reads use ``.get``."""

    type: str
    status: str
    reason: str
    message: str
    lastUpdateTime: str
    lastTransitionTime: str


def find_condition(conditions: list[Condition], condition_type: str) -> Condition | None:
    return next((cond for cond in conditions if cond.get("type") == condition_type), None)


def is_true(conditions: list[Condition], condition_type: str) -> bool:
    cond = find_condition(conditions, condition_type)
    return cond is not None and cond.get("status") == "True"


def is_finished(conditions: list[Condition]) -> bool:
    return is_true(conditions, c.CONDITION_SUCCEEDED) or is_true(conditions, c.CONDITION_FAILED)


def set_condition(
    conditions: list[Condition],
    condition_type: str,
    status: str,
    reason: str,
    message: str,
    now: str,
) -> bool:
    """Set a condition in place; returns False when nothing changed."""
    current = find_condition(conditions, condition_type)
    if current is not None and current.get("status") == status and current.get("reason") == reason:
        return False
    transition = now
    if current is not None and current.get("status") == status:
        transition = current.get("lastTransitionTime", now)
    kept = [_filtered(cond, condition_type) for cond in conditions]
    conditions[:] = [cond for cond in kept if cond is not None]
    conditions.append(
        {
            "type": condition_type,
            "status": status,
            "reason": reason,
            "message": message,
            "lastUpdateTime": now,
            "lastTransitionTime": transition,
        }
    )
    return True


def _filtered(cond: Condition, new_type: str) -> Condition | None:
    """What an existing condition becomes when ``new_type`` is set (None: removed)."""
    old_type = cond.get("type")
    if old_type == new_type:
        return None
    if {old_type, new_type} == {c.CONDITION_RUNNING, c.CONDITION_RESTARTING}:
        return None
    terminal = new_type in (c.CONDITION_FAILED, c.CONDITION_SUCCEEDED)
    if terminal and old_type in (c.CONDITION_RUNNING, c.CONDITION_FAILED):
        return {**cond, "status": "False"}
    return cond


def remove_condition(conditions: list[Condition], condition_type: str) -> bool:
    """Remove a condition in place; returns False when there was none."""
    kept = [cond for cond in conditions if cond.get("type") != condition_type]
    removed = len(kept) != len(conditions)
    conditions[:] = kept
    return removed


def state_last(conditions: list[Condition]) -> None:
    """Move the newest True job-state condition to the end of the list, in place.

    Every change appends, so the newest is the last True one in the list: after a Suspended
    job's Running=False, after a gang's GangScheduled, the job's state still prints."""
    index = next(
        (
            at
            for at in range(len(conditions) - 1, -1, -1)
            if conditions[at].get("type") in c.JOB_STATE_CONDITIONS
            and conditions[at].get("status") == "True"
        ),
        None,
    )
    if index is not None:
        conditions.append(conditions.pop(index))
