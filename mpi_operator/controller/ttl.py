"""``runPolicy.ttlSecondsAfterFinished``: when a finished MPIJob is due for deletion.

The deadline is read from the job's own ``completionTime``, not from anything the operator
remembers, so a restarted operator deletes on time what an earlier one saw finish.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from mpi_operator.api.defaults import DefaultedMPIJob


def seconds_until_deletion(job: DefaultedMPIJob, completion_time: str, now: str) -> float | None:
    """Seconds left before the finished ``job`` is deleted (0 or less: now); None when it has
    no TTL, or a completion time the API server would not have written."""
    ttl = job.spec.run_policy.ttl_seconds_after_finished
    if ttl is None:
        return None
    completed, current = parse_time(completion_time), parse_time(now)
    if completed is None or current is None:
        return None
    try:
        deadline = completed + timedelta(seconds=ttl)
    except OverflowError:  # a completion time near year 9999: never due
        return None
    return (deadline - current).total_seconds()


def parse_time(text: str) -> datetime | None:
    """An RFC 3339 time with its zone, or None."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
