"""The desired PodGroup of each gang scheduler: docs/gang-scheduling acceptance items 1-29 and 39,
and kubeflow/mpi-operator's TestNewPodGroup and TestCalcPriorityClassName.

J(N) is the checklist's fixture: MPIJob ns/test, a launcher requesting 1 CPU / 2Gi and N
workers requesting 10 CPU / 20Gi each.
"""

from __future__ import annotations

from typing import Any

import pytest
from gang_jobs import HIGH_AND_LOW, two_container_workers, two_of_a_hundred_and_one, two_of_three

from gang import GangScheduler, select_gang_scheduler
from gang.coscheduling import CoschedulingScheduler
from gang.volcano import VolcanoScheduler
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.validation import parse_mpijob
from mpi_operator.desired.validation import validate
from mpi_operator.testing.wrappers import (
    MPIJobWrapper,
    child_labels,
    container,
    owner_references,
    resources_container,
)

VOLCANO = VolcanoScheduler()
COSCHEDULING = CoschedulingScheduler("scheduler-plugins-scheduler")
BOTH = pytest.mark.parametrize(
    "scheduler", [VOLCANO, COSCHEDULING], ids=["volcano", "coscheduling"]
)
NO_CLASSES = ClusterFacts()
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
COSCHEDULING_API = "scheduling.x-k8s.io/v1alpha1"


def j(workers: int) -> MPIJobWrapper:
    return (
        MPIJobWrapper("test", "ns")
        .launcher(cpu="1", memory="2Gi")
        .workers(workers, cpu="10", memory="20Gi")
    )


def spec_of(
    scheduler: GangScheduler, job: MPIJobWrapper, facts: ClusterFacts = NO_CLASSES
) -> dict[str, Any]:
    spec: dict[str, Any] = scheduler.gang_objects(job.job(), facts)[0]["spec"]
    return spec


# -- item 1 and flag selection ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "kind", "scheduler_name", "api_version"),
    [
        ("volcano", VolcanoScheduler, "volcano", VOLCANO_API),
        (
            "scheduler-plugins-scheduler",
            CoschedulingScheduler,
            "scheduler-plugins-scheduler",
            COSCHEDULING_API,
        ),
        ("scheduler-plugins", CoschedulingScheduler, "scheduler-plugins", COSCHEDULING_API),
        ("default-scheduler", CoschedulingScheduler, "default-scheduler", COSCHEDULING_API),
    ],
    ids=[
        "volcano selects Volcano with schedulerName volcano",
        "the helm second scheduler name selects coscheduling under that name",
        "scheduler-plugins is not special: coscheduling with schedulerName scheduler-plugins",
        "default-scheduler selects coscheduling under the default scheduler",
    ],
)
def test_the_flag_selects_the_strategy(
    flag: str, kind: type, scheduler_name: str, api_version: str
) -> None:
    scheduler = select_gang_scheduler(flag)
    assert isinstance(scheduler, kind)
    assert scheduler.scheduler_name == scheduler_name
    assert [(r.api_version, r.plural) for r in scheduler.gang_resources] == [
        (api_version, "podgroups")
    ]


@pytest.mark.parametrize("flag", ["", None], ids=["empty flag", "no flag"])
def test_without_the_flag_there_is_no_gang_scheduler(flag: str | None) -> None:
    assert select_gang_scheduler(flag) is None


# -- items 2 and 3: metadata ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("scheduler", "api_version"),
    [
        (VOLCANO, VOLCANO_API),
        (COSCHEDULING, COSCHEDULING_API),
    ],
    ids=["volcano v1beta1", "coscheduling v1alpha1"],
)
def test_pod_group_is_named_after_the_job_and_owned_by_it_alone(
    scheduler: GangScheduler, api_version: str
) -> None:
    pod_group = scheduler.pod_group(j(2).job(), NO_CLASSES)
    assert pod_group["apiVersion"] == api_version
    assert pod_group["kind"] == "PodGroup"
    assert pod_group["metadata"] == {
        "name": "test",
        "namespace": "ns",
        "labels": child_labels(None),
        "ownerReferences": owner_references("test"),
    }


