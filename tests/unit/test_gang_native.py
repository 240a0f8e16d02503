"""Kubernetes' own gang scheduling: scheduling.k8s.io PodGroups in the version served, pods
joining them through spec.schedulingGroup, the verdict from the PodGroup's condition."""

from __future__ import annotations

import copy
from typing import Any, Final

import pytest
from golden import assert_matches_golden

from gang import (
    StoredGang,
    WithServedVersions,
    capacity_nudge_of,
    cluster_inputs_of,
    in_served_versions,
    select_gang_scheduler,
)
from gang.native import NativeScheduler
from mpi_operator import sdk
from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.cli import dump_objects
from mpi_operator.controller.plan import plan_sync
from mpi_operator.desired.objects import desired_objects
from mpi_operator.testing.wrappers import MPIJobWrapper
from tests.unit.controller.test_plan import (
    KEY,
    LATER,
    cluster_view,
    context,
    converge,
    status_of,
    worker_writes,
    writes,
)

FLAG: Final = "scheduling.k8s.io/podgroup"
BETA: Final = NativeScheduler()
ALPHA: Final = NativeScheduler("v1alpha2")


def two_workers() -> MPIJobWrapper:
    return MPIJobWrapper("test", "ns").launcher(cpu="1").workers(2, cpu="2")


def objects_of(job: MPIJobWrapper, scheduler: NativeScheduler = BETA) -> dict[str, Any]:
    """The PodGroup, the first worker pod and the launcher's pod template, by kind."""
    rendered = desired_objects(job.job(), ClusterFacts(), scheduler, KEY)
    by_kind = {obj["kind"]: obj for obj in reversed(rendered)}
    return {
        "PodGroup": by_kind.get("PodGroup"),
        "Worker": by_kind.get("Pod"),
        "Launcher": by_kind["Job"]["spec"]["template"],
    }


def test_the_flag_selects_kubernetes_own_gang_under_the_default_scheduler() -> None:
    scheduler = select_gang_scheduler(FLAG)
    assert scheduler == BETA
    assert scheduler.scheduler_name == "default-scheduler"
    [kind] = BETA.gang_resources
    assert (kind.api_version, kind.plural, kind.fallback_versions) == (
        "scheduling.k8s.io/v1beta1",
        "podgroups",
        ("v1alpha2",),
    )
    assert isinstance(scheduler, WithServedVersions)
    assert cluster_inputs_of(scheduler) is None and capacity_nudge_of(scheduler) is None


