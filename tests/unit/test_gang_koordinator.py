"""Koordinator's koord-scheduler: a gang declared by pod annotations alone, its verdict read
from the pods' PodScheduled conditions."""

from __future__ import annotations

import copy
import io
import sys
from typing import Any

import pytest
import yaml
from golden import assert_matches_golden

from gang import (
    StoredGang,
    capacity_nudge_of,
    cluster_inputs_of,
    gang_objects_of,
    select_gang_scheduler,
)
from gang.coscheduling import CoschedulingScheduler
from gang.koordinator import KoordinatorScheduler
from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.cli import dump_objects, main
from mpi_operator.controller.plan import Plan, SyncContext, plan_sync
from mpi_operator.desired.objects import desired_objects
from mpi_operator.desired.transports.ssh import SSHKeyPair
from mpi_operator.pod_rules.template import MAX_ANNOTATIONS_BYTES
from mpi_operator.testing.view import MemoryView
from mpi_operator.testing.wrappers import DEFAULT_UID, MPIJobWrapper

KOORD = "koord-scheduler"
NAME = "gang.scheduling.koordinator.sh/name"
MIN_AVAILABLE = "gang.scheduling.koordinator.sh/min-available"
TOTAL_NUMBER = "gang.scheduling.koordinator.sh/total-number"
MODE = "gang.scheduling.koordinator.sh/mode"
WAITING_TIME = "gang.scheduling.koordinator.sh/waiting-time"
NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:05:00Z"
# Not a usable key: goldens must not change from run to run.
KEY = SSHKeyPair(
    private_key_pem="-----BEGIN EC PRIVATE KEY-----\nx\n-----END EC PRIVATE KEY-----\n",
    public_key_openssh="ecdsa-sha2-nistp521 AAAA\n",
)
GANG_NAME = f"test-{DEFAULT_UID}"


def gang(minimum: str, total: str, **extra: str) -> dict[str, str]:
    return {NAME: GANG_NAME, MIN_AVAILABLE: minimum, TOTAL_NUMBER: total, MODE: "Strict", **extra}


def rendered_pods(job: MPIJobWrapper) -> dict[str, dict[str, Any]]:
    """The launcher's pod template and a worker pod (if any), as rendered with koord-scheduler."""
    objects = desired_objects(job.job(), ClusterFacts(), KoordinatorScheduler(), KEY)
    by_kind = {obj["kind"]: obj for obj in objects}
    rendered = {"Launcher": by_kind["Job"]["spec"]["template"]}
    if "Pod" in by_kind:
        rendered["Worker"] = by_kind["Pod"]
    return rendered


def two_workers() -> MPIJobWrapper:
    return MPIJobWrapper().workers(2, cpu="1")


# -- selection -------------------------------------------------------------------------------


def test_koord_scheduler_selects_the_annotation_only_strategy() -> None:
    scheduler = select_gang_scheduler(KOORD)
    assert isinstance(scheduler, KoordinatorScheduler)
    assert scheduler.scheduler_name == KOORD
    # The core alone: no objects of its own, no cluster inputs, no capacity nudge.
    assert gang_objects_of(scheduler) is None
    assert cluster_inputs_of(scheduler) is None
    assert capacity_nudge_of(scheduler) is None


@pytest.mark.parametrize("flag", ["koordinator", "koord-scheduler-2", "Koord-scheduler"])
def test_other_names_still_mean_a_coscheduling_pod_group_under_that_name(flag: str) -> None:
    scheduler = select_gang_scheduler(flag)
    assert isinstance(scheduler, CoschedulingScheduler)
    assert scheduler.scheduler_name == flag


