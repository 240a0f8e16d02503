"""Watch events that only bring one of our own writes back.

A sync knows what it wrote. The watch event that shows the write in the caches tells the
controller nothing that sync did not know, and enqueueing the key for it costs a sync that
writes nothing: at thousands of jobs, one such sync for each object created and for each
status written. :class:`OwnWrites` remembers the resourceVersion each write made until the
object's next event, so the handlers can tell the echo apart from a change.

A key whose sync was skipped to wait for the caches (:mod:`expectations`) gets every event:
those events are what it waits for.
"""

from __future__ import annotations

import threading

from mpi_operator.runtime.objects import Object, metadata

_Object = tuple[str, str, str]
"""(resource plural, namespace, name)"""


class OwnWrites:
    """Thread-safe: syncs record, informer threads ask."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # What each written object's next event shows if it is only our write: (version, key).
        self._written: dict[_Object, tuple[str, str]] = {}
        self._waiting: set[str] = set()

    def wrote(self, key: str, resource: str, namespace: str, name: str, version: str) -> None:
        """A sync of ``key`` wrote the object, which the API server stored as ``version``."""
        with self._lock:
            self._written[(resource, namespace, name)] = (version, key)

    def waiting(self, key: str, waits: bool) -> None:
        """Whether ``key``'s last sync was skipped to wait for the caches to show our writes."""
        with self._lock:
            if waits:
                self._waiting.add(key)
            else:
                self._waiting.discard(key)

    def is_echo(self, resource: str, obj: Object) -> bool:
        """Whether this event of ``obj`` shows our last write of it and nothing else. The
        object's write is forgotten either way: a later event is someone else's change."""
        meta = metadata(obj)
        found = (resource, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        with self._lock:
            written = self._written.pop(found, None)
            return (
                written is not None
                and written[0] == meta.get("resourceVersion")
                and written[1] not in self._waiting
            )

    def forget(self, key: str) -> None:
        """The job of ``key`` is gone: drop what is remembered for it."""
        with self._lock:
            self._waiting.discard(key)
            for found in [found for found, (_, owner) in self._written.items() if owner == key]:
                del self._written[found]

    def __len__(self) -> int:
        with self._lock:
            return len(self._written)