def test_the_version_served_is_the_one_written() -> None:
    served = in_served_versions(BETA, {"podgroups": "v1alpha2"})
    assert served == ALPHA
    [pod_group] = ALPHA.gang_objects(two_workers().job(), ClusterFacts())
    assert pod_group["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert in_served_versions(BETA, {}) is BETA


def test_rendered_objects_match_golden() -> None:
    job = two_workers().priority_class("Launcher", "high")
    objects = desired_objects(job.job(), ClusterFacts(), BETA, KEY)
    assert [obj["kind"] for obj in objects][3:] == ["PodGroup", "Pod", "Pod", "Job"]
    assert_matches_golden("gang/native-objects.yaml", dump_objects(objects))


def test_v1alpha2_pod_group_matches_golden_and_names_no_priority_class() -> None:
    # 1.36 refuses spec.priorityClassName unless an alpha gate is on.
    job = two_workers().priority_class("Launcher", "high")
    [pod_group] = ALPHA.gang_objects(job.job(), ClusterFacts())
    assert "priorityClassName" not in pod_group["spec"]
    assert_matches_golden("gang/native-v1alpha2-podgroup.yaml", dump_objects([pod_group]))


@pytest.mark.parametrize(
    ("job", "policy"),
    [
        (two_workers(), {"gang": {"minCount": 3}}),
        (two_workers().scheduling_policy(minAvailable=2), {"gang": {"minCount": 2}}),
        (two_workers().scheduling_policy(minAvailable=0), {"basic": {}}),
        (
            two_workers().launcher_creation_policy("WaitForWorkersReady"),
            {"gang": {"minCount": 2}},
        ),
    ],
    ids=[
        "every pod by default",
        "minAvailable",
        "minAvailable 0 asks for no gang: the basic policy",
        "WaitForWorkersReady: the workers only",
    ],
)
def test_min_count(job: MPIJobWrapper, policy: dict[str, Any]) -> None:
    assert objects_of(job)["PodGroup"]["spec"]["schedulingPolicy"] == policy


@pytest.mark.parametrize(
    ("job", "priority_class"),
    [
        (two_workers(), None),
        (two_workers().priority_class("Worker", "low"), "low"),
        (two_workers().priority_class("Worker", "low").priority_class("Launcher", "high"), "high"),
        (
            two_workers().priority_class("Launcher", "high").scheduling_policy(priorityClass="top"),
            "top",
        ),
    ],
    ids=["none", "the workers'", "the launcher's first", "the policy's first"],
)
def test_priority_class(job: MPIJobWrapper, priority_class: str | None) -> None:
    assert objects_of(job)["PodGroup"]["spec"].get("priorityClassName") == priority_class


def test_every_pod_of_the_gang_joins_the_pod_group_under_the_default_scheduler() -> None:
    job = two_workers().pod_spec_field("Worker", "schedulerName", "volcano")
    rendered = objects_of(job)
    for role in ("Worker", "Launcher"):
        spec = rendered[role]["spec"]
        assert spec["schedulerName"] == "default-scheduler", role
        assert spec["schedulingGroup"] == {"podGroupName": "test"}, role


def test_the_launcher_created_once_the_workers_run_is_outside_their_group() -> None:
    rendered = objects_of(two_workers().launcher_creation_policy("WaitForWorkersReady"))
    assert rendered["Worker"]["spec"]["schedulingGroup"] == {"podGroupName": "test"}
    launcher = rendered["Launcher"]["spec"]
    assert launcher["schedulerName"] == "default-scheduler"
    assert "schedulingGroup" not in launcher


def test_decoration_leaves_the_template_alone() -> None:
    job = two_workers().job()
    replica = job.replica_spec(c.WORKER)
    assert replica is not None and replica.template is not None
    before = copy.deepcopy(replica.template)
    BETA.decorate_pod_template(replica.template, job)
    assert replica.template == before


def pod_group(scheduler: NativeScheduler, job: MPIJobWrapper) -> dict[str, Any]:
    [obj] = scheduler.gang_objects(job.job(), ClusterFacts())
    return obj


def test_v1beta1_updates_min_count_in_place_and_nothing_else() -> None:
    stored = {**pod_group(BETA, two_workers()), "status": {"conditions": []}}
    smaller = pod_group(BETA, two_workers().scheduling_policy(minAvailable=2))
    assert BETA.needs_update(stored, smaller)
    updated = BETA.updated_object(stored, smaller)
    assert updated["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    assert updated["status"] == {"conditions": []}
    assert stored["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    # The API server refuses a change of priorityClassName or between gang and basic.
    other_class = pod_group(BETA, two_workers().scheduling_policy(priorityClass="top"))
    assert not BETA.needs_update(stored, other_class)
    basic = pod_group(BETA, two_workers().scheduling_policy(minAvailable=0))
    assert not BETA.needs_update(stored, basic)
    assert not BETA.needs_update(stored, pod_group(BETA, two_workers()))


def test_v1alpha2_is_never_updated() -> None:
    stored = pod_group(ALPHA, two_workers())
    smaller = pod_group(ALPHA, two_workers().scheduling_policy(minAvailable=2))
    assert not ALPHA.needs_update(stored, smaller)


def state_of(conditions: list[dict[str, Any]]) -> tuple[bool | None, str, str, bool]:
    stored = {**pod_group(BETA, two_workers()), "status": {"conditions": conditions}}
    gang = StoredGang(two_workers().job(), {"podgroups": stored}, [])
    state = BETA.gang_state(gang)
    return state.scheduled, state.reason, state.message, state.warning


UNSCHEDULABLE = (
    "0/2 nodes are available: 2 Insufficient cpu. minCount (3) cannot be satisfied: "
    "1 scheduled, 1 remaining"
)


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        (
            [],
            (
                None,
                "PodGroupNotObserved",
                "kube-scheduler has not reported on the PodGroup yet: it tries the gang once "
                "minCount of its pods exist.",
                False,
            ),
        ),
        (
            [
                {
                    "type": "PodGroupInitiallyScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": UNSCHEDULABLE,
                }
            ],
            (False, "Unschedulable", UNSCHEDULABLE, True),
        ),
        (
            [
                {
                    "type": "PodGroupInitiallyScheduled",
                    "status": "False",
                    "reason": "SchedulerError",
                    "message": "nodeAffinity parse error",
                }
            ],
            (False, "SchedulerError", "nodeAffinity parse error", True),
        ),
        (
            [
                {"type": "DisruptionTarget", "status": "False", "reason": "X"},
                {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"},
            ],
            (
                True,
                "PodGroupScheduled",
                "kube-scheduler placed at least minCount pods together.",
                False,
            ),
        ),
        (
            [{"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled"}],
            (
                True,
                "PodGroupScheduled",
                "kube-scheduler placed at least minCount pods together.",
                False,
            ),
        ),
    ],
    ids=[
        "not tried yet",
        "unschedulable: the scheduler's message",
        "a scheduler error",
        "placed (v1beta1's condition)",
        "placed (v1alpha2's condition)",
    ],
)
def test_gang_state(
    conditions: list[dict[str, Any]], expected: tuple[bool | None, str, str, bool]
) -> None:
    assert state_of(conditions) == expected


def test_a_sync_creates_the_pod_group_before_the_pods_and_reports_the_scheduler() -> None:
    view = cluster_view()
    job = MPIJobWrapper().workers(2).obj()
    first = plan_sync(job, view, context(FLAG))
    assert writes(first)[3:6] == ["create podgroups test", *worker_writes("create", 2)]
    [create] = [a for a in first.actions if a.resource == "podgroups"]
    assert create.body is not None
    assert create.body["apiVersion"] == "scheduling.k8s.io/v1beta1"
    job = converge(job, view, context(FLAG))
    [key] = [k for k in view.objects if k[0] == "podgroups"]
    view.objects[key]["status"] = {
        "conditions": [
            {
                "type": "PodGroupInitiallyScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": UNSCHEDULABLE,
            }
        ]
    }
    plan = plan_sync(job, view, context(FLAG, now=LATER))
    [gang] = [c for c in status_of(plan)["conditions"] if c["type"] == "GangScheduled"]
    assert (gang["status"], gang["reason"], gang["message"]) == (
        "False",
        "Unschedulable",
        UNSCHEDULABLE,
    )
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "Unschedulable")]


def test_render_and_the_sdk_accept_the_flag_and_still_refuse_a_bad_scheduler_name() -> None:
    objects = list(sdk.render(two_workers().obj(), gang_scheduling=FLAG))
    assert [o["apiVersion"] for o in objects if o["kind"] == "PodGroup"] == [
        "scheduling.k8s.io/v1beta1"
    ]
    with pytest.raises(ValueError, match="--gang-scheduling 'Bad/Name': a scheduler name"):
        list(sdk.render(two_workers().obj(), gang_scheduling="Bad/Name"))