@BOTH
def test_pod_group_has_only_the_operator_label_and_does_not_copy_job_annotations(
    scheduler: GangScheduler,
) -> None:
    job = j(2).annotation("volcano.sh/preemptable", "true").annotation(QUEUE_ANNOTATION, "q")
    metadata = scheduler.pod_group(job.job(), NO_CLASSES)["metadata"]
    assert metadata["labels"] == child_labels(None)
    assert "annotations" not in metadata


# -- items 4, 5 and 18: minMember -----------------------------------------------------------


@BOTH
@pytest.mark.parametrize(
    ("job", "min_member"),
    [
        (j(2), 3),
        (j(99), 100),
        (j(1000).scheduling_policy(minAvailable=2), 2),
        (j(2).scheduling_policy(minAvailable=10), 10),
        (MPIJobWrapper().run_launcher_as_worker(), 1),
        (j(3).run_launcher_as_worker(), 4),
    ],
    ids=[
        "workers plus the launcher by default",
        "99 workers give 100",
        "minAvailable wins over the pod count",
        "minAvailable larger than the pod count is kept",
        "launcher as the only worker gives 1",
        "launcher as worker with 3 workers still counts every pod",
    ],
)
def test_min_member(scheduler: GangScheduler, job: MPIJobWrapper, min_member: int) -> None:
    assert spec_of(scheduler, job)["minMember"] == min_member


@BOTH
def test_min_available_zero_omits_min_member_and_min_resources(scheduler: GangScheduler) -> None:
    spec = spec_of(scheduler, j(2).scheduling_policy(minAvailable=0))
    assert "minMember" not in spec
    assert "minResources" not in spec


# -- the #608 fix: WaitForWorkersReady ------------------------------------------------------


@BOTH
@pytest.mark.parametrize(
    ("job", "min_member", "min_resources"),
    [
        (
            j(2).launcher_creation_policy("WaitForWorkersReady"),
            2,
            {"cpu": "20", "memory": "40Gi"},
        ),
        (
            j(2).launcher_creation_policy("WaitForWorkersReady").scheduling_policy(minAvailable=1),
            1,
            {"cpu": "10", "memory": "20Gi"},
        ),
        (
            j(2).launcher_creation_policy("WaitForWorkersReady").scheduling_policy(minAvailable=3),
            3,
            {"cpu": "20", "memory": "40Gi"},
        ),
        (
            MPIJobWrapper()
            .launcher(cpu="1", memory="2Gi")
            .run_launcher_as_worker()
            .launcher_creation_policy("WaitForWorkersReady"),
            1,
            {"cpu": "1", "memory": "2Gi"},
        ),
        (
            j(2).launcher_creation_policy("AtStartup"),
            3,
            {"cpu": "21", "memory": "42Gi"},
        ),
    ],
    ids=[
        "the launcher waits for the workers: the gang is the workers",
        "minAvailable below the worker count picks workers only",
        "explicit minAvailable wins even though only the workers exist",
        "launcher as the only worker is the gang even when it would wait",
        "AtStartup keeps the launcher in the gang",
    ],
)
def test_a_launcher_that_waits_for_workers_is_not_part_of_the_gang(
    scheduler: GangScheduler,
    job: MPIJobWrapper,
    min_member: int,
    min_resources: dict[str, str],
) -> None:
    spec = spec_of(scheduler, job)
    assert (spec["minMember"], spec["minResources"]) == (min_member, min_resources)


# -- items 6, 7 and 8: fields only one scheduler has ----------------------------------------


@pytest.mark.parametrize(
    ("job", "timeout"),
    [(j(2), 0), (j(2).scheduling_policy(scheduleTimeoutSeconds=100), 100)],
    ids=["absent policy still sends an explicit 0", "policy timeout is passed"],
)
def test_coscheduling_always_sends_schedule_timeout_seconds(
    job: MPIJobWrapper, timeout: int
) -> None:
    assert spec_of(COSCHEDULING, job)["scheduleTimeoutSeconds"] == timeout


def test_volcano_has_no_timeout_field() -> None:
    spec = spec_of(VOLCANO, j(2).scheduling_policy(scheduleTimeoutSeconds=100))
    assert not any("timeout" in key.lower() for key in spec)


