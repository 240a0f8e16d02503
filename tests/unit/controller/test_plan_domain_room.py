"""TopologyFits: a job whose required domain has no room for it says so from the cluster's
nodes, turns the condition when a domain has room or its workers are placed, and writes
nothing while nothing changes."""

from __future__ import annotations

import copy
from typing import Any

from mpi_operator.controller.plan import Plan, plan_sync
from mpi_operator.testing.view import MemoryView
from mpi_operator.testing.wrappers import MPIJobWrapper
from tests.unit.controller.test_plan import cluster_view, context, converge, reasons, writes

RACK = "example.com/rack"
STATUS_WRITE = "update_status mpijobs/status test"
LATER = "2026-01-01T00:10:00Z"


def node(name: str, rack: str, cpu: str = "8") -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {RACK: rack}},
        "status": {"allocatable": {"cpu": cpu, "pods": "110"}},
    }


def racks_view() -> MemoryView:
    """Two racks of two 8-cpu nodes: room for four 3-cpu workers in each."""
    view = cluster_view()
    for name, rack in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")):
        view.objects[("nodes", "", name)] = node(name, rack)
    return view


def six_workers(mode: str = "Required") -> dict[str, Any]:
    job = MPIJobWrapper().workers(6, cpu="3")
    return job.scheduling_policy(topology={"key": RACK, "mode": mode}).obj()


def topology_fits(obj: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((cond for cond in conditions if cond["type"] == "TopologyFits"), None)


def sync(obj: dict[str, Any], view: MemoryView, now: str = LATER) -> tuple[Plan, dict[str, Any]]:
    """One sync at ``now``, applied; the job with the status it wrote."""
    plan = plan_sync(obj, view, context(now=now))
    view.apply(plan.actions)
    synced = copy.deepcopy(obj)
    for action in plan.actions:
        if action.resource == "mpijobs/status" and action.body:
            synced["status"] = action.body["status"]
    return plan, synced


def waiting_job(view: MemoryView) -> dict[str, Any]:
    return converge(six_workers(), view, context())


def test_a_job_no_rack_has_room_for_gets_the_condition_in_words() -> None:
    view = racks_view()
    plan = plan_sync(six_workers(), view, context())
    assert "NoDomainFits" in reasons(plan)
    obj = converge(six_workers(), view, context())
    condition = topology_fits(obj)
    assert condition is not None
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "NoDomainFits",
        f'needs 6 workers in one "{RACK}"; the most any has room for is 4 (rack "a")',
    )


def test_an_unchanged_cluster_writes_nothing() -> None:
    view = racks_view()
    obj = waiting_job(view)
    plan, _ = sync(obj, view)
    assert writes(plan) == []
    assert plan.events == []


def test_new_counts_rewrite_the_message_only() -> None:
    view = racks_view()
    obj = waiting_job(view)
    before = topology_fits(obj)
    assert before is not None
    # A 3-cpu node makes room for one more in rack a: five, still not six.
    view.objects[("nodes", "", "a3")] = node("a3", "a", cpu="3")
    plan, synced = sync(obj, view)
    assert writes(plan) == [STATUS_WRITE]
    assert plan.events == []
    message = f'needs 6 workers in one "{RACK}"; the most any has room for is 5 (rack "a")'
    assert topology_fits(synced) == {**before, "message": message, "lastUpdateTime": LATER}


def test_a_rack_that_grows_turns_the_condition_once() -> None:
    view = racks_view()
    obj = waiting_job(view)
    view.objects[("nodes", "", "b3")] = node("b3", "b")
    plan, synced = sync(obj, view)
    assert writes(plan) == [STATUS_WRITE]
    assert reasons(plan) == ["DomainFits"]
    condition = topology_fits(synced)
    assert condition is not None
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True",
        "DomainFits",
        f'rack "b" of "{RACK}" has room for the 6 workers',
    )
    assert condition["lastTransitionTime"] == LATER
    again, _ = sync(synced, view)
    assert writes(again) == []


def test_placed_workers_turn_a_waiting_condition() -> None:
    view = racks_view()
    obj = waiting_job(view)
    for index in range(6):
        view.get("pods", "ns", f"test-worker-{index}")["spec"]["nodeName"] = "a1"
    plan, synced = sync(obj, view)
    assert "WorkersPlaced" in reasons(plan)
    condition = topology_fits(synced)
    assert condition is not None
    assert (condition["status"], condition["message"]) == (
        "True",
        f'the 6 workers are placed in one "{RACK}"',
    )


def test_some_workers_placed_keep_the_condition_as_it_is() -> None:
    view = racks_view()
    obj = waiting_job(view)
    view.get("pods", "ns", "test-worker-0")["spec"]["nodeName"] = "a1"
    # Room elsewhere no longer counts: the placed worker has chosen its rack.
    view.objects[("nodes", "", "b3")] = node("b3", "b")
    plan, _ = sync(obj, view)
    assert writes(plan) == []


def test_a_job_that_fits_gets_no_condition() -> None:
    view = racks_view()
    view.objects[("nodes", "", "a3")] = node("a3", "a")
    obj = converge(six_workers(), view, context())
    assert topology_fits(obj) is None


def test_a_preferred_domain_gets_no_condition() -> None:
    obj = converge(six_workers("Preferred"), racks_view(), context())
    assert topology_fits(obj) is None


def test_without_the_nodes_there_is_no_condition() -> None:
    obj = converge(six_workers(), cluster_view(), context())
    assert topology_fits(obj) is None
