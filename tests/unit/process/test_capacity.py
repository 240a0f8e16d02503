"""Which cluster changes nudge which waiting gangs, and how often."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gang import select_gang_scheduler
from mpi_operator.operator.caches import build_caches, waiting_gang_objects
from mpi_operator.operator.capacity import (
    Change,
    NudgeSchedule,
    frees_capacity,
    gangs_to_nudge,
    slim_node,
    slim_pod,
)
from mpi_operator.runtime.clock import FakeClock

from .test_caches import offline_client, owned

COSCHEDULING = "scheduler-plugins-scheduler"


def node(
    cpu: str = "8", unschedulable: bool = False, taints: tuple[str, ...] = (), **extra: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": [{"key": t, "effect": "NoSchedule"} for t in taints]}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": "n1", "resourceVersion": "1"},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", **extra}},
    }


BOUND_POD = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}}


@pytest.mark.parametrize(
    ("change", "frees"),
    [
        (Change("nodes", None, node()), True),
        (Change("nodes", None, node(unschedulable=True)), False),
        (Change("nodes", node(unschedulable=True), node()), True),
        (Change("nodes", node(), node(unschedulable=True)), False),
        (Change("nodes", node(cpu="8"), node(cpu="16")), True),
        (Change("nodes", node(cpu="8"), node(cpu="8000m")), False),
        (Change("nodes", node(cpu="8"), node(cpu="4")), False),
        (Change("nodes", node(), node(**{"nvidia.com/gpu": "1"})), True),
        (Change("nodes", node(taints=("not-ready",)), node()), True),
        (Change("nodes", node(), node(taints=("not-ready",))), False),
        (Change("nodes", node(), node()), False),
        (
            Change("nodes", node(), {**node(), "metadata": {"name": "n", "labels": {"r": "a"}}}),
            True,
        ),
        (Change("nodes", node(), None), False),
        (Change("pods", BOUND_POD, None), True),
        (Change("pods", None, BOUND_POD), False),
        (Change("pods", BOUND_POD, BOUND_POD), False),
    ],
    ids=[
        "node added",
        "cordoned node added",
        "node uncordoned",
        "node cordoned",
        "allocatable grown",
        "same allocatable written otherwise",
        "allocatable shrunk",
        "new resource",
        "blocking taint removed",
        "blocking taint added",
        "heartbeat",
        "node relabelled",
        "node deleted",
        "bound pod gone",
        "pod bound",
        "bound pod changed",
    ],
)
def test_changes_that_may_free_capacity(change: Change, frees: bool) -> None:
    assert frees_capacity(change) is frees


def test_slim_nodes_keep_what_decides_capacity() -> None:
    full = node(cpu="16", taints=("t",))
    full["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    full["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    slim = slim_node(full)
    assert frees_capacity(Change("nodes", slim_node(node(taints=("t",))), slim))
    assert "managedFields" not in slim["metadata"]
    assert "conditions" not in slim["status"]


def test_slim_bound_pods_keep_their_node_and_effective_requests() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "b"}},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "500m"}}}],
            "initContainers": [{"name": "init", "resources": {"limits": {"cpu": "2"}}}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
        "status": {"phase": "Running"},
    }
    assert slim_pod(pod) == {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"nodeName": "n1"},
        "requests": {"cpu": Decimal(2)},
    }


def pod_group(job: str, phase: str) -> dict[str, Any]:
    group = owned("PodGroup", job, "MPIJob", job)
    group["status"] = {"phase": phase}
    return group


def test_only_the_jobs_of_waiting_gangs_are_nudged() -> None:
    gang = select_gang_scheduler(COSCHEDULING)
    assert gang is not None
    caches = build_caches(offline_client(), None, gang)
    store = caches.children["podgroups"].store
    for job, phase in [("a", "Scheduling"), ("b", "Running"), ("c", "Pending"), ("d", "")]:
        store.upsert(pod_group(job, phase))
    foreign = pod_group("e", "Scheduling")
    foreign["metadata"]["ownerReferences"][0]["kind"] = "Job"
    store.upsert(foreign)

    def waiting() -> list[dict[str, Any]]:
        return waiting_gang_objects(caches, gang)

    assert gangs_to_nudge(Change("nodes", None, node()), waiting) == ["ns/a", "ns/c"]
    assert gangs_to_nudge(Change("pods", BOUND_POD, None), waiting) == ["ns/a", "ns/c"]
    store.upsert(pod_group("a", "Running"))
    assert gangs_to_nudge(Change("nodes", None, node()), waiting) == ["ns/c"]

    def unread() -> list[dict[str, Any]]:
        raise AssertionError("a change that frees nothing reads no cache")

    assert gangs_to_nudge(Change("nodes", node(), node()), unread) == []


def test_only_a_scheduler_that_needs_nudges_gets_the_capacity_watch() -> None:
    for name, watched in [(COSCHEDULING, {"nodes", "pods"}), ("volcano", set()), ("", set())]:
        caches = build_caches(offline_client(), None, select_gang_scheduler(name))
        assert set(caches.capacity) == watched, name
        assert not set(caches.capacity.values()) & set(caches.all), "never waited for"


class Deliveries:
    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def __call__(self, key: str, delay: float) -> None:
        self.calls.append((key, delay))


def test_a_burst_of_changes_is_one_nudge_a_second_later() -> None:
    clock, delivered = FakeClock(), Deliveries()
    nudges = NudgeSchedule(delivered, clock, quiet=1.0, interval=5.0)
    nudges.request(["ns/a", "ns/b"])
    clock.advance(0.3)
    nudges.request(["ns/a"])
    assert delivered.calls == [("ns/a", 1.0), ("ns/b", 1.0)]
    clock.advance(0.7)
    assert nudges.take("ns/a") and nudges.take("ns/b")
    assert not nudges.take("ns/a"), "taken once"
    assert len(delivered.calls) == 2, "a taken nudge is not delivered again"


def test_at_most_one_nudge_per_gang_per_interval() -> None:
    clock, delivered = FakeClock(), Deliveries()
    nudges = NudgeSchedule(delivered, clock, quiet=1.0, interval=5.0)
    nudges.request(["ns/a"])
    clock.advance(1.0)
    assert nudges.take("ns/a")
    clock.advance(1.0)
    nudges.request(["ns/a"])
    assert delivered.calls[-1] == ("ns/a", 4.0)
    clock.advance(3.0)
    assert not nudges.take("ns/a"), "not due yet"
    assert delivered.calls[-1] == ("ns/a", 1.0), "an early sync arms the delivery again"
    clock.advance(1.0)
    assert nudges.take("ns/a")
    clock.advance(10.0)
    nudges.request(["ns/a"])
    assert delivered.calls[-1] == ("ns/a", 1.0), "long after the last nudge: only the quiet"


def test_a_deleted_job_leaves_nothing_behind() -> None:
    clock, delivered = FakeClock(), Deliveries()
    nudges = NudgeSchedule(delivered, clock, quiet=1.0, interval=5.0)
    nudges.request(["ns/a"])
    clock.advance(1.0)
    assert nudges.take("ns/a")
    nudges.request(["ns/a"])
    assert delivered.calls[-1] == ("ns/a", 5.0)
    nudges.forget("ns/a")
    assert not nudges.take("ns/a"), "the pending nudge went with the job"
    nudges.request(["ns/a"])
    assert delivered.calls[-1] == ("ns/a", 1.0), "a new job of the name is not held back"