# -- what the pods carry ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job", "launcher", "worker"),
    [
        (two_workers(), gang("3", "3"), gang("3", "3")),
        (
            two_workers().scheduling_policy(minAvailable=2),
            gang("2", "3"),
            gang("2", "3"),
        ),
        (two_workers().scheduling_policy(minAvailable=0), gang("0", "3"), gang("0", "3")),
        (
            two_workers().scheduling_policy(scheduleTimeoutSeconds=90),
            gang("3", "3", **{WAITING_TIME: "90s"}),
            gang("3", "3", **{WAITING_TIME: "90s"}),
        ),
        (
            two_workers().scheduling_policy(scheduleTimeoutSeconds=2**31 - 1),
            gang("3", "3", **{WAITING_TIME: "2147483647s"}),
            gang("3", "3", **{WAITING_TIME: "2147483647s"}),
        ),
        (
            two_workers().scheduling_policy(scheduleTimeoutSeconds=0),
            gang("3", "3"),
            gang("3", "3"),
        ),
        (
            two_workers().launcher_creation_policy("WaitForWorkersReady"),
            None,
            gang("2", "2"),
        ),
        (
            two_workers().scheduling_policy(
                queue="q", priorityClass="high", minResources={"cpu": "100"}
            ),
            gang("3", "3"),
            gang("3", "3"),
        ),
        (
            two_workers().template_annotation("Worker", "example.com/note", "kept"),
            gang("3", "3"),
            {"example.com/note": "kept", **gang("3", "3")},
        ),
    ],
    ids=[
        "every pod by default",
        "minAvailable",
        "minAvailable 0",
        "scheduleTimeoutSeconds as a Go duration",
        "the largest timeout",
        "timeout 0: the scheduler's default",
        "WaitForWorkersReady: the launcher is placed alone",
        "queue, priorityClass and minResources have no place",
        "the user's annotations are kept",
    ],
)
def test_every_pod_of_the_gang_carries_its_annotations(
    job: MPIJobWrapper, launcher: dict[str, str] | None, worker: dict[str, str]
) -> None:
    pods = rendered_pods(job)
    assert pods["Launcher"]["metadata"].get("annotations") == launcher
    assert pods["Worker"]["metadata"]["annotations"] == worker
    assert pods["Launcher"]["spec"]["schedulerName"] == KOORD
    assert pods["Worker"]["spec"]["schedulerName"] == KOORD


def test_a_launcher_only_job_is_a_gang_of_one() -> None:
    pods = rendered_pods(MPIJobWrapper())
    assert list(pods) == ["Launcher"]
    assert pods["Launcher"]["metadata"]["annotations"] == gang("1", "1")


def test_a_schedulername_in_the_template_is_replaced_and_the_input_kept() -> None:
    job = two_workers().pod_spec_field("Worker", "schedulerName", "default-scheduler").job()
    replica = job.replica_spec("Worker")
    assert replica is not None and replica.template is not None
    template = replica.template
    before = copy.deepcopy(template)
    decorated = KoordinatorScheduler().decorate_pod_template(template, job)
    assert decorated["spec"]["schedulerName"] == KOORD
    assert template == before


@pytest.mark.parametrize(
    ("uid", "name"),
    [(DEFAULT_UID, GANG_NAME), ("another-uid", "test-another-uid"), ("", "test")],
    ids=["the job's uid", "a job recreated under the same name", "no uid"],
)
def test_the_gang_is_named_after_the_job_and_its_uid(uid: str, name: str) -> None:
    decorated = KoordinatorScheduler().decorate_pod_template({}, two_workers().uid(uid).job())
    assert decorated["metadata"]["annotations"][NAME] == name


def test_rendered_objects_match_golden() -> None:
    job = MPIJobWrapper("pi", "ns").workers(2).scheduling_policy(scheduleTimeoutSeconds=60)
    objects = desired_objects(job.job(), ClusterFacts(), KoordinatorScheduler(), KEY)
    assert [obj["kind"] for obj in objects] == [
        "Service",
        "ConfigMap",
        "Secret",
        "Pod",
        "Pod",
        "Job",
    ]
    assert_matches_golden("gang/koordinator-objects.yaml", dump_objects(objects))


# -- hostile input ---------------------------------------------------------------------------


def render(job: MPIJobWrapper, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO(yaml.safe_dump(job.obj())))
    return main(["render", "-f", "-", "--gang-scheduling", KOORD])


# What the gang's annotations add to a pod of the default job, keys and values.
GANG_BYTES = sum(len(key) + len(value) for key, value in gang("3", "3").items())


