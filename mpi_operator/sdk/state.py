"""Reading a job's state: its conditions, where it is in its life, and its gang."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mpi_operator.api import constants as c
from mpi_operator.api.models import JobCondition, MPIJob

FINISHED: Final = (c.CONDITION_SUCCEEDED, c.CONDITION_FAILED)
# Later entries win when several are True (a finished job keeps Created=True).
_PHASE_ORDER: Final = c.JOB_STATE_CONDITIONS
PENDING: Final = "Pending"


@dataclass(frozen=True)
class GangState:
    """The ``GangScheduled`` condition: whether the gang scheduler placed the whole job.

    ``reason``/``message`` say why a gang waits (for example a missing or closed queue)."""

    scheduled: bool
    reason: str
    message: str


def condition(job: MPIJob, condition_type: str) -> JobCondition | None:
    """The job's condition of that type, None when the operator has not set it."""
    for found in (job.status.conditions if job.status else None) or []:
        if found.type == condition_type:
            return found
    return None


def has_condition(job: MPIJob, condition_type: str, status: str = "True") -> bool:
    found = condition(job, condition_type)
    return found is not None and found.status == status


def phase(job: MPIJob) -> str:
    """Created, Running, Restarting, Suspended, Succeeded or Failed; Pending before any."""
    current = PENDING
    for condition_type in _PHASE_ORDER:
        if has_condition(job, condition_type):
            current = condition_type
    return current


def is_finished(job: MPIJob) -> bool:
    return any(has_condition(job, done) for done in FINISHED)


def gang_state(job: MPIJob) -> GangState | None:
    """None when the operator runs without gang scheduling (it never sets the condition)."""
    found = condition(job, c.CONDITION_GANG_SCHEDULED)
    if found is None:
        return None
    return GangState(found.status == "True", found.reason or "", found.message or "")