def test_coscheduling_ignores_queue_and_priority_class() -> None:
    job = (
        j(2)
        .annotation(QUEUE_ANNOTATION, "project-x")
        .priority_class("Launcher", "high")
        .scheduling_policy(queue="project-y", priorityClass="high")
    )
    fields = {"minMember", "minResources", "scheduleTimeoutSeconds"}
    assert set(spec_of(COSCHEDULING, job)) == fields


# -- items 9-15: Volcano queue and priorityClassName ----------------------------------------


@pytest.mark.parametrize(
    ("job", "queue"),
    [
        (j(2).annotation(QUEUE_ANNOTATION, "project-x"), "project-x"),
        (
            j(2).annotation(QUEUE_ANNOTATION, "project-x").scheduling_policy(queue="project-y"),
            "project-y",
        ),
        (j(2).scheduling_policy(queue="project-y"), "project-y"),
        (j(2).annotation(QUEUE_ANNOTATION, "project-x").scheduling_policy(queue=""), "project-x"),
        (j(2).annotation("scheduling.volcano.sh/group-name", "project-z"), None),
        (j(2), None),
    ],
    ids=[
        "the MPIJob annotation names the queue",
        "the policy queue wins over the annotation",
        "the policy queue alone",
        "an empty policy queue falls back to the annotation",
        "the group-name annotation is not a queue",
        "no queue at all is sent as none (the CRD stores default)",
    ],
)
def test_volcano_queue(job: MPIJobWrapper, queue: str | None) -> None:
    assert spec_of(VOLCANO, job).get("queue") == queue


@pytest.mark.parametrize(
    ("job", "priority_class"),
    [
        (
            j(2)
            .scheduling_policy(priorityClass="high")
            .priority_class("Launcher", "low")
            .priority_class("Worker", "mid"),
            "high",
        ),
        (j(2).priority_class("Launcher", "high").priority_class("Worker", "low"), "high"),
        (j(2).priority_class("Launcher", "").priority_class("Worker", "low"), "low"),
        (j(2), None),
        (j(2).priority_class("Launcher", "does-not-exist"), "does-not-exist"),
    ],
    ids=[
        "the policy priorityClass wins",
        "else the launcher's class",
        "else the workers' class",
        "nothing set sends none",
        "a class that does not exist is passed through verbatim",
    ],
)
def test_volcano_priority_class_name(job: MPIJobWrapper, priority_class: str | None) -> None:
    assert spec_of(VOLCANO, job).get("priorityClassName") == priority_class


# -- items 16-29: minResources ----------------------------------------------------------------


