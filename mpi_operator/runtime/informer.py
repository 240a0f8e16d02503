"""An informer: a :class:`~mpi_operator.runtime.store.Store` kept current by a reflector thread,
plus event handlers told about every change.

Unlike client-go's shared informers, handlers run synchronously on the informer's own thread,
one event at a time. That is enough for controllers whose handlers only map an object to a key
and enqueue it; a slow handler delays this informer's cache, nothing else.

Why not the official client's ``kubernetes.informer.SharedInformer`` (new in kubernetes 37, read
before deciding): it lists in one unpaginated request and keeps typed models, which drop fields
they do not know and cost the memory a cache of thousands of jobs' children cannot spare; an
update handler gets the new object only, so a handler cannot tell what changed; it asks for no
bookmarks, so the resume point of a quiet resource grows old and a reconnect lists everything
again; a failed watch is reopened at once, with no backoff, and a 401 or 403 is retried forever
instead of stopping the process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Unpack

from mpi_operator.runtime.client import ApiError, Client, Resource
from mpi_operator.runtime.objects import Object
from mpi_operator.runtime.reflector import (
    EventHandler,
    ListerWatcher,
    Reflector,
    ReflectorOptions,
    ResourceListerWatcher,
    Transform,
    default_transform,
)
from mpi_operator.runtime.store import IndexFunc, Store

log = logging.getLogger(__name__)


class _FanOut(EventHandler):
    """Delivers each event to every registered handler; one failing handler does not stop the
    others."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.handlers: list[EventHandler] = []

    def on_add(self, obj: Object) -> None:
        for handler in self.handlers:
            self.deliver(handler.on_add, obj)

    def on_update(self, old: Object, new: Object) -> None:
        for handler in self.handlers:
            try:
                handler.on_update(old, new)
            except Exception:
                log.exception("%s: update handler failed", self.name)

    def on_delete(self, obj: Object) -> None:
        for handler in self.handlers:
            self.deliver(handler.on_delete, obj)

    def deliver(self, callback: Callable[[Object], None], obj: Object) -> None:
        try:
            callback(obj)
        except Exception:
            log.exception("%s: event handler failed", self.name)


class Informer:
    """Caches one kind of object and notifies handlers. Start with :meth:`start`, then wait for
    :meth:`wait_for_sync` before trusting the cache (an unsynced store is incomplete)."""

    def __init__(
        self,
        source: ListerWatcher,
        *,
        name: str,
        indexers: Mapping[str, IndexFunc] | None = None,
        **options: Unpack[ReflectorOptions],
    ) -> None:
        self.name = name
        self.store = Store(indexers)
        self._fan_out = _FanOut(name)
        self._reflector = Reflector(source, self.store, self._fan_out, name=name, **options)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_resource(
        cls,
        client: Client,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        name: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        **options: Unpack[ReflectorOptions],
    ) -> Informer:
        """An informer over the API server; ``namespace=None`` watches all namespaces."""
        source = ResourceListerWatcher(client, resource, namespace, label_selector, field_selector)
        return cls(source, name=name or resource.metric_label(), indexers=indexers, **options)

    @classmethod
    def optional_for_resource(
        cls,
        client: Client,
        resource: Resource,
        *,
        lost: str,
        namespace: str | None = None,
        field_selector: str | None = None,
        name: str | None = None,
        transform: Transform = default_transform,
    ) -> Informer:
        """An informer of a kind the operator can work without. When RBAC refuses it, it
        stops and says once what is ``lost`` without it, where a required kind's informer
        would retry until granted."""
        what = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
        informer: Informer

        def refused(error: ApiError) -> None:
            informer.stop()
            log.warning(
                "cannot list and watch %s (%s): %s; grant list and watch on %s and restart "
                "the operator",
                what,
                error,
                lost,
                what,
            )

        informer = cls.for_resource(
            client,
            resource,
            namespace=namespace,
            field_selector=field_selector,
            name=name,
            transform=transform,
            on_fatal=refused,
        )
        return informer

    def add_handler(self, handler: EventHandler) -> None:
        """Register ``handler``; objects already cached are replayed to it as adds first."""
        with self._reflector.dispatch_lock:
            for obj in self.store.list():
                self._fan_out.deliver(handler.on_add, obj)
            self._fan_out.handlers.append(handler)

    def add_event_handler(
        self,
        on_add: Callable[[Object], None] | None = None,
        on_update: Callable[[Object, Object], None] | None = None,
        on_delete: Callable[[Object], None] | None = None,
    ) -> EventHandler:
        handler = EventHandler(on_add, on_update, on_delete)
        self.add_handler(handler)
        return handler

    def start(self) -> None:
        """Run the reflector on a daemon thread (idempotent)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._reflector.run(self._stop)
        except Exception:  # the reflector catches everything; this is the last line of defence
            log.exception("%s: informer thread died", self.name)

    def stop(self, timeout: float | None = 5.0) -> bool:
        """Stop watching; True if the thread ended within ``timeout``. Called from the
        informer's own thread (an event handler, ``on_fatal``), it ends once the call returns."""
        self._stop.set()
        self._reflector.interrupt()
        if self._thread is None or self._thread is threading.current_thread():
            return self._thread is None
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def has_synced(self) -> bool:
        return self.store.has_synced()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self.store.wait_for_sync(timeout)

    @property
    def resource_version(self) -> str:
        return self._reflector.resource_version


def wait_for_cache_sync(informers: Iterable[Informer], timeout: float | None = None) -> bool:
    """True once every informer has synced; False if ``timeout`` (seconds, shared) runs out."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for informer in informers:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not informer.wait_for_sync(remaining):
            log.warning("%s: cache not synced in time", informer.name)
            return False
    return True
