"""Carry out a sync plan: the writes in order, stopping at the first one that fails.

Stopping keeps upstream's guarantees: no worker before its gang's objects (upstream's
PodGroup), no launcher before its workers, and no status write that claims more than was done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from mpi_operator.controller.limits import MAX_CONCURRENT_WRITES
from mpi_operator.controller.plan import Action, Plan
from mpi_operator.controller.status import REASON_FAILED, WARNING, Event
from mpi_operator.desired.kinds import JOB, POD

log = logging.getLogger(__name__)


class WriteError(Exception):
    """A failed API write; ``status`` is the HTTP status code (0 when unknown).

    ``reason`` is set when the failure deserves a Warning event of that reason on the job.
    """

    def __init__(self, status: int, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class Writer(Protocol):
    def write(self, action: Action) -> dict[str, Any] | None:
        """Perform one write and return the object the server answered; raises WriteError."""
        ...


Answered = tuple[Action, dict[str, Any] | None]
"""A write the API server accepted, and the object it answered with."""


@dataclass(frozen=True)
class Outcome:
    done: int
    error: str | None
    cache_behind: bool = False
    """The failed write met a 409 that only means the cache lags behind our own last write
    (an update's stale resourceVersion); not set for an object someone else owns."""
    written: Sequence[Answered] = field(default_factory=tuple)
    """Each write that succeeded, as sent, with the object the server answered."""

    @property
    def failed(self) -> bool:
        return self.error is not None


def execute(
    plan: Plan,
    writer: Writer,
    announce: Callable[[Event], None],
    pool: Executor | None = None,
) -> Outcome:
    """Perform ``plan``; events are announced even when a write fails midway.

    Consecutive actions the plan marked with the same ``batch`` do not depend on each other
    (worker pods, say): with a ``pool`` they are sent together, up to MAX_CONCURRENT_WRITES at
    a time, and a failure stops the plan once that round of writes has answered.
    """
    for event in plan.events:
        announce(event)
    versions: dict[tuple[str, str, str], str] = {}
    succeeded: list[Answered] = []
    done = 0
    for batch in _rounds(plan.actions, pool is not None):
        actions = [_with_latest_version(action, versions) for action in batch]
        failed: tuple[Action, WriteError] | None = None
        for action, result in zip(actions, _send_all(actions, writer, pool), strict=True):
            if not isinstance(result, WriteError):
                succeeded.append((action, result))
                version = ((result or {}).get("metadata") or {}).get("resourceVersion")
                if version:
                    versions[_object_of(action)] = version
            elif not _goal_holds(action, result) and failed is None:
                failed = (action, result)
        if failed is not None:
            action, error = failed
            message = _failure(action, error, announce)
            return Outcome(done, message, error.status == 409 and not error.reason, succeeded)
        done += len(actions)
    return Outcome(len(plan.actions), plan.error, written=succeeded)


def _rounds(actions: Sequence[Action], concurrent: bool) -> Iterator[list[Action]]:
    """The actions in plan order, as rounds of writes that may be in flight together."""
    current: list[Action] = []
    for action in actions:
        joins = (
            concurrent
            and current
            and action.batch
            and action.batch == current[-1].batch
            and len(current) < MAX_CONCURRENT_WRITES
        )
        if current and not joins:
            yield current
            current = []
        current.append(action)
    if current:
        yield current


def _send_all(
    actions: Sequence[Action], writer: Writer, pool: Executor | None
) -> list[dict[str, Any] | WriteError | None]:
    def send(action: Action) -> dict[str, Any] | WriteError | None:
        try:
            return writer.write(action)
        except WriteError as error:
            return error

    if pool is None or len(actions) == 1:
        return [send(action) for action in actions]
    # The first write goes from this thread: one hand-off fewer per round.
    others = [pool.submit(send, action) for action in actions[1:]]
    return [send(actions[0]), *(future.result() for future in others)]


def _failure(action: Action, error: WriteError, announce: Callable[[Event], None]) -> str:
    log.warning("%s failed: %s", action.describe(), error)
    if error.reason:
        announce(Event(WARNING, error.reason, str(error)))
    # AlreadyExists only means the cache lags behind our own earlier create: retry
    # quietly instead of upstream's misleading "created failed" warning.
    elif (
        action.verb == "create"
        and action.resource in (POD.plural, JOB.plural)
        and error.status != 409
    ):
        role = "launcher" if action.resource == JOB.plural else "worker"
        announce(Event(WARNING, REASON_FAILED, f"{role} pod created failed: {error}"))
    return f"{action.describe()}: {error}"


def _goal_holds(action: Action, error: WriteError) -> bool:
    """A delete that finds nothing (404), or only another object of the name (a 409 on its
    uid precondition), leaves what it was sent to remove gone."""
    if action.verb != "delete":
        return False
    return error.status == 404 or (error.status == 409 and action.deleted_uid is not None)


def _object_of(action: Action) -> tuple[str, str, str]:
    return (action.resource.partition("/")[0], action.namespace, action.name)


def _with_latest_version(action: Action, versions: dict[tuple[str, str, str], str]) -> Action:
    """A later write of an object this plan already wrote carries the version it got back.

    (Resuming a launcher writes its status, then its spec, both planned from one cached copy.)
    """
    version = versions.get(_object_of(action))
    if version is None or action.body is None or action.verb == "create":
        return action
    body = {**action.body, "metadata": {**action.body["metadata"], "resourceVersion": version}}
    return replace(action, body=body)
