"""A job with a network domain: once its workers are placed, a sync rewrites the hostfile in
topology order, read from the pods' nodes and the nodes' labels."""

from __future__ import annotations

from typing import Any

from mpi_operator.controller.plan import plan_sync
from mpi_operator.testing.wrappers import MPIJobWrapper
from tests.unit.controller.test_plan import cluster_view, context, converge

RACK = "example.com/rack"
NODE_RACKS = {"node-a1": "a", "node-a2": "a", "node-b1": "b"}
WORKER_NODES = {0: "node-b1", 1: "node-a2", 2: "node-b1", 3: "node-a1"}


def node(name: str, rack: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": {RACK: rack}}}


def hostfile_hosts(view: Any) -> list[str]:
    config_map = view.get("configmaps", "ns", "test-config")
    return [line.split(".")[0] for line in config_map["data"]["hostfile"].splitlines()]


def place_workers(view: Any, nodes: dict[int, str]) -> None:
    for index, node_name in nodes.items():
        pod = view.get("pods", "ns", f"test-worker-{index}")
        pod.setdefault("spec", {})["nodeName"] = node_name


def synced_after_placement(job: MPIJobWrapper, nodes: dict[int, str]) -> list[str]:
    view = cluster_view()
    for name, rack in NODE_RACKS.items():
        view.objects[("nodes", "", name)] = node(name, rack)
    obj = converge(job.obj(), view, context())
    place_workers(view, nodes)
    view.apply(plan_sync(obj, view, context()).actions)
    return hostfile_hosts(view)


def test_placed_workers_are_listed_rack_by_rack() -> None:
    job = MPIJobWrapper().workers(4).scheduling_policy(topology={"key": RACK})
    assert synced_after_placement(job, WORKER_NODES) == [
        "test-worker-3",
        "test-worker-1",
        "test-worker-0",
        "test-worker-2",
    ]


def test_without_a_domain_the_hostfile_keeps_the_index_order() -> None:
    job = MPIJobWrapper().workers(4)
    assert synced_after_placement(job, WORKER_NODES) == [f"test-worker-{i}" for i in range(4)]


def test_until_every_worker_is_placed_the_hostfile_keeps_the_index_order() -> None:
    job = MPIJobWrapper().workers(4).scheduling_policy(topology={"key": RACK})
    placed = {index: name for index, name in WORKER_NODES.items() if index != 2}
    assert synced_after_placement(job, placed) == [f"test-worker-{i}" for i in range(4)]
