"""List, then watch, and keep a :class:`~mpi_operator.runtime.store.Store` equal to the server.

The loop, as client-go's reflector runs it:

1. **List** everything (paginated), replace the store, and turn the difference into events:
   objects that disappeared while nobody watched get a delete event, so handlers never keep a
   key alive for an object that is gone.
2. **Watch** from the list's resourceVersion with ``allowWatchBookmarks=true`` and a random
   ``timeoutSeconds`` between 5 and 10 minutes (so many watches do not all reconnect at once).
   Every event, BOOKMARKs included, moves the resume point forward; when the server ends the
   watch the next one starts from there, without listing again.
3. **410 Gone** (an HTTP status or an ERROR event with code 410) means the resume point is
   older than the server remembers: list again (step 1).
4. Any other failure waits a jittered exponential backoff (0.8 s doubling to 30 s, reset after
   two healthy minutes) and retries; 401/403 additionally calls ``on_fatal`` — upstream exits
   the process there, as credentials or RBAC will not fix themselves.

Objects pass through ``transform`` before they are stored (by default dropping
``metadata.managedFields``, a large share of every object that no controller reads), then
through :func:`share_strings`, so that the cache holds one copy of each key and short value.

Why not the official client's ``kubernetes.watch.Watch`` (kubernetes 37, read before deciding):
it only watches, so listing, the store and the deletes missed while nobody watched stay the
caller's; on a 410 it retries once from the same expired resourceVersion instead of listing
again, then raises; any other failure ends the stream, with no backoff; it asks for no
bookmarks; and by default it decodes every event into the typed models, which drop fields they
do not know and cost the memory this cache saves.
"""

from __future__ import annotations

import logging
import random
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from mpi_operator.runtime.client import (
    ApiError,
    Client,
    ListResult,
    Resource,
    WatchEvent,
    is_forbidden,
    is_gone,
    is_unauthorized,
)
from mpi_operator.runtime.clock import REAL_CLOCK, Clock
from mpi_operator.runtime.objects import Object, metadata, resource_version_of
from mpi_operator.runtime.store import Store

log = logging.getLogger(__name__)

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"
ERROR = "ERROR"

Transform = Callable[[Object], Object]


def strip_managed_fields(obj: Object) -> Object:
    """Drop ``metadata.managedFields`` (in place: the object was just decoded for us alone)."""
    metadata(obj).pop("managedFields", None)
    return obj


# Values up to this length are shared: enough for constants ("True", "Running", API versions,
# kinds, images), label values and timestamps; not uids (36), SSH keys, scripts or messages.
SHARED_VALUE_MAX_LEN = 32
# Deeper than this an object is stored as decoded: Kubernetes objects nest about 12 levels, and a
# bound keeps the walk's recursion far below the interpreter's limit whatever the server sends.
SHARED_MAX_DEPTH = 64
# sys.intern's table drops a string once nothing else refers to it (CPython 3.11, 3.12.5+, 3.13),
# so strings of deleted objects do not pile up. Where interned strings are immortal (3.12.0-3.12.4,
# free-threaded builds) every resourceVersion ever seen would stay: there nothing is shared.
_INTERNED_ARE_MORTAL = sys.getrefcount(sys.intern(f"probe-{id(object())}")) < 2**20


def share_strings(obj: Object) -> Object:
    """``obj`` with its dict keys and its short string values interned.

    ``json.loads`` shares a key's string only within one document, so every object decoded
    from its own watch event would otherwise carry its own "metadata", "labels", "True"...;
    across a cache of thousands of objects those copies are a large share of its memory.
    """
    if not _INTERNED_ARE_MORTAL:
        return obj
    shared: Object = _shared(obj, SHARED_MAX_DEPTH)
    return shared


def _shared(node: Any, depth: int) -> Any:
    kind = type(node)
    if kind is str:
        return sys.intern(node) if len(node) <= SHARED_VALUE_MAX_LEN else node
    if depth == 0 or (kind is not dict and kind is not list):
        return node
    if kind is list:
        return [_shared(item, depth - 1) for item in node]
    # A dict's values are handled inline, not by a call each: this runs on every event the
    # cache sees, and most values are strings.
    shared: dict[str, Any] = {}
    for key, value in node.items():
        kind = type(value)
        if kind is str:
            if len(value) <= SHARED_VALUE_MAX_LEN:
                value = sys.intern(value)
        elif kind is dict or kind is list:
            value = _shared(value, depth - 1)
        shared[sys.intern(key)] = value
    return shared


def chain_transforms(*transforms: Transform) -> Transform:
    """One transform applying ``transforms`` in order."""

    def chained(obj: Object) -> Object:
        for transform in transforms:
            obj = transform(obj)
        return obj

    return chained


