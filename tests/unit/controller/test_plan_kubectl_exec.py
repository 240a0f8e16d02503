"""Syncs of KubectlExec (kubeflow.org/v1) jobs: the exact writes, the exec access that lives
only while the job runs, and a status a v1 reader (Flyte) can always map to a phase."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.controller.plan import plan_sync
from mpi_operator.testing.view import MemoryView
from mpi_operator.testing.wrappers import MPIJobWrapper
from tests.unit.controller.test_plan import (
    LATER,
    cluster_view,
    conditions,
    context,
    converge,
    launcher_completed,
    pod_group_with_status,
    pods_running,
    status_of,
    worker_writes,
    writes,
)

EXEC_ACCESS = [
    "create serviceaccounts test-launcher",
    "create roles test-launcher",
    "create rolebindings test-launcher",
]
REVOKE = ["delete rolebindings test-launcher", "delete roles test-launcher"]


def v1_job(workers: int = 2) -> MPIJobWrapper:
    return MPIJobWrapper().v1().workers(workers)


def newest_true(status: dict[str, Any]) -> str:
    """The condition a v1 reader takes for the job's phase: Flyte sorts by
    lastTransitionTime and takes the last True one; ties keep list order here."""
    true = [c for c in status.get("conditions", []) if c["status"] == "True"]
    return sorted(true, key=lambda c: c["lastTransitionTime"])[-1]["type"]


def test_a_first_sync_writes_the_config_the_exec_access_workers_launcher_and_status() -> None:
    plan = plan_sync(v1_job().obj(), cluster_view(), context())
    assert writes(plan) == [
        "create configmaps test-config",
        *EXEC_ACCESS,
        *worker_writes("create", 2),
        "create jobs test-launcher",
        "update_status mpijobs/status test",
    ]
    # The shared objects go out together; the binding only once its Role exists, since the
    # API server checks a binding against the rules of its Role.
    assert [a.batch for a in plan.actions[:4]] == ["shared objects"] * 3 + [""]
    status = status_of(plan)
    assert status["startTime"]
    assert newest_true(status) == "Created"


def test_a_synced_v1_job_converges_to_no_writes() -> None:
    view = cluster_view()
    obj = converge(v1_job().obj(), view, context())
    assert plan_sync(obj, view, context(now=LATER)).actions == []


def test_scaling_updates_the_role_to_name_the_new_workers() -> None:
    view = cluster_view()
    obj = converge(v1_job(2).obj(), view, context())
    obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 3
    plan = plan_sync(obj, view, context(now=LATER))
    assert writes(plan)[:2] == ["update configmaps test-config", "update roles test-launcher"]
    [role_update] = [a for a in plan.actions if a.resource == "roles"]
    assert role_update.body is not None
    assert role_update.body["rules"][1]["resourceNames"][-1] == "test-worker-2"


@pytest.mark.parametrize("policy", ["None", "All"])
def test_a_finished_job_loses_its_exec_access_whatever_the_clean_pod_policy(
    policy: str,
) -> None:
    view = cluster_view()
    obj = converge(v1_job().clean_pod_policy(policy).obj(), view, context())
    launcher_completed(view)
    obj = converge(obj, view, context(now=LATER), rounds=4)
    assert newest_true(obj["status"]) == "Succeeded"
    assert view.get("rolebindings", "ns", "test-launcher") is None
    assert view.get("roles", "ns", "test-launcher") is None
    # The account alone grants nothing; it goes with the job.
    assert view.get("serviceaccounts", "ns", "test-launcher") is not None
    workers_left = [view.get("pods", "ns", f"test-worker-{i}") is not None for i in range(2)]
    assert workers_left == [policy == "None"] * 2


def test_suspension_revokes_the_exec_access_and_resuming_grants_it_again() -> None:
    view = cluster_view()
    obj = converge(v1_job().obj(), view, context())
    obj["spec"]["runPolicy"] = {"suspend": True}
    suspending = plan_sync(obj, view, context(now=LATER))
    assert writes(suspending)[:1] == ["update jobs test-launcher"]
    assert [w for w in writes(suspending) if "role" in w] == REVOKE
    obj = converge(obj, view, context(now=LATER))
    obj["spec"]["runPolicy"] = {"suspend": False}
    resuming = plan_sync(obj, view, context(now=LATER))
    assert writes(resuming)[:2] == EXEC_ACCESS[1:]


def test_an_exec_access_object_of_someone_else_stops_the_sync() -> None:
    foreign = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "test-launcher", "namespace": "ns"},
    }
    plan = plan_sync(v1_job().obj(), MemoryView(foreign), context())
    assert plan.error == (
        'Resource "test-launcher" of Kind "Role" already exists and is not managed by MPIJob'
    )
    assert "create jobs test-launcher" not in writes(plan)


@pytest.mark.parametrize("gang", ["volcano", "scheduler-plugins-scheduler"])
def test_a_placed_gang_never_leaves_a_condition_a_v1_reader_does_not_know(gang: str) -> None:
    view = cluster_view()
    obj = converge(v1_job().obj(), view, context(gang))
    pods_running(view, workers=2)
    pod_group_with_status(view, {"phase": "Pending"})
    waiting = plan_sync(obj, view, context(gang))
    view.apply(waiting.actions)
    obj["status"] = status_of(waiting)
    assert ("GangScheduled", "False", "PodGroupPending") in conditions(obj["status"])
    assert newest_true(obj["status"]) in ("Created", "Running")

    pod_group_with_status(view, {"phase": "Running"})
    placed = plan_sync(obj, view, context(gang, now=LATER))
    status = status_of(placed)
    assert all(c["type"] != "GangScheduled" for c in status["conditions"])
    assert newest_true(status) == "Running"
    assert [e.reason for e in placed.events] == ["PodGroupRunning"]
    obj["status"] = status
    assert plan_sync(obj, view, context(gang, now=LATER)).actions == []