@BOTH
@pytest.mark.parametrize(
    ("job", "facts", "min_resources"),
    [
        (j(2), NO_CLASSES, {"cpu": "21", "memory": "42Gi"}),
        (
            j(1000).scheduling_policy(
                minAvailable=2,
                minResources={"cpu": "100", "memory": "512Gi", "example.com/gpu": "40"},
            ),
            NO_CLASSES,
            {"cpu": "100", "example.com/gpu": "40", "memory": "512Gi"},
        ),
        (two_container_workers(), NO_CLASSES, {"cpu": "122", "memory": "1089Gi"}),
        (
            two_container_workers().scheduling_policy(minAvailable=3),
            NO_CLASSES,
            {"cpu": "122", "memory": "1089Gi"},
        ),
        (
            MPIJobWrapper()
            .launcher()
            .workers(1)
            .containers(
                "Worker",
                resources_container(
                    requests={"cpu": "10", "memory": "16Gi"},
                    limits={"example.com/gpu": "8", "cpu": "20", "memory": "32Gi"},
                ),
            ),
            NO_CLASSES,
            {"cpu": "10", "example.com/gpu": "8", "memory": "16Gi"},
        ),
        (
            MPIJobWrapper()
            .launcher()
            .workers(2)
            .containers("Worker", resources_container(limits={"cpu": "4", "memory": "8Gi"})),
            NO_CLASSES,
            {"cpu": "8", "memory": "16Gi"},
        ),
        (
            j(2).init_containers("Worker", container("setup", cpu="100")),
            NO_CLASSES,
            {"cpu": "201", "memory": "42Gi"},
        ),
        (two_of_three(), NO_CLASSES, {"cpu": "7", "memory": "18Gi"}),
        (two_of_three("non-existence"), NO_CLASSES, {"cpu": "7", "memory": "18Gi"}),
        (two_of_a_hundred_and_one("high", "low"), HIGH_AND_LOW, {"cpu": "22", "memory": "68Gi"}),
        (
            MPIJobWrapper()
            .launcher(cpu="1")
            .workers(4, cpu="10")
            .priority_class("Worker", "important")
            .scheduling_policy(minAvailable=3),
            ClusterFacts(priority_classes={"important": 1000}),
            {"cpu": "30"},
        ),
        (j(2).scheduling_policy(minAvailable=10), NO_CLASSES, {"cpu": "21", "memory": "42Gi"}),
        (
            MPIJobWrapper().launcher(cpu="1", memory="2Gi").run_launcher_as_worker(),
            NO_CLASSES,
            {"cpu": "1", "memory": "2Gi"},
        ),
        (j(3).run_launcher_as_worker(), NO_CLASSES, {"cpu": "31", "memory": "62Gi"}),
        (
            MPIJobWrapper().launcher(cpu="500m").workers(2, cpu="500m"),
            NO_CLASSES,
            {"cpu": "1500m"},
        ),
    ],
    ids=[
        "16 every pod's requests by default",
        "17 the policy's minResources verbatim even with minAvailable",
        "19 every container of every pod when minMember is unset",
        "19 every container of every pod when minMember covers all pods",
        "20 requests win and limits fill the gaps",
        "21 limits stand in for missing requests",
        "22 (differs) a larger init container dominates the pod's request",
        "23 equal priorities count the launcher first",
        "23 a missing PriorityClass counts as default priority, no error",
        "24 the higher-priority launcher plus minAvailable-1 workers",
        "25 (differs) the top minAvailable pods by priority: three workers, not 42",
        "26 minAvailable above the pod count sums every pod, no extrapolation",
        "27 launcher as the only worker",
        "28 launcher as worker plus three workers",
        "quantities print canonically: 3 x 500m is 1500m",
    ],
)
def test_min_resources(
    scheduler: GangScheduler,
    job: MPIJobWrapper,
    facts: ClusterFacts,
    min_resources: dict[str, str],
) -> None:
    assert spec_of(scheduler, job, facts)["minResources"] == min_resources


def test_policy_min_resources_are_written_canonically() -> None:
    job = j(2).scheduling_policy(minResources={"cpu": 100000, "memory": "100000Gi"})
    assert spec_of(VOLCANO, job)["minResources"] == {"cpu": "100k", "memory": "100000Gi"}


@pytest.mark.parametrize(
    ("scheduler", "expected"),
    [(VOLCANO, {}), (COSCHEDULING, None)],
    ids=["volcano sends an empty minResources", "coscheduling omits an empty minResources"],
)
def test_pods_without_resources(scheduler: GangScheduler, expected: dict[str, str] | None) -> None:
    assert spec_of(scheduler, MPIJobWrapper().workers(2)).get("minResources") == expected


@pytest.mark.parametrize(
    ("scheduler", "expected"),
    [(VOLCANO, {}), (COSCHEDULING, None)],
    ids=["volcano keeps an empty policy list", "coscheduling omits an empty policy list"],
)
def test_empty_policy_min_resources(
    scheduler: GangScheduler, expected: dict[str, str] | None
) -> None:
    job = j(2).scheduling_policy(minResources={})
    assert spec_of(scheduler, job).get("minResources") == expected


@BOTH
def test_policy_min_resources_are_kept_even_with_min_available_zero(
    scheduler: GangScheduler,
) -> None:
    spec = spec_of(scheduler, j(2).scheduling_policy(minAvailable=0, minResources={"cpu": "3"}))
    assert spec["minResources"] == {"cpu": "3"}


