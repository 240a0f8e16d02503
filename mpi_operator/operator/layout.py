"""The cluster's layout for a gang strategy whose objects name groups of nodes
(``gang.WithClusterLayout``: Volcano's HyperNodes): the cached objects of its layout kinds and
the nodes' labels, handed to every sync as ``ClusterFacts.layout``.

The layout kinds are optional in a cluster: they are cached only when served, never waited for,
and a refusal by RBAC stops their cache with one warning. Until every one of them and the nodes
have been listed, and after a refusal, the layout is unknown (None), which the strategy reads as
"name no groups". Built again only after a change that matters (a layout object, a node's
labels), and otherwise the same object, so comparing facts costs nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from mpi_operator.api.cluster import ClusterLayout
from mpi_operator.runtime.client import Client, Resource
from mpi_operator.runtime.informer import Informer
from mpi_operator.runtime.objects import Object

log = logging.getLogger(__name__)


def layout_informer(client: Client, resource: Resource) -> Informer:
    """A layout kind's cache. When RBAC refuses it, it says so once and stops."""
    return Informer.optional_for_resource(
        client, resource, lost="gang objects name no groups of nodes"
    )


class LayoutCache:
    """``ClusterLayout`` from the nodes' labels and the layout kinds' caches (by plural)."""

    def __init__(self, nodes: Informer | None, kinds: Mapping[str, Informer]) -> None:
        self._nodes, self._kinds = nodes, dict(kinds)
        self._lock = threading.Lock()
        self._stale = True
        self._layout = ClusterLayout()
        if nodes is None or not kinds:
            return
        nodes.add_event_handler(self._changed, self._labels_changed, self._changed)
        for informer in kinds.values():
            informer.add_event_handler(self._changed, self._updated, self._changed)

    @property
    def informers(self) -> list[Informer]:
        """What this layout is read from: started and stopped with the caches."""
        return list(self._kinds.values())

    def current(self) -> ClusterLayout | None:
        """The layout; None while it is unknown."""
        nodes = self._nodes
        if nodes is None or not self._kinds:
            return None
        readers = [nodes, *self._kinds.values()]
        if any(informer.stopped or not informer.has_synced() for informer in readers):
            return None
        with self._lock:
            if self._stale:
                # Marked fresh before reading: a change during the reads marks it stale again.
                self._stale = False
                self._layout = ClusterLayout(
                    {
                        node["metadata"]["name"]: node["metadata"].get("labels") or {}
                        for node in nodes.store.list()
                    },
                    {plural: tuple(i.store.list()) for plural, i in self._kinds.items()},
                )
            return self._layout

    def _changed(self, obj: Object) -> None:
        self._stale = True

    def _updated(self, old: Object, new: Object) -> None:
        self._stale = True

    def _labels_changed(self, old: Object, new: Object) -> None:
        # Nodes change every few seconds (their status); only their labels matter here.
        if old["metadata"].get("labels") != new["metadata"].get("labels"):
            self._stale = True
