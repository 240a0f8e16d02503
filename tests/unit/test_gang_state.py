"""What each scheduler's PodGroup status says about the gang, for a GangScheduled condition."""

from __future__ import annotations

from typing import Any

import pytest

from gang import GangState, capacity_nudge_of, cluster_inputs_of
from gang.coscheduling import CoschedulingScheduler
from gang.volcano import VolcanoScheduler

NOT_ENOUGH = "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable"


def pod_group(status: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "test", "namespace": "ns"}, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def unschedulable(status: str = "True", message: str = NOT_ENOUGH) -> dict[str, Any]:
    return {
        "type": "Unschedulable",
        "status": status,
        "reason": "NotEnoughResources",
        "message": message,
        "transitionID": "c1",
    }


@pytest.mark.parametrize(
    ("status", "scheduled", "reason"),
    [
        (None, None, "PodGroupNotObserved"),
        ({}, None, "PodGroupNotObserved"),
        ({"phase": "Pending"}, False, "PodGroupPending"),
        ({"phase": "Inqueue"}, False, "PodGroupInqueue"),
        ({"phase": "Inqueue", "conditions": [unschedulable()]}, False, "Unschedulable"),
        ({"phase": "Pending", "conditions": [unschedulable()]}, False, "Unschedulable"),
        ({"phase": "Inqueue", "conditions": [unschedulable("False")]}, False, "PodGroupInqueue"),
        ({"phase": "Unknown"}, False, "PodGroupUnknown"),
        ({"phase": "Running", "running": 3}, True, "PodGroupRunning"),
        ({"phase": "Running", "conditions": [unschedulable()]}, True, "PodGroupRunning"),
        ({"phase": "Completed", "succeeded": 3}, True, "PodGroupCompleted"),
    ],
    ids=[
        "no status yet: undecided",
        "an empty status: undecided",
        "pending admission to the queue",
        "admitted to the queue but not placed: not scheduled yet",
        "admitted but unschedulable: the scheduler's verdict",
        "pending and unschedulable",
        "a cleared Unschedulable condition is ignored",
        "some pods run, the rest cannot be placed",
        "running: scheduled",
        "running wins over a stale Unschedulable condition",
        "completed: was scheduled",
    ],
)
def test_volcano_gang_state(
    status: dict[str, Any] | None, scheduled: bool | None, reason: str
) -> None:
    state = VolcanoScheduler().pod_group_state(pod_group(status, queue="project-x"))
    assert (state.scheduled, state.reason) == (scheduled, reason)
    assert state.message


def test_volcano_unschedulable_carries_the_schedulers_message() -> None:
    status = {"phase": "Inqueue", "conditions": [unschedulable()]}
    assert VolcanoScheduler().pod_group_state(pod_group(status)) == GangState(
        False, "Unschedulable", NOT_ENOUGH, warning=True
    )


def test_volcano_unschedulable_without_message_falls_back_to_its_reason() -> None:
    status = {"phase": "Pending", "conditions": [unschedulable(message="")]}
    state = VolcanoScheduler().pod_group_state(pod_group(status))
    assert state == GangState(False, "Unschedulable", "NotEnoughResources", warning=True)


def test_volcano_pending_names_the_queue() -> None:
    state = VolcanoScheduler().pod_group_state(pod_group({"phase": "Pending"}, queue="project-x"))
    assert "project-x" in state.message
    default = VolcanoScheduler().pod_group_state(pod_group({"phase": "Pending"}))
    assert '"default"' in default.message


@pytest.mark.parametrize(
    ("status", "scheduled", "reason"),
    [
        (None, None, "PodGroupNotObserved"),
        ({"phase": "Pending"}, False, "PodGroupPending"),
        ({"phase": "Scheduling", "running": 1}, False, "PodGroupScheduling"),
        ({"phase": "Running", "running": 3}, True, "PodGroupRunning"),
        ({"phase": "Finished", "succeeded": 3}, True, "PodGroupFinished"),
        ({"phase": "Failed", "failed": 1, "running": 2}, True, "PodGroupFailed"),
        ({"phase": "Unknown"}, None, "PodGroupUnknown"),
    ],
    ids=[
        "no status yet: undecided",
        "fewer pods than minMember exist",
        "enough pods exist but not all run",
        "running: scheduled",
        "finished: was scheduled",
        "failed pods ran, so the gang was placed",
        "an unknown phase says nothing",
    ],
)
def test_coscheduling_gang_state(
    status: dict[str, Any] | None, scheduled: bool | None, reason: str
) -> None:
    scheduler = CoschedulingScheduler("scheduler-plugins-scheduler")
    state = scheduler.pod_group_state(pod_group(status, minMember=3))
    assert (state.scheduled, state.reason) == (scheduled, reason)
    assert state.message


def test_coscheduling_scheduling_message_counts_the_pods() -> None:
    scheduler = CoschedulingScheduler("scheduler-plugins-scheduler")
    status = {"phase": "Scheduling", "running": 1, "succeeded": 1}
    state = scheduler.pod_group_state(pod_group(status, minMember=3))
    assert state.message.startswith("2 of 3 pods run")


@pytest.mark.parametrize(
    ("spec", "queue"),
    [
        ({"queue": "research"}, "research"),
        ({}, "default"),
        ({"queue": ""}, "default"),
        ("x", "default"),
    ],
    ids=["named", "none", "empty", "not a mapping"],
)
def test_a_volcano_pod_group_depends_on_its_queue_and_nothing_else(spec: Any, queue: str) -> None:
    assert VolcanoScheduler().inputs_of({"spec": spec}) == (("queues", queue),)


def test_a_coscheduling_pod_group_depends_on_nothing_outside_it() -> None:
    scheduler = CoschedulingScheduler("sp")
    assert cluster_inputs_of(scheduler) is None
    assert capacity_nudge_of(scheduler) is scheduler
