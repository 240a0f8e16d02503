"""Room per topology domain for a job's workers, from the nodes and the pods bound to them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from mpi_operator.controller.domain_room import (
    REQUESTS,
    BestDomain,
    hold,
    node_loads,
    room_by_domain,
    roomiest,
)

RACK = "example.com/rack"


def node(
    name: str,
    rack: str | None,
    cpu: str = "8",
    pods: str = "110",
    taints: tuple[dict[str, str], ...] = (),
    unschedulable: bool = False,
    **labels: str,
) -> dict[str, Any]:
    all_labels = {**labels, **({RACK: rack} if rack is not None else {})}
    spec: dict[str, Any] = {"taints": list(taints)} if taints else {}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": pods}},
    }


def bound(node_name: str, cpu: str) -> dict[str, Any]:
    return {"spec": {"nodeName": node_name}, REQUESTS: {"cpu": Decimal(cpu)}}


def worker(cpu: str = "3", **spec: Any) -> dict[str, Any]:
    return {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}], **spec}


NO_SCHEDULE = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TWO_RACKS = [node("a1", "a"), node("a2", "a"), node("b1", "b")]

CASES: list[
    tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]
] = [
    # Two 3-cpu workers on each 8-cpu node.
    ("several workers per node", worker(), TWO_RACKS, [], {"a": 4, "b": 2}),
    ("bound pods hold their share", worker(), TWO_RACKS, [bound("a1", "3")], {"a": 3, "b": 2}),
    ("too big for any node", worker("9"), TWO_RACKS, [], {"a": 0, "b": 0}),
    ("the pod count bounds the room", worker("1"), [node("a1", "a", pods="3")], [], {"a": 3}),
    (
        "bound pods count against the pod count",
        worker("1"),
        [node("a1", "a", pods="3")],
        [bound("a1", "0")],
        {"a": 2},
    ),
    (
        "an unschedulable node takes none",
        worker(),
        [node("a1", "a", unschedulable=True)],
        [],
        {"a": 0},
    ),
    (
        "a NoSchedule taint keeps workers off",
        worker(),
        [node("a1", "a", taints=(NO_SCHEDULE,))],
        [],
        {"a": 0},
    ),
    (
        "a toleration lets them on",
        worker(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu"}]),
        [node("a1", "a", taints=(NO_SCHEDULE,))],
        [],
        {"a": 2},
    ),
    (
        "a toleration of another value does not",
        worker(tolerations=[{"key": "dedicated", "value": "cpu"}]),
        [node("a1", "a", taints=(NO_SCHEDULE,))],
        [],
        {"a": 0},
    ),
    (
        "an empty key with Exists tolerates every taint",
        worker(tolerations=[{"operator": "Exists"}]),
        [node("a1", "a", taints=(NO_SCHEDULE,))],
        [],
        {"a": 2},
    ),
    (
        "a PreferNoSchedule taint keeps nothing off",
        worker(),
        [node("a1", "a", taints=({"key": "k", "effect": "PreferNoSchedule"},))],
        [],
        {"a": 2},
    ),
    (
        "the nodeSelector picks nodes",
        worker(nodeSelector={"pool": "x"}),
        [node("a1", "a", pool="x"), node("a2", "a", pool="y")],
        [],
        {"a": 2},
    ),
    (
        "a node without the label is in no domain",
        worker(),
        [node("a1", "a"), node("n", None)],
        [],
        {"a": 2},
    ),
    (
        "a resource the node lacks leaves no room",
        {"containers": [{"name": "main", "resources": {"limits": {"example.com/gpu": "1"}}}]},
        [node("a1", "a")],
        [],
        {"a": 0},
    ),
    (
        "the init peak and the overhead count: 4 + 1 of 8 cpus",
        {
            **worker("2"),
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "4"}}}],
            "overhead": {"cpu": "1"},
        },
        [node("a1", "a")],
        [],
        {"a": 1},
    ),
    (
        "a worker asking for nothing is bound by the pod count",
        {"containers": [{"name": "main"}]},
        [node("a1", "a", pods="5")],
        [],
        {"a": 5},
    ),
]


@pytest.mark.parametrize(
    ("worker_spec", "nodes", "pods", "rooms"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_room_by_domain(
    worker_spec: dict[str, Any],
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    rooms: dict[str, int],
) -> None:
    assert room_by_domain(RACK, worker_spec, node_loads(nodes, pods)) == rooms


def test_pods_gone_give_their_share_back_and_an_idle_node_is_forgotten() -> None:
    used: dict[str, dict[str, Decimal]] = {}
    hold(used, bound("a1", "3"), 1)
    hold(used, bound("a1", "2"), 1)
    assert used == {"a1": {"cpu": Decimal(5), "pods": Decimal(2)}}
    hold(used, bound("a1", "3"), -1)
    assert used == {"a1": {"cpu": Decimal(2), "pods": Decimal(1)}}
    hold(used, bound("a1", "2"), -1)
    assert used == {}


def test_the_roomiest_domain_is_the_first_by_name_on_a_tie() -> None:
    assert roomiest({"b": 4, "a": 4, "c": 1}) == BestDomain("a", 4)
    assert roomiest({}) is None
