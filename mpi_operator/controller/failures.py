"""Failed pods of a job: which workers to replace, when the job's retries are spent, and
how to say why in a condition message.

A worker pod that has failed never runs again (the kubelet restarts containers, not pods),
so a job left with one hangs: mpirun retries a dead host, or, with ``WaitForWorkersReady``,
the launcher never starts. Its failures share ``runPolicy.backoffLimit`` with the launcher's
own failed attempts, as the Job controller counts every failed pod of a Job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import is_terminating
from mpi_operator.field_errors import one_line

# What the API server defaults a Job's backoffLimit to; the launcher Job gets it when the
# MPIJob sets none.
DEFAULT_BACKOFF_LIMIT: Final = 6
# The kubelet keeps at most 4 KiB of a termination message (2 KiB of log with
# FallbackToLogsOnError); a condition message is at most 1,024 characters in all.
MAX_MESSAGE_LENGTH: Final = 1024
_ELLIPSIS: Final = "..."


@dataclass(frozen=True)
class WorkerFailures:
    """This sync's verdict on the job's failed worker pods."""

    replaced: Sequence[dict[str, Any]] = field(default_factory=tuple)
    """Failed workers to delete and create again under the same name."""
    fatal: dict[str, Any] | None = None
    """The failed worker that spent the job's last retry (not replaced)."""
    recorded: int = 0
    """Worker failures over the job's life, these included (``replicaStatuses.Worker.failed``)."""
    limit: int = DEFAULT_BACKOFF_LIMIT
    launcher_failures: int = 0
    ended: Sequence[dict[str, Any]] = field(default_factory=tuple)
    """Workers that ended well before any launcher existed (an sshd stopped by SIGTERM exits
    0): created again without counting, or a job waiting for ready workers would wait forever."""

    @property
    def spent_by_launcher(self) -> bool:
        """Whether the launcher's failed attempts spent what worker failures left of the
        retries. Without worker failures the Job controller fails the launcher Job itself, at
        the same count."""
        return (
            self.fatal is None
            and self.recorded > 0
            and self.recorded + self.launcher_failures > self.limit
        )


def backoff_limit(job: DefaultedMPIJob) -> int:
    limit = job.spec.run_policy.backoff_limit
    return DEFAULT_BACKOFF_LIMIT if limit is None else limit


def recorded_worker_failures(status: dict[str, Any]) -> int:
    worker = (status.get("replicaStatuses") or {}).get(c.WORKER) or {}
    return _count(worker.get("failed"))


def launcher_failures(launcher: dict[str, Any] | None) -> int:
    return _count(((launcher or {}).get("status") or {}).get("failed"))


def _count(value: object) -> int:
    """A count read from a status anyone may write: a positive int, else 0."""
    return value if isinstance(value, int) and value > 0 else 0


def judge_worker_failures(
    workers: Sequence[dict[str, Any]],
    recorded: int,
    launcher_failed: int,
    limit: int,
    *,
    launcher_exists: bool,
) -> WorkerFailures:
    """Replace failed workers, in index order, while the job has retries left.

    A pod already being deleted is not counted again: its deletion is a replacement under way.
    """
    replaced: list[dict[str, Any]] = []
    fatal = None
    live = [pod for pod in workers if not is_terminating(pod)]
    ended = () if launcher_exists else tuple(p for p in live if phase(p) == "Succeeded")
    for pod in live:
        if phase(pod) != "Failed":
            continue
        recorded += 1
        if recorded + launcher_failed > limit:
            fatal = pod
            break
        replaced.append(pod)
    return WorkerFailures(tuple(replaced), fatal, recorded, limit, launcher_failed, ended)


@dataclass(frozen=True)
class PodFailure:
    reason: str
    """The pod's own reason (``Evicted``), else its first terminated container's (``OOMKilled``)."""
    summary: str
    """Which container exited with which code, or the pod's message."""
    last_words: str = ""
    """The container's termination message (with ``FallbackToLogsOnError``, its log's tail),
    escaped."""

    def message(self, head: str) -> str:
        summary = f"{head}: {self.summary}" if self.summary else head
        return bounded(summary, self.last_words)


def pod_failure(pod: dict[str, Any], *, log_tail: bool = True) -> PodFailure:
    """Why a pod failed; without ``log_tail``, never its containers' termination messages
    (which may be their logs' tails), only their exit codes and reasons."""
    status = pod.get("status") or {}
    if status.get("reason"):
        return PodFailure(str(status["reason"]), escape(str(status.get("message") or "")))
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if isinstance(terminated, dict):
            return PodFailure(
                str(terminated.get("reason") or "Error"),
                escape(
                    f"container {container.get('name')} exited with code "
                    f"{terminated.get('exitCode')}"
                ),
                escape(str(terminated.get("message") or "")) if log_tail else "",
            )
    return PodFailure("", escape(str(status.get("message") or "")))


def escape(text: str) -> str:
    """A log tail on one line of ``kubectl describe``, unable to move the terminal's cursor:
    the field errors' escaping."""
    return one_line(text.strip())


def bounded(head: str, tail: str = "") -> str:
    """``head: tail`` in at most MAX_MESSAGE_LENGTH characters. The head is kept whole where it
    fits; the tail loses its beginning, since the end of a log says what went wrong."""
    if not tail:
        return _clip_end(head)
    message = f"{head}: {tail}"
    if len(message) <= MAX_MESSAGE_LENGTH:
        return message
    room = MAX_MESSAGE_LENGTH - len(head) - 2 - len(_ELLIPSIS)
    if room <= 0:
        return _clip_end(head)
    return f"{head}: {_ELLIPSIS}{tail[-room:]}"


def _clip_end(message: str) -> str:
    if len(message) <= MAX_MESSAGE_LENGTH:
        return message
    return message[: MAX_MESSAGE_LENGTH - len(_ELLIPSIS)] + _ELLIPSIS


def phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")
