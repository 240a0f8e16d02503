"""Writes of ours that the caches have not shown yet, per reconcile key.

A controller that plans from caches and syncs again before its own last writes reach them plans
from the past: it re-creates what it just created (AlreadyExists) and writes status on top of a
resourceVersion it has itself replaced (409 Conflict). Both are wasted requests, and the second
one's retry waits behind backoff. client-go's controllers keep "expectations" for this; here a
key's writes are remembered until the caches show each of them, and a sync that comes earlier is
skipped: the cache event that shows the write enqueues the key again. A deadline bounds the wait
should that event never come (a watch that lost it, an object deleted at once).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mpi_operator.runtime.clock import REAL_CLOCK, Clock
from mpi_operator.runtime.objects import Object

DEFAULT_TIMEOUT = 30.0

Lookup = Callable[[str, str, str], Object | None]
"""``(resource plural, namespace, name)`` → the cached object, or None."""


@dataclass(frozen=True)
class Written:
    """One successful write: ``replaced`` is the resourceVersion it replaced, None for a create;
    ``deleted_uid`` the uid of the object a delete removed."""

    resource: str
    namespace: str
    name: str
    replaced: str | None = None
    deleted_uid: str | None = None

    def shown_by(self, lookup: Lookup) -> bool:
        cached = lookup(self.resource, self.namespace, self.name)
        if self.deleted_uid is not None:
            return ((cached or {}).get("metadata") or {}).get("uid") != self.deleted_uid
        if self.replaced is None:
            return cached is not None
        version = ((cached or {}).get("metadata") or {}).get("resourceVersion")
        return cached is None or version != self.replaced


class Expectations:
    """Thread-safe; one entry per key with writes still to show up."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, clock: Clock = REAL_CLOCK) -> None:
        self.timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[float, tuple[Written, ...]]] = {}

    def expect(self, key: str, writes: Iterable[Written]) -> None:
        """Remember ``writes`` (replacing what was remembered for ``key``)."""
        pending = tuple(writes)
        with self._lock:
            if pending:
                self._waiting[key] = (self._clock.monotonic() + self.timeout, pending)
            else:
                self._waiting.pop(key, None)

    def wait_left(self, key: str, lookup: Lookup) -> float | None:
        """Seconds still to wait for ``key``'s writes to show, or None once they all have
        (or the deadline passed); then the key is forgotten."""
        with self._lock:
            entry = self._waiting.get(key)
        if entry is None:
            return None
        deadline, pending = entry
        left = deadline - self._clock.monotonic()
        if left > 0 and not all(write.shown_by(lookup) for write in pending):
            return left
        with self._lock:
            if self._waiting.get(key) == entry:
                del self._waiting[key]
        return None

    def forget(self, key: str) -> None:
        with self._lock:
            self._waiting.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._waiting)
