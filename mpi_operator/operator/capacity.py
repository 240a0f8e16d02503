"""Nudging waiting gangs when the cluster may have room for them.

Some gang schedulers look at a gang they turned down again only when its own objects change
(a pod added, its group object added or updated), not when a node is added or a pod goes
away. When the strategy says its scheduler needs a nudge, the operator watches nodes
and bound pods; a change that may free capacity marks every waiting gang's job, and the job's
next sync (its own worker, through the queue) patches the strategy's stamp onto the gang's
waiting objects.

The pure part decides (:func:`frees_capacity`, :func:`gangs_to_nudge`); :class:`NudgeSchedule`
keeps the rate: at most one nudge per gang per ``interval`` seconds, a burst of changes
(nodes joining together, a job's pods going) coalesced into one, ``quiet`` seconds after the
change so the scheduler has seen it too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from gang import WithCapacityNudge
from mpi_operator.api import constants as c
from mpi_operator.controller.domain_room import (
    BLOCKING_EFFECTS,
    REQUESTS,
    Amounts,
    NodeLoad,
    allocatable_of,
    hold,
    requests_of,
)
from mpi_operator.runtime.client import NODES, PODS, Client
from mpi_operator.runtime.clock import REAL_CLOCK, Clock
from mpi_operator.runtime.informer import Informer
from mpi_operator.runtime.objects import Object, controller_ref, make_key
from mpi_operator.runtime.reflector import EventHandler

log = logging.getLogger(__name__)

# Gang objects indexed under this value of INDEX_GANG_WAITING: their gangs are not placed yet.
WAITING: Final = "waiting"
NUDGE_QUIET: Final = 1.0
NUDGE_INTERVAL: Final = 5.0
NODES_INFORMER: Final = "nodes"
BOUND_PODS_INFORMER: Final = "bound-pods"
# Pods that hold a node's resources: bound and not finished. A pod leaving this selection
# (deleted, or finished) is a watch DELETED event.
BOUND_PODS_SELECTOR: Final = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


def slim_node(node: Object) -> Object:
    """A node as the operator keeps it: its labels (the hostfile's topology order, the
    layout) and what decides whether new pods may land on it and how many."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    kept = {k: meta[k] for k in ("name", "uid", "resourceVersion") if k in meta}
    return {
        "metadata": {**kept, "labels": meta.get("labels") or {}},
        "spec": {k: spec[k] for k in ("unschedulable", "taints") if k in spec},
        "status": {"allocatable": (node.get("status") or {}).get("allocatable") or {}},
    }


