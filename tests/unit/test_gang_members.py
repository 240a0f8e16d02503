"""Gang membership and size, scheduler-neutral: kubeflow/mpi-operator's TestCalculateMinAvailable,
TestReplicasOrder and TestCalculatePGMinResources, adapted where this operator differs."""

from __future__ import annotations

import pytest
from gang_jobs import HIGH_AND_LOW, two_container_workers, two_of_a_hundred_and_one, two_of_three

from gang.members import (
    GangRole,
    gang_replica_types,
    gang_roles,
    min_member,
    min_resources,
    placement_order,
)
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.quantity import format_resources
from mpi_operator.testing.wrappers import MPIJobWrapper

NO_CLASSES = ClusterFacts()


def role(replica_type: str, priority: int, pods: int = 1) -> GangRole:
    return GangRole(replica_type=replica_type, pods=pods, priority=priority, pod_requests={})


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (MPIJobWrapper().workers(1000).scheduling_policy(minAvailable=2), 2),
        (MPIJobWrapper().workers(99), 100),
        (MPIJobWrapper().workers(2).scheduling_policy(queue="q"), 3),
        (MPIJobWrapper().workers(2).launcher_creation_policy("WaitForWorkersReady"), 2),
        (MPIJobWrapper().run_launcher_as_worker(), 1),
    ],
    ids=[
        "minAvailable is used",
        "unset: workers plus the launcher",
        "a policy without minAvailable: workers plus the launcher",
        "(differs) a launcher waiting for ready workers is not counted",
        "launcher only",
    ],
)
def test_min_member(job: MPIJobWrapper, expected: int) -> None:
    assert min_member(job.job()) == expected


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (MPIJobWrapper().workers(2), ("Launcher", "Worker")),
        (MPIJobWrapper(), ("Launcher",)),
        (MPIJobWrapper().workers(2).launcher_creation_policy("WaitForWorkersReady"), ("Worker",)),
        (
            MPIJobWrapper()
            .run_launcher_as_worker()
            .launcher_creation_policy("WaitForWorkersReady"),
            ("Launcher",),
        ),
    ],
    ids=[
        "launcher and workers",
        "launcher only",
        "workers only while the launcher waits for them",
        "a launcher with no workers to wait for",
    ],
)
def test_gang_replica_types(job: MPIJobWrapper, expected: tuple[str, ...]) -> None:
    assert gang_replica_types(job.job()) == expected


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        ([role("Launcher", 1), role("Worker", 0)], ["Launcher", "Worker"]),
        ([role("Launcher", 0), role("Worker", 1)], ["Worker", "Launcher"]),
        ([role("Launcher", 0), role("Worker", 0)], ["Launcher", "Worker"]),
        ([role("Launcher", -5), role("Worker", -10)], ["Launcher", "Worker"]),
    ],
    ids=[
        "a higher-priority launcher stays ahead",
        "higher-priority workers come first",
        "equal priorities keep the launcher first",
        "negative priorities order the same way",
    ],
)
def test_placement_order(roles: list[GangRole], expected: list[str]) -> None:
    assert [r.replica_type for r in placement_order(roles)] == expected


def test_gang_roles_carry_priority_and_one_pods_requests() -> None:
    job = (
        MPIJobWrapper()
        .launcher(cpu="1")
        .workers(3, cpu="2")
        .priority_class("Worker", "high")
        .priority_class("Launcher", "missing")
    )
    roles = gang_roles(job.job(), ClusterFacts(priority_classes={"high": 7}, default_priority=3))
    assert [(r.replica_type, r.pods, r.priority) for r in roles] == [
        ("Worker", 3, 7),
        ("Launcher", 1, 3),
    ]
    assert format_resources(dict(roles[0].pod_requests)) == {"cpu": "2"}


@pytest.mark.parametrize(
    ("job", "facts", "expected"),
    [
        (
            MPIJobWrapper()
            .workers(2, cpu="10")
            .scheduling_policy(minAvailable=0, minResources={"cpu": "100", "memory": "512Gi"}),
            NO_CLASSES,
            {"cpu": "100", "memory": "512Gi"},
        ),
        (MPIJobWrapper().workers(2, cpu="10").scheduling_policy(minAvailable=0), NO_CLASSES, None),
        (
            MPIJobWrapper()
            .launcher(cpu="2", memory="1Gi")
            .workers(2, cpu="10", memory="32Gi")
            .scheduling_policy(minAvailable=3),
            NO_CLASSES,
            {"cpu": "22", "memory": "65Gi"},
        ),
        (
            MPIJobWrapper()
            .launcher(cpu="2", memory="1Gi")
            .run_launcher_as_worker()
            .scheduling_policy(minAvailable=1),
            NO_CLASSES,
            {"cpu": "2", "memory": "1Gi"},
        ),
        (two_container_workers(), NO_CLASSES, {"cpu": "122", "memory": "1089Gi"}),
        (two_of_three("non-existence"), NO_CLASSES, {"cpu": "7", "memory": "18Gi"}),
        (two_of_a_hundred_and_one("high", "low"), HIGH_AND_LOW, {"cpu": "22", "memory": "68Gi"}),
        (two_of_a_hundred_and_one("low", "high"), HIGH_AND_LOW, {"cpu": "40", "memory": "128Gi"}),
        (
            MPIJobWrapper()
            .launcher(cpu="2")
            .workers(4, cpu="10")
            .scheduling_policy(minAvailable=1),
            NO_CLASSES,
            {"cpu": "2"},
        ),
    ],
    ids=[
        "the policy's minResources even with minMember 0",
        "minMember 0 without a policy list gives none",
        "without priorityClass, minMember 3",
        "without worker without priorityClass",
        "without priorityClass and minMember unset: every container",
        "with non-existence priorityClass: launcher plus one worker",
        "with existence priorityClass: launcher plus one worker",
        "(differs) higher-priority workers fill minMember before the launcher",
        "minMember 1 on a tie is the launcher alone",
    ],
)
def test_min_resources(
    job: MPIJobWrapper, facts: ClusterFacts, expected: dict[str, str] | None
) -> None:
    result = min_resources(job.job(), facts)
    assert (None if result is None else format_resources(result)) == expected