default_transform: Transform = strip_managed_fields


class Watch(Protocol):
    def __iter__(self) -> Iterator[WatchEvent]: ...
    def close(self) -> None: ...


class ListerWatcher(Protocol):
    """Where a reflector gets its objects: the API server, or a fake in unit tests."""

    def list(self, transform: Transform | None) -> ListResult:
        """Every object, each passed through ``transform`` (when given) as it arrives."""
        ...

    def watch(self, resource_version: str, timeout_seconds: int) -> Watch: ...


@dataclass(frozen=True)
class ResourceListerWatcher:
    """Lists and watches one resource through a :class:`Client`."""

    client: Client
    resource: Resource
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    def list(self, transform: Transform | None) -> ListResult:
        return self.client.list(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            transform=transform,
        )

    def watch(self, resource_version: str, timeout_seconds: int) -> Watch:
        return self.client.watch(
            self.resource,
            self.namespace,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=True,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )


class EventHandler:
    """Callbacks for cache changes. They run on the informer's thread: keep them short
    (enqueue a key) and never mutate the objects they receive."""

    def __init__(
        self,
        on_add: Callable[[Object], None] | None = None,
        on_update: Callable[[Object, Object], None] | None = None,
        on_delete: Callable[[Object], None] | None = None,
    ) -> None:
        self._on_add = on_add
        self._on_update = on_update
        self._on_delete = on_delete

    def on_add(self, obj: Object) -> None:
        if self._on_add is not None:
            self._on_add(obj)

    def on_update(self, old: Object, new: Object) -> None:
        """Not called when the resourceVersion did not change (nothing happened)."""
        if self._on_update is not None:
            self._on_update(old, new)

    def on_delete(self, obj: Object) -> None:
        """``obj`` is the final state from the DELETED event, or the last cached state when the
        deletion was only noticed by a relist."""
        if self._on_delete is not None:
            self._on_delete(obj)


class Backoff:
    """Exponential delays with jitter, back to ``initial`` after ``reset_after`` quiet seconds
    (client-go's reflector backoff: 800 ms → 30 s, factor 2, jitter 1.0, reset after 2 min)."""

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        clock: Clock = REAL_CLOCK,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self._clock = clock
        self._rng = rng
        self._current = initial
        self._last: float | None = None

    def next(self) -> float:
        now = self._clock.monotonic()
        if self._last is not None and now - self._last > self.reset_after:
            self._current = self.initial
        self._last = now
        delay = self._current * (1.0 + self._rng() * self.jitter)
        self._current = min(self._current * self.factor, self.cap)
        return delay


class _ResourceExpiredError(Exception):
    """The watch's resourceVersion expired (410): list again."""


class ReflectorOptions(TypedDict, total=False):
    """The reflector's settings that an informer passes through; absent ones keep the
    reflector's defaults."""

    transform: Transform | None
    on_fatal: Callable[[ApiError], None] | None
    clock: Clock
    rng: random.Random | None


