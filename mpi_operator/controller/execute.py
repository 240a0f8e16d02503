"""Carry out a sync plan: the writes in order, stopping at the first one that fails.

Stopping keeps upstream's guarantees: no worker before its PodGroup, no launcher before its
workers, and no status write that claims more than was done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from mpi_operator.controller.plan import Action, Plan
from mpi_operator.controller.status import WARNING, Event

log = logging.getLogger(__name__)

REASON_FAILED: Final = "MPIJobFailed"


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


@dataclass(frozen=True)
class Outcome:
    done: int
    error: str | None
    cache_behind: bool = False
    """The failed write met a 409 that only means the cache lags behind our own last write
    (an update's stale resourceVersion); not set for an object someone else owns."""

    @property
    def failed(self) -> bool:
        return self.error is not None


def execute(plan: Plan, writer: Writer, announce: Callable[[Event], None]) -> Outcome:
    """Perform ``plan``; events are announced even when a write fails midway."""
    for event in plan.events:
        announce(event)
    versions: dict[tuple[str, str, str], str] = {}
    for done, action in enumerate(plan.actions):
        try:
            written = writer.write(_with_latest_version(action, versions))
        except WriteError as error:
            if action.verb == "delete" and error.status == 404:
                continue  # already gone: the goal of the write holds
            log.warning("%s failed: %s", action.describe(), error)
            if error.reason:
                announce(Event(WARNING, error.reason, str(error)))
            # AlreadyExists only means the cache lags behind our own earlier create: retry
            # quietly instead of upstream's misleading "created failed" warning.
            elif (
                action.verb == "create"
                and action.resource in ("pods", "jobs")
                and error.status != 409
            ):
                role = "launcher" if action.resource == "jobs" else "worker"
                announce(Event(WARNING, REASON_FAILED, f"{role} pod created failed: {error}"))
            cache_behind = error.status == 409 and not error.reason
            return Outcome(done, f"{action.describe()}: {error}", cache_behind)
        version = ((written or {}).get("metadata") or {}).get("resourceVersion")
        if version:
            versions[_object_of(action)] = version
    return Outcome(len(plan.actions), plan.error)


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
    return Action(action.verb, action.resource, action.namespace, action.name, body)
