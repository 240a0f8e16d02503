"""How many of a job's workers each topology domain has room for, from the cluster's nodes.

A domain is the nodes sharing one value of the job's topology label. A node takes workers
when it is schedulable, the worker tolerates its NoSchedule and NoExecute taints and it carries
the worker's nodeSelector; it has room for as many workers as each requested resource's free
amount (allocatable less the requests of the pods bound to it that have not finished) holds
whole, and as its pod count allows. A domain's room is the sum over its nodes.

The count reads neither node affinity nor pod (anti-)affinity, nor what a scheduler reserves
for itself: it is at least the room the scheduler finds, so "no domain can hold the job" is
true whenever it is said, unless the scheduler makes room by preempting pods of a lower
priority.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from gang.pod_requests import pod_requests
from mpi_operator.quantity import InvalidQuantityError, Quantity

# What a bound pod holds on its node, kept by the operator's cache beside its node's name.
REQUESTS: Final = "requests"
PODS: Final = "pods"
# Taints that keep new pods off a node (the scheduler's TaintToleration filter).
BLOCKING_EFFECTS: Final = ("NoSchedule", "NoExecute")

Amounts = dict[str, Decimal]


def requests_of(pod_spec: Mapping[str, Any]) -> Amounts:
    """A pod's effective requests (containers, init containers, overhead), as numbers."""
    return {name: amount.value for name, amount in pod_requests(pod_spec).items()}


@dataclass(frozen=True)
class NodeLoad:
    """A node as the count reads it: the node (its labels, taints, ``unschedulable``), its
    allocatable amounts, and what the pods bound to it hold (``PODS``: how many they are)."""

    node: Mapping[str, Any]
    allocatable: Amounts
    used: Amounts


@dataclass(frozen=True)
class BestDomain:
    """The roomiest domain: its label value and how many workers it has room for."""

    domain: str
    room: int


def hold(used: dict[str, Amounts], pod: Mapping[str, Any], sign: int) -> None:
    """Add (``sign`` 1) or take back (-1) a bound pod's ``REQUESTS`` and itself to what its
    node's pods hold; a node whose pods are all gone is forgotten."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        return
    held = used.setdefault(node_name, {})
    for name, amount in {**(pod.get(REQUESTS) or {}), PODS: Decimal(1)}.items():
        held[name] = held.get(name, Decimal(0)) + sign * amount
    if held[PODS] <= 0:
        del used[node_name]


def node_loads(
    nodes: Iterable[Mapping[str, Any]], bound_pods: Iterable[Mapping[str, Any]]
) -> list[NodeLoad]:
    """The load of each node, from the pods bound to nodes that have not finished, each with
    its node (``spec.nodeName``) and its ``REQUESTS``."""
    used: dict[str, Amounts] = {}
    for pod in bound_pods:
        hold(used, pod, 1)
    return [NodeLoad(node, allocatable_of(node), used.get(_name(node), {})) for node in nodes]


def room_by_domain(
    key: str, worker: Mapping[str, Any], loads: Iterable[NodeLoad]
) -> dict[str, int]:
    """Per value of the node label ``key``: room for pods of the spec ``worker`` on the nodes
    carrying it."""
    wanted = {name: amount for name, amount in requests_of(worker).items() if amount > 0}
    selector = worker.get("nodeSelector") or {}
    tolerations = [t for t in worker.get("tolerations") or [] if isinstance(t, Mapping)]
    rooms: dict[str, int] = {}
    for load in loads:
        labels = (load.node.get("metadata") or {}).get("labels") or {}
        domain = labels.get(key)
        if domain is None:
            continue
        takes = _takes_worker(load.node, labels, selector, tolerations)
        rooms[domain] = rooms.get(domain, 0) + (_node_room(load, wanted) if takes else 0)
    return rooms


def roomiest(rooms: Mapping[str, int]) -> BestDomain | None:
    """The domain with the most room, the first by name on a tie; None without any domain."""
    if not rooms:
        return None
    domain = min(rooms, key=lambda value: (-rooms[value], value))
    return BestDomain(domain, rooms[domain])


def _takes_worker(
    node: Mapping[str, Any],
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    tolerations: list[Mapping[str, Any]],
) -> bool:
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    if any(labels.get(name) != value for name, value in selector.items()):
        return False
    return all(
        any(_tolerates(toleration, taint) for toleration in tolerations)
        for taint in spec.get("taints") or []
        if isinstance(taint, Mapping) and taint.get("effect") in BLOCKING_EFFECTS
    )


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' rule: an empty effect matches every effect, an empty key with Exists
    every taint; Equal (the default operator) compares the values."""
    effect = toleration.get("effect")
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key")
    if key and key != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")


def _node_room(load: NodeLoad, wanted: Amounts) -> int:
    allocatable, used = load.allocatable, load.used
    # Without a pod count a node takes no pod, as kube-scheduler reads it.
    room = int(allocatable.get(PODS, Decimal(0)) - used.get(PODS, Decimal(0)))
    for name, request in wanted.items():
        free = allocatable.get(name, Decimal(0)) - used.get(name, Decimal(0))
        room = min(room, int(free // request) if free > 0 else 0)
    return max(room, 0)


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name", ""))


def allocatable_of(node: Mapping[str, Any]) -> Amounts:
    """A node's allocatable amounts that parse, as numbers."""
    amounts: Amounts = {}
    for name, raw in ((node.get("status") or {}).get("allocatable") or {}).items():
        try:
            amounts[name] = Quantity.parse(raw).value
        except InvalidQuantityError:
            continue
    return amounts