@BOTH
@pytest.mark.parametrize(
    ("facts", "min_resources"),
    [
        (ClusterFacts(priority_classes={"mid": 50}), {"cpu": "20"}),
        (ClusterFacts(priority_classes={"mid": 50}, default_priority=100), {"cpu": "11"}),
    ],
    ids=[
        "without a global default the workers' class outranks the launcher",
        "the launcher without a class gets the cluster's global default priority",
    ],
)
def test_a_pod_without_a_class_ranks_at_the_global_default(
    scheduler: GangScheduler, facts: ClusterFacts, min_resources: dict[str, str]
) -> None:
    job = (
        MPIJobWrapper()
        .launcher(cpu="1")
        .workers(3, cpu="10")
        .priority_class("Worker", "mid")
        .scheduling_policy(minAvailable=2)
    )
    assert spec_of(scheduler, job, facts)["minResources"] == min_resources


# -- kubeflow/mpi-operator TestNewPodGroup ------------------------------------------------------

ALL_POLICY = (
    MPIJobWrapper("test", "ns")
    .annotation(QUEUE_ANNOTATION, "project-x")
    .launcher(cpu="1", memory="2Gi")
    .workers(1000, cpu="10", memory="20Gi")
    .scheduling_policy(
        minAvailable=2,
        queue="project-y",
        priorityClass="high",
        minResources={"cpu": "100", "memory": "512Gi", "example.com/gpu": "40"},
        scheduleTimeoutSeconds=100,
    )
)
NO_POLICY = (
    MPIJobWrapper("test", "ns")
    .annotation(QUEUE_ANNOTATION, "project-x")
    .launcher(cpu="1", memory="2Gi")
    .priority_class("Launcher", "high")
    .workers(2, cpu="10", memory="20Gi")
)
NO_WORKER = (
    MPIJobWrapper("test", "ns")
    .launcher(cpu="1", memory="2Gi")
    .run_launcher_as_worker()
    .scheduling_policy(
        minAvailable=1, queue="project-y", priorityClass="high", scheduleTimeoutSeconds=100
    )
)
# Each job's gang, the same whichever scheduler places it.
ALL_POLICY_GANG = {
    "minMember": 2,
    "minResources": {"cpu": "100", "example.com/gpu": "40", "memory": "512Gi"},
}
NO_POLICY_GANG = {"minMember": 3, "minResources": {"cpu": "21", "memory": "42Gi"}}
NO_WORKER_GANG = {"minMember": 1, "minResources": {"cpu": "1", "memory": "2Gi"}}


@pytest.mark.parametrize(
    ("scheduler", "job", "spec"),
    [
        (
            VOLCANO,
            ALL_POLICY,
            {**ALL_POLICY_GANG, "queue": "project-y", "priorityClassName": "high"},
        ),
        (COSCHEDULING, ALL_POLICY, {**ALL_POLICY_GANG, "scheduleTimeoutSeconds": 100}),
        (VOLCANO, NO_POLICY, {**NO_POLICY_GANG, "queue": "project-x", "priorityClassName": "high"}),
        (COSCHEDULING, NO_POLICY, {**NO_POLICY_GANG, "scheduleTimeoutSeconds": 0}),
        (VOLCANO, NO_WORKER, {**NO_WORKER_GANG, "queue": "project-y", "priorityClassName": "high"}),
        (COSCHEDULING, NO_WORKER, {**NO_WORKER_GANG, "scheduleTimeoutSeconds": 100}),
    ],
    ids=[
        "volcano: all schedulingPolicy fields are set",
        "coscheduling: all schedulingPolicy fields are set",
        "volcano: schedulingPolicy is nil",
        "coscheduling: schedulingPolicy is nil",
        "volcano: no worker, launcher runs as worker (item 27)",
        "coscheduling: no worker, launcher runs as worker (item 27)",
    ],
)
def test_new_pod_group(scheduler: GangScheduler, job: MPIJobWrapper, spec: dict[str, Any]) -> None:
    assert spec_of(scheduler, job) == spec


# -- item 39 ------------------------------------------------------------------------------------


def test_negative_min_available_is_a_field_error() -> None:
    obj = MPIJobWrapper().run_launcher_as_worker().scheduling_policy(minAvailable=-1).obj()
    assert [error.path for error in validate(parse_mpijob(obj))] == [
        "spec.runPolicy.schedulingPolicy.minAvailable"
    ]