def annotations_filling(total: int) -> MPIJobWrapper:
    key = "example.com/filler"
    return two_workers().template_annotation("Launcher", key, "x" * (total - len(key)))


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (
            annotations_filling(MAX_ANNOTATIONS_BYTES - 100),
            "spec.mpiReplicaSpecs[Launcher].template.metadata.annotations: may not be larger "
            f"than {MAX_ANNOTATIONS_BYTES} bytes in total, found "
            f"{MAX_ANNOTATIONS_BYTES - 100 + GANG_BYTES}, with the gang scheduler's annotations",
        ),
        (
            two_workers().uid("u" * MAX_ANNOTATIONS_BYTES),
            "spec.mpiReplicaSpecs[Launcher].template.metadata.annotations: may not be larger",
        ),
        (
            two_workers().scheduling_policy(minAvailable=2**31),
            "spec.runPolicy.schedulingPolicy.minAvailable",
        ),
        (
            two_workers().scheduling_policy(scheduleTimeoutSeconds=-1),
            "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
        ),
    ],
    ids=[
        "template annotations that fit alone, not with the gang's",
        "a uid too long for an annotation",
        "minAvailable beyond int32",
        "a negative timeout",
    ],
)
def test_values_that_would_make_invalid_annotations_are_refused_by_field(
    job: MPIJobWrapper,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert render(job, monkeypatch) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[0].startswith(expected)


def test_annotations_that_fit_with_the_gangs_are_rendered(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert render(annotations_filling(MAX_ANNOTATIONS_BYTES - 1000), monkeypatch) == 0
    assert capsys.readouterr().err == ""


# -- the verdict -----------------------------------------------------------------------------


def pod(role: str, index: int, scheduled: dict[str, Any] | None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": f"test-{role}-{index}", "labels": {c.LABEL_JOB_ROLE: role}},
        "status": {"phase": "Pending"},
    }
    if scheduled is not None:
        obj["status"]["conditions"] = [{"type": "PodScheduled", **scheduled}]
    return obj


BOUND = {"status": "True"}
TURNED_DOWN = {
    "status": "False",
    "reason": "Unschedulable",
    "message": 'Gang "ns/test" gets rejected due to member pod "ns/test-worker-1" is unschedulable',
}
SCHEDULER_ERROR = {"status": "False", "reason": "SchedulerError", "message": "boom"}


def pods(launcher: Any, *workers: Any) -> list[dict[str, Any]]:
    launchers = [] if launcher == "none" else [pod("launcher", 0, launcher)]
    return launchers + [pod("worker", i, state) for i, state in enumerate(workers)]


@pytest.mark.parametrize(
    ("job", "stored_pods", "expected"),
    [
        (two_workers(), [], (None, "PodsNotScheduled")),
        (two_workers(), pods(None, None, None), (None, "PodsNotScheduled")),
        (two_workers(), pods(BOUND, BOUND, BOUND), (True, "PodsScheduled")),
        (two_workers(), pods(BOUND, BOUND, None), (None, "PodsNotScheduled")),
        (two_workers(), pods(None, TURNED_DOWN, None), (False, "Unschedulable")),
        (two_workers(), pods(BOUND, BOUND, TURNED_DOWN), (False, "Unschedulable")),
        (two_workers(), pods(None, SCHEDULER_ERROR, None), (None, "PodsNotScheduled")),
        (
            two_workers().scheduling_policy(minAvailable=2),
            pods(BOUND, BOUND, TURNED_DOWN),
            (True, "PodsScheduled"),
        ),
        (
            two_workers().launcher_creation_policy("WaitForWorkersReady"),
            pods("none", BOUND, BOUND),
            (True, "PodsScheduled"),
        ),
        (
            two_workers().launcher_creation_policy("WaitForWorkersReady"),
            pods(TURNED_DOWN, BOUND, BOUND),
            (True, "PodsScheduled"),
        ),
        (
            two_workers().launcher_creation_policy("WaitForWorkersReady"),
            pods(TURNED_DOWN, None, None),
            (None, "PodsNotScheduled"),
        ),
    ],
    ids=[
        "no pods yet",
        "pods the scheduler has not looked at",
        "every pod bound",
        "some bound, the rest not looked at",
        "a pod turned down",
        "fewer than min-available bound and one turned down",
        "a scheduler error is not the gang's verdict",
        "min-available bound: placed, whatever the rest",
        "WaitForWorkersReady: the workers are the gang",
        "WaitForWorkersReady: the launcher is not in the gang",
        "WaitForWorkersReady: a launcher turned down says nothing of the gang",
    ],
)
def test_the_verdict_is_read_from_the_pods_scheduled_conditions(
    job: MPIJobWrapper, stored_pods: list[dict[str, Any]], expected: tuple[bool | None, str]
) -> None:
    state = KoordinatorScheduler().gang_state(StoredGang(job.job(), {}, stored_pods))
    assert (state.scheduled, state.reason) == expected
    assert state.message
    if state.reason == "Unschedulable":
        assert state.message == TURNED_DOWN["message"]


def test_the_first_turned_down_pod_by_name_speaks_for_the_gang() -> None:
    first = {**TURNED_DOWN, "message": "0/3 nodes are available: 3 Insufficient cpu."}
    stored = list(reversed(pods(None, first, TURNED_DOWN)))
    state = KoordinatorScheduler().gang_state(StoredGang(two_workers().job(), {}, stored))
    assert state.message == first["message"]


# -- one sync --------------------------------------------------------------------------------


def context(now: str = NOW, nudge: bool = False) -> SyncContext:
    return SyncContext(ClusterFacts(), KoordinatorScheduler(), now, lambda: KEY, nudge=nudge)


def writes(plan: Plan) -> list[str]:
    return [f"{a.verb} {a.resource} {a.name}" for a in plan.actions]


def synced(view: MemoryView) -> dict[str, Any]:
    """A job whose children all exist: the launcher Job and its pod, two workers."""
    obj = two_workers().obj()
    for _ in range(3):
        plan = plan_sync(obj, view, context())
        view.apply(plan.actions)
        for action in plan.actions:
            if action.resource == "mpijobs/status" and action.body:
                obj["status"] = action.body["status"]
    launcher = view.get("jobs", "ns", "test-launcher")
    assert launcher is not None
    launcher["metadata"]["uid"] = "launcher-uid"
    launcher_pod = pod("launcher", 0, None)
    launcher_pod["kind"] = "Pod"
    launcher_pod["metadata"].update(
        namespace="ns",
        name="test-launcher-abcde",
        ownerReferences=[{"uid": "launcher-uid", "controller": True}],
    )
    view.add(launcher_pod)
    return obj


def set_scheduled(view: MemoryView, name: str, scheduled: dict[str, Any]) -> None:
    found = view.get("pods", "ns", name)
    assert found is not None
    found.setdefault("status", {})["conditions"] = [{"type": "PodScheduled", **scheduled}]


def gang_condition(plan: Plan) -> tuple[str, str, str] | None:
    [status_write] = [a for a in plan.actions if a.resource == "mpijobs/status"]
    assert status_write.body is not None
    for cond in status_write.body["status"].get("conditions", []):
        if cond["type"] == "GangScheduled":
            return cond["status"], cond["reason"], cond["message"]
    return None


def test_a_fresh_job_gets_no_gang_object_only_annotated_pods() -> None:
    plan = plan_sync(two_workers().obj(), MemoryView(), context())
    assert writes(plan) == [
        "create services test",
        "create configmaps test-config",
        "create secrets test-ssh",
        "create pods test-worker-0",
        "create pods test-worker-1",
        "create jobs test-launcher",
        "update_status mpijobs/status test",
    ]


def test_a_synced_job_whose_scheduler_has_said_nothing_writes_nothing() -> None:
    view = MemoryView()
    obj = synced(view)
    assert plan_sync(obj, view, context(LATER, nudge=True)).actions == []


@pytest.mark.parametrize(
    ("scheduled", "expected", "event_type"),
    [
        (TURNED_DOWN, ("False", "Unschedulable", TURNED_DOWN["message"]), "Warning"),
        (
            BOUND,
            ("True", "PodsScheduled", "koord-scheduler placed at least min-available pods."),
            "Normal",
        ),
    ],
    ids=["turned down", "placed"],
)
def test_the_pods_verdict_becomes_the_gang_scheduled_condition_once(
    scheduled: dict[str, Any], expected: tuple[str, str, str], event_type: str
) -> None:
    view = MemoryView()
    obj = synced(view)
    for name in ("test-launcher-abcde", "test-worker-0", "test-worker-1"):
        set_scheduled(view, name, scheduled)
    plan = plan_sync(obj, view, context(LATER))
    assert writes(plan) == ["update_status mpijobs/status test"]
    assert gang_condition(plan) == expected
    [event] = [e for e in plan.events if e.reason == expected[1]]
    assert event.type == event_type
    [status_write] = plan.actions
    assert status_write.body is not None
    obj["status"] = status_write.body["status"]
    assert plan_sync(obj, view, context(LATER)).actions == []


def test_suspending_deletes_the_workers_and_nothing_of_the_gang() -> None:
    view = MemoryView()
    obj = synced(view)
    obj["spec"]["runPolicy"] = {"suspend": True}
    assert [w for w in writes(plan_sync(obj, view, context(LATER))) if w.startswith("delete")] == [
        "delete pods test-worker-0",
        "delete pods test-worker-1",
    ]