def slim_pod(pod: Object) -> Object:
    """A bound pod as the operator keeps it: which one it is, its node, and what it holds
    there (its effective requests)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return {
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta
        },
        "spec": {"nodeName": spec.get("nodeName")},
        REQUESTS: requests_of(spec),
    }


@dataclass(frozen=True)
class Change:
    """One event of the capacity watch: ``old`` None for an add, ``new`` None for a delete."""

    resource: str
    old: Object | None
    new: Object | None


def frees_capacity(change: Change) -> bool:
    """Whether pods that did not fit before may fit after ``change``: a node added that takes
    pods, a node made schedulable, relabelled (it may join a topology domain), rid of a taint
    that kept pods off or grown in some allocatable resource, or a pod gone from its node
    (deleted, or finished)."""
    if change.resource == PODS.plural:
        # Every pod of the watch is bound and unfinished: one leaving it frees its share.
        return change.new is None and change.old is not None
    if change.new is None or not _takes_pods(change.new):
        return False
    old = change.old
    if old is None or not _takes_pods(old):
        return True
    if _blocking_taints(change.new) < _blocking_taints(old):
        return True
    if (old.get("metadata") or {}).get("labels") != (change.new.get("metadata") or {}).get(
        "labels"
    ):
        return True
    before, after = allocatable_of(old), allocatable_of(change.new)
    return any(amount > before.get(name, 0) for name, amount in after.items())


def _takes_pods(node: Object) -> bool:
    return not (node.get("spec") or {}).get("unschedulable")


def _blocking_taints(node: Object) -> set[tuple[str, str, str]]:
    return {
        (str(t.get("key")), str(t.get("value") or ""), str(t.get("effect")))
        for t in (node.get("spec") or {}).get("taints") or []
        if isinstance(t, Mapping) and t.get("effect") in BLOCKING_EFFECTS
    }


def gangs_to_nudge(change: Change, waiting: Callable[[], Iterable[Object]]) -> list[str]:
    """The keys of the MPIJobs whose waiting gangs ``change`` may let start; ``waiting()``
    lists the gang objects of waiting gangs from the cache (read only when the change may have
    freed capacity)."""
    if not frees_capacity(change):
        return []
    keys = set()
    for gang_object in waiting():
        ref = controller_ref(gang_object)
        if ref is not None and ref.get("kind") == c.KIND:
            keys.add(make_key(gang_object["metadata"].get("namespace", ""), ref["name"]))
    return sorted(keys)


def index_waiting(gang: WithCapacityNudge) -> Callable[[Object], list[str]]:
    """Files the gang objects whose gangs wait under WAITING, so a capacity change reads only
    them, however many gangs run."""

    def index(gang_object: Object) -> list[str]:
        return [WAITING] if gang.waits(gang_object) else []

    return index


class NudgeSchedule:
    """Which jobs are due a nudge, at most one per job per ``interval`` seconds.

    ``request`` marks a job and has ``enqueue_after(key, delay)`` sync it when the nudge is
    due; the job's sync asks ``take``, which answers True once per due nudge. A sync that comes
    before the nudge is due (another event of the job) arms the delivery again, so no request
    is lost to a retry that was already pending in the queue."""

    def __init__(
        self,
        enqueue_after: Callable[[str, float], None],
        clock: Clock = REAL_CLOCK,
        quiet: float = NUDGE_QUIET,
        interval: float = NUDGE_INTERVAL,
    ) -> None:
        self._enqueue_after = enqueue_after
        self._clock = clock
        self._quiet = quiet
        self._interval = interval
        self._lock = threading.Lock()
        self._due: dict[str, float] = {}
        self._last: dict[str, float] = {}

    def request(self, keys: Iterable[str]) -> None:
        now = self._clock.monotonic()
        armed = []
        with self._lock:
            # Nudges older than the interval no longer hold anything back.
            for key in [k for k, at in self._last.items() if now - at >= self._interval]:
                del self._last[key]
            for key in keys:
                if key in self._due:
                    continue  # coalesced into the pending nudge
                last = self._last.get(key)
                due = now + self._quiet
                if last is not None:
                    due = max(due, last + self._interval)
                self._due[key] = due
                armed.append((key, due - now))
        for key, delay in armed:
            self._enqueue_after(key, delay)

    def take(self, key: str) -> bool:
        """Whether this sync of ``key`` should nudge its gang (consuming the request)."""
        now = self._clock.monotonic()
        with self._lock:
            due = self._due.get(key)
            if due is None:
                return False
            if due > now:
                delay = due - now
            else:
                del self._due[key]
                self._last[key] = now
                return True
        self._enqueue_after(key, delay)
        return False

    def forget(self, key: str) -> None:
        """The job is gone."""
        with self._lock:
            self._due.pop(key, None)
            self._last.pop(key, None)


def capacity_informers(client: Client, namespace: str | None) -> dict[str, Informer]:
    """Informers of the nodes and of the bound pods, in the operator's watch scope. Over every
    namespace they are the operator's one view of the nodes: their labels order hostfiles and
    group Volcano's layout, and with the bound pods they give each domain's room (the
    TopologyFits condition) and nudge waiting gangs. With ``--namespace`` they only nudge,
    and only that namespace's pods going away do. One that RBAC refuses says so once and
    stops; what it served is then lost."""
    every_namespace = namespace is None
    nodes_lost = "waiting gangs are not nudged when nodes are added or grow"
    pods_lost = "waiting gangs are not nudged when pods go"
    if every_namespace:
        nodes_lost = (
            "the hostfile lists workers by index, not by network domain; no job gets a "
            f"{c.CONDITION_TOPOLOGY_FITS} condition; {nodes_lost}"
        )
        pods_lost = f"no job gets a {c.CONDITION_TOPOLOGY_FITS} condition; {pods_lost}"
    return {
        NODES.plural: Informer.optional_for_resource(
            client, NODES, lost=nodes_lost, name=NODES_INFORMER, transform=slim_node
        ),
        PODS.plural: Informer.optional_for_resource(
            client,
            PODS,
            lost=pods_lost,
            namespace=namespace,
            field_selector=BOUND_PODS_SELECTOR,
            name=BOUND_PODS_INFORMER,
            transform=slim_pod,
        ),
    }


class NodeLoadCache:
    """Each node's load for the room count, kept as its informers change: what the bound pods
    hold summed per node as they come and go, and each node's allocatable parsed once per
    version of the node, so a count reads each node once and no pod.

    With ``on_demand``, the bound pods (every pod of the cluster on a node) are watched only
    from the first count asked for: an operator no job asks a topology domain of watches none.
    That first count is None; the ``on_listed`` callback runs once the pods are listed, so the
    jobs that asked count again."""

    def __init__(self, nodes: Informer, bound_pods: Informer, *, on_demand: bool = False) -> None:
        self._nodes, self._pods = nodes, bound_pods
        self._lock = threading.Lock()
        self._used: dict[str, Amounts] = {}
        self._allocatable: dict[str, tuple[str, Amounts]] = {}
        self._demanded = not on_demand
        self._ready: Callable[[], None] | None = None
        bound_pods.add_event_handler(self._bound, self._moved, self._gone)

    def current(self) -> list[NodeLoad] | None:
        """Every node's load; None until both informers have listed, or once one stopped."""
        if not self._demanded:
            self._demand()
        readers = (self._nodes, self._pods)
        if any(informer.stopped or not informer.has_synced() for informer in readers):
            return None
        nodes = self._nodes.store.list()
        with self._lock:
            parsed = {}
            for node in nodes:
                meta = node["metadata"]
                version = str(meta.get("resourceVersion", ""))
                known = self._allocatable.get(meta["name"])
                amounts = known[1] if known and known[0] == version else allocatable_of(node)
                parsed[meta["name"]] = (version, amounts)
            self._allocatable = parsed
            loads = []
            for node in nodes:
                name = node["metadata"]["name"]
                loads.append(NodeLoad(node, parsed[name][1], dict(self._used.get(name, {}))))
            return loads

    def on_listed(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the bound pods a count started on demand are listed."""
        self._ready = callback

    def _demand(self) -> None:
        with self._lock:
            if self._demanded:
                return
            self._demanded = True
        self._pods.start()
        if self._ready is not None:
            threading.Thread(target=self._announce, name="bound-pods-listed", daemon=True).start()

    def _announce(self) -> None:
        while not self._pods.stopped:
            if self._pods.wait_for_sync(1.0):
                if self._ready is not None:
                    self._ready()
                return

    def _bound(self, pod: Object) -> None:
        with self._lock:
            hold(self._used, pod, 1)

    def _moved(self, old: Object, new: Object) -> None:
        with self._lock:
            hold(self._used, old, -1)
            hold(self._used, new, 1)

    def _gone(self, pod: Object) -> None:
        with self._lock:
            hold(self._used, pod, -1)


def watch_capacity(informers: Mapping[str, Informer], on_change: Callable[[Change], None]) -> None:
    """Tell ``on_change`` of every change of the capacity watch."""
    for plural, informer in informers.items():
        informer.add_handler(_ChangeHandler(plural, on_change))


class _ChangeHandler(EventHandler):
    def __init__(self, resource: str, on_change: Callable[[Change], None]) -> None:
        super().__init__()
        self._resource = resource
        self._on_change = on_change

    def on_add(self, obj: Object) -> None:
        self._on_change(Change(self._resource, None, obj))

    def on_update(self, old: Object, new: Object) -> None:
        self._on_change(Change(self._resource, old, new))

    def on_delete(self, obj: Object) -> None:
        self._on_change(Change(self._resource, obj, None))
