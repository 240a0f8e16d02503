"""A thread-safe cache of raw objects with secondary indexes (client-go's Indexer).

Objects handed out by :class:`Store` are the cached dicts themselves, shared by every reader and
by the informer that keeps them current. **Never mutate them**: deep-copy first
(``copy.deepcopy``) and send the copy to the API. Copying on every read would multiply the cost
of the hottest path (listing pods of a job on every reconcile) for no benefit to readers that
only look.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from mpi_operator.runtime.objects import (
    Object,
    controller_ref,
    labels_of,
    namespace_of,
    object_key,
    resource_version_of,
)

IndexFunc = Callable[[Object], Iterable[str]]
"""Maps an object to the index values it is filed under (none, one or several)."""

INDEX_CONTROLLER_UID = "controller-uid"


def index_by_controller_uid(obj: Object) -> list[str]:
    """The UID of the object's controller (the ownerReference with ``controller: true``)."""
    ref = controller_ref(obj)
    uid = ref.get("uid") if ref else None
    return [str(uid)] if uid else []


def index_by_namespaced_label(label: str) -> IndexFunc:
    """Files objects under ``namespace/value`` of ``label``, for per-namespace lookups of names
    that repeat across namespaces (a job name, for instance); objects without it are not
    indexed."""

    def index(obj: Object) -> list[str]:
        value = labels_of(obj).get(label)
        return [f"{namespace_of(obj)}/{value}"] if value is not None else []

    return index


@dataclass
class ReplaceDiff:
    """What :meth:`Store.replace` changed, so a relist can be turned into events."""

    added: list[Object] = field(default_factory=list)
    updated: list[tuple[Object, Object]] = field(default_factory=list)
    """``(old, new)`` pairs whose resourceVersion changed."""
    deleted: list[Object] = field(default_factory=list)
    """The last known state of objects that were cached but are not in the new list."""


class Store:
    """Objects by key (``namespace/name`` or ``name``), plus named indexes. Thread-safe."""

    def __init__(
        self,
        indexers: Mapping[str, IndexFunc] | None = None,
        key_func: Callable[[Object], str] = object_key,
    ) -> None:
        self._lock = threading.RLock()
        self._key_func = key_func
        self._items: dict[str, Object] = {}
        self._indexers: dict[str, IndexFunc] = {}
        # index name -> index value -> keys; and index name -> key -> values (to unfile on
        # update or delete without re-running the index function on the old object).
        self._indices: dict[str, dict[str, set[str]]] = {}
        self._filed: dict[str, dict[str, tuple[str, ...]]] = {}
        self._synced = threading.Event()
        self._resource_version = ""
        for name, func in (indexers or {}).items():
            self.add_indexer(name, func)

    # -- reads ---------------------------------------------------------------------------------

    def key_of(self, obj: Object) -> str:
        return self._key_func(obj)

    def get(self, key: str) -> Object | None:
        """The cached object (shared: do not mutate) or None."""
        with self._lock:
            return self._items.get(key)

    def list(self) -> list[Object]:
        """All cached objects (shared: do not mutate)."""
        with self._lock:
            return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def by_index(self, index: str, value: str) -> builtins.list[Object]:
        """Objects filed under ``value`` in ``index`` (shared: do not mutate)."""
        with self._lock:
            return [self._items[key] for key in sorted(self._index(index).get(value, ()))]

    def index_keys(self, index: str, value: str) -> builtins.list[str]:
        with self._lock:
            return sorted(self._index(index).get(value, ()))

    def index_values(self, index: str) -> builtins.list[str]:
        with self._lock:
            return sorted(self._index(index))

    def _index(self, index: str) -> dict[str, set[str]]:
        try:
            return self._indices[index]
        except KeyError:
            raise KeyError(f"no index named {index!r}") from None

    @property
    def resource_version(self) -> str:
        """The resourceVersion of the last list this store was filled from."""
        with self._lock:
            return self._resource_version

    def has_synced(self) -> bool:
        """True once the store holds a complete list (the first :meth:`replace`)."""
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    # -- writes (the informer's) ---------------------------------------------------------------

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Register an index; objects already cached are filed immediately."""
        with self._lock:
            if name in self._indexers:
                raise ValueError(f"index {name!r} already exists")
            self._indexers[name] = func
            self._indices[name] = {}
            self._filed[name] = {}
            for key, obj in self._items.items():
                self._file(name, key, obj)

    def upsert(self, obj: Object) -> Object | None:
        """Store ``obj`` (add or replace); returns the previous object under its key."""
        key = self._key_func(obj)
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                self._unfile(key)
            self._items[key] = obj
            for name in self._indexers:
                self._file(name, key, obj)
            return old

    def delete(self, key: str) -> Object | None:
        """Remove the object under ``key``; returns it, or None if it was not cached."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._unfile(key)
            return old

    def replace(self, objects: Iterable[Object], resource_version: str = "") -> ReplaceDiff:
        """Make the cache exactly ``objects`` (a fresh list) and report the difference.

        Objects present before but missing now are returned in ``deleted``: they vanished while
        no watch was open, and their delete events must be synthesized from the relist.
        """
        diff = ReplaceDiff()
        with self._lock:
            new_items: dict[str, Object] = {}
            for obj in objects:
                new_items[self._key_func(obj)] = obj
            for key, old in self._items.items():
                if key not in new_items:
                    diff.deleted.append(old)
            for key, obj in new_items.items():
                previous = self._items.get(key)
                if previous is None:
                    diff.added.append(obj)
                elif resource_version_of(previous) != resource_version_of(obj):
                    diff.updated.append((previous, obj))
            self._items = new_items
            for name in self._indexers:
                self._indices[name] = {}
                self._filed[name] = {}
                for key, obj in new_items.items():
                    self._file(name, key, obj)
            self._resource_version = resource_version
        self._synced.set()
        return diff

    def _file(self, name: str, key: str, obj: Object) -> None:
        values = tuple(dict.fromkeys(self._indexers[name](obj)))
        if not values:
            return
        self._filed[name][key] = values
        index = self._indices[name]
        for value in values:
            index.setdefault(value, set()).add(key)

    def _unfile(self, key: str) -> None:
        for name, filed in self._filed.items():
            values = filed.pop(key, ())
            index = self._indices[name]
            for value in values:
                keys = index.get(value)
                if keys is None:
                    continue
                keys.discard(key)
                if not keys:
                    del index[value]