class Reflector:
    """Keeps ``store`` in sync with ``source`` and reports every change to ``handler``."""

    min_watch_timeout = 300
    max_watch_timeout = 600

    def __init__(
        self,
        source: ListerWatcher,
        store: Store,
        handler: EventHandler,
        *,
        name: str = "reflector",
        transform: Transform | None = default_transform,
        on_fatal: Callable[[ApiError], None] | None = None,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self.name = name
        self._source = source
        self._store = store
        self._handler = handler
        self._transform = (
            share_strings if transform is None else chain_transforms(transform, share_strings)
        )
        self._on_fatal = on_fatal
        self._clock = clock
        self._rng = rng or random.Random()
        self._backoff = Backoff(clock=clock, rng=self._rng.random)
        self._resource_version = ""
        self._needs_list = True
        self._watch: Watch | None = None
        self._watch_lock = threading.Lock()
        # Held while the store changes and the handler hears about it, so a handler added
        # meanwhile (which replays the store) sees every object exactly once.
        self.dispatch_lock = threading.RLock()

    @property
    def resource_version(self) -> str:
        """Where the next watch resumes."""
        return self._resource_version

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop`` is set."""
        while not stop.is_set():
            try:
                self.list_and_watch(stop)
            except _ResourceExpiredError:
                log.info("%s: resourceVersion %s expired, listing again", self.name, self._rv())
            except ApiError as error:
                if stop.is_set():
                    break
                self._failed(error)
            except Exception:
                if stop.is_set():
                    break
                log.exception("%s: list/watch failed", self.name)
            if stop.is_set():
                break
            self._clock.wait(stop, self._backoff.next())

    def interrupt(self) -> None:
        """Close the open watch (from any thread) so :meth:`run` notices ``stop`` at once."""
        with self._watch_lock:
            watch = self._watch
        if watch is not None:
            watch.close()

    def list_and_watch(self, stop: threading.Event) -> None:
        """One cycle: list if needed, then watch until the server ends it, again and again.

        Returns only when ``stop`` is set; raises on errors (``_ResourceExpiredError`` on 410).
        """
        if self._needs_list:
            self.relist()
        while not stop.is_set():
            self.watch_once(stop)

    def relist(self) -> None:
        # Transformed page by page: a list of every pod, whole, would be the process's peak.
        result = self._source.list(self._transform)
        objects = result.items
        with self.dispatch_lock:
            diff = self._store.replace(objects, result.resource_version)
            self._resource_version = result.resource_version
            self._needs_list = False
            for gone in diff.deleted:
                self._notify(self._handler.on_delete, gone)
            for added in diff.added:
                self._notify(self._handler.on_add, added)
            for old, new in diff.updated:
                self._notify_update(old, new)
        log.debug(
            "%s: listed %d objects at resourceVersion %s (%d added, %d updated, %d deleted)",
            self.name,
            len(objects),
            result.resource_version,
            len(diff.added),
            len(diff.updated),
            len(diff.deleted),
        )

    def watch_once(self, stop: threading.Event) -> None:
        """Open one watch from the current resourceVersion and apply its events."""
        timeout = self._rng.randint(self.min_watch_timeout, self.max_watch_timeout)
        try:
            watch = self._source.watch(self._resource_version, timeout)
        except ApiError as error:
            if is_gone(error):
                self._needs_list = True
                raise _ResourceExpiredError from error
            raise
        with self._watch_lock:
            self._watch = watch
        started = self._clock.monotonic()
        try:
            if stop.is_set():
                return
            received = self._consume(watch, stop)
        finally:
            with self._watch_lock:
                self._watch = None
            watch.close()
        if not received and not stop.is_set() and self._clock.monotonic() - started < 1.0:
            # A watch the server (or a proxy) closes at once, empty, would otherwise be
            # reopened in a tight loop; client-go treats it as an error, and so do we.
            raise ApiError(0, "VeryShortWatch", "watch closed within a second with no events")

    def _consume(self, events: Iterable[WatchEvent], stop: threading.Event) -> int:
        """Apply events until the watch ends; returns how many arrived."""
        received = 0
        for event_type, obj in events:
            if stop.is_set():
                return received
            received += 1
            if event_type == ERROR:
                error = ApiError.from_status(obj)
                if is_gone(error):
                    self._needs_list = True
                    raise _ResourceExpiredError from error
                raise error
            if event_type == BOOKMARK:
                # A bookmark carries only a resourceVersion: "nothing you watch changed up to
                # here". Resuming from it avoids a 410 after long quiet periods.
                self._resource_version = resource_version_of(obj) or self._resource_version
                continue
            if event_type not in (ADDED, MODIFIED, DELETED):
                log.warning("%s: ignoring watch event of type %r", self.name, event_type)
                continue
            obj = self._transform(obj)
            self._apply(event_type, obj)
            self._resource_version = resource_version_of(obj) or self._resource_version
        return received

    def _apply(self, event_type: str, obj: Object) -> None:
        with self.dispatch_lock:
            if event_type == DELETED:
                self._store.delete(self._store.key_of(obj))
                self._notify(self._handler.on_delete, obj)
                return
            old = self._store.upsert(obj)
            if old is None:
                self._notify(self._handler.on_add, obj)
            else:
                self._notify_update(old, obj)

    def _notify_update(self, old: Object, new: Object) -> None:
        if resource_version_of(old) == resource_version_of(new):
            return
        try:
            self._handler.on_update(old, new)
        except Exception:
            log.exception("%s: update handler failed", self.name)

    def _notify(self, callback: Callable[[Object], None], obj: Object) -> None:
        # A broken handler must not stop the cache from following the server.
        try:
            callback(obj)
        except Exception:
            log.exception("%s: event handler failed", self.name)

    def _failed(self, error: ApiError) -> None:
        if is_unauthorized(error) or is_forbidden(error):
            log.error("%s: not allowed to list/watch: %s", self.name, error)
            if self._on_fatal is not None:
                try:
                    self._on_fatal(error)
                except Exception:
                    log.exception("%s: on_fatal hook failed", self.name)
            return
        log.warning("%s: list/watch failed: %s", self.name, error)

    def _rv(self) -> str:
        return self._resource_version or '""'
