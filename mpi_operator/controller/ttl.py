"""``runPolicy.ttlSecondsAfterFinished``, which means what each API's own operator made of it.

- A ``kubeflow.org/v1`` job (``api.rules.creating_api``) is deleted that
  long after its ``completionTime``, as training-operator deletes it (Flyte relies on it). The
  deadline is read from the job's own status, not from anything the operator remembers, so a
  restarted operator deletes on time what an earlier one saw finish.
- A ``kubeflow.org/v2beta1`` job stays, as kubeflow/mpi-operator keeps it: the TTL goes to its
  launcher Job, which the Job controller deletes that long after the Job finished. It is
  given only once the MPIJob's status records the finish, so a launcher Job deleted early can
  never be created again and run the job twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.rules import creating_api


def deletes_the_job(job: DefaultedMPIJob) -> bool:
    """Whether the TTL deletes the MPIJob itself (kubeflow.org/v1's rule), or only its launcher
    Job (kubeflow.org/v2beta1's)."""
    return creating_api(job).ttl_deletes_the_job


def launcher_ttl(job: DefaultedMPIJob) -> int | None:
    """The TTL a finished kubeflow.org/v2beta1 job's launcher Job carries; None for none."""
    return None if deletes_the_job(job) else job.spec.run_policy.ttl_seconds_after_finished


def seconds_until_deletion(job: DefaultedMPIJob, completion_time: str, now: str) -> float | None:
    """Seconds left before the finished ``job`` is deleted (0 or less: now); None when it is
    not to be deleted: no TTL, a kubeflow.org/v2beta1 job, or a completion time the API
    server would not have written."""
    ttl = job.spec.run_policy.ttl_seconds_after_finished
    if ttl is None or not deletes_the_job(job):
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
