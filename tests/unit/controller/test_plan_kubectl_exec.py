"""Syncs of KubectlExec (kubeflow.org/v1) jobs: the exact writes, the exec access that lives
only while the job runs and names only pods proven the job's own, and a status a v1 reader
(Flyte) can always map to a phase."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.controller.plan import Plan, plan_sync
from mpi_operator.testing.view import MemoryView
from mpi_operator.testing.wrappers import MPIJobWrapper
from tests.unit.controller.test_plan import (
    LATER,
    cached,
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


def granted(plan: Plan) -> list[list[str]]:
    """The pod names of each Role the plan writes (both rules name the same pods)."""
    roles = [a.body for a in plan.actions if a.resource == "roles" and a.body is not None]
    names = []
    for role in roles:
        [get, exec_] = role["rules"]
        assert get["resourceNames"] == exec_["resourceNames"]
        names.append(get["resourceNames"])
    return names


def test_a_first_sync_writes_the_config_the_workers_the_exec_access_launcher_and_status() -> None:
    plan = plan_sync(v1_job().obj(), cluster_view(), context())
    assert writes(plan) == [
        "create configmaps test-config",
        *worker_writes("create", 2),
        *EXEC_ACCESS,
        "create jobs test-launcher",
        "update_status mpijobs/status test",
    ]
    # The grant only after the pods it names were created: a create that fails stops the
    # sync before any Role names that pod. The account and Role go out together; the binding
    # only once its Role exists, since the API server checks a binding against its Role's rules.
    assert [a.batch for a in plan.actions[:6]] == [
        "shared objects",
        "worker pods",
        "worker pods",
        "shared objects",
        "shared objects",
        "",
    ]
    assert granted(plan) == [["test-worker-0", "test-worker-1"]]
    status = status_of(plan)
    assert status["startTime"]
    assert newest_true(status) == "Created"


def test_a_synced_v1_job_converges_to_no_writes() -> None:
    view = cluster_view()
    obj = converge(v1_job().obj(), view, context())
    assert plan_sync(obj, view, context(now=LATER)).actions == []


def test_scaling_up_names_a_new_worker_only_after_its_create() -> None:
    view = cluster_view()
    obj = converge(v1_job(2).obj(), view, context())
    obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 3
    plan = plan_sync(obj, view, context(now=LATER))
    assert writes(plan)[:3] == [
        "update configmaps test-config",
        "create pods test-worker-2",
        "update roles test-launcher",
    ]
    assert granted(plan) == [["test-worker-0", "test-worker-1", "test-worker-2"]]


def test_scaling_down_drops_the_deleted_workers_from_the_role() -> None:
    view = cluster_view()
    obj = converge(v1_job(3).obj(), view, context())
    obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 1
    plan = plan_sync(obj, view, context(now=LATER))
    assert [w for w in writes(plan) if "pods" in w or "role" in w] == [
        "delete pods test-worker-1",
        "delete pods test-worker-2",
        "update roles test-launcher",
    ]
    assert granted(plan) == [["test-worker-0"]]


def test_a_binding_given_other_subjects_binds_only_the_launchers_account_again() -> None:
    view = cluster_view()
    obj = converge(v1_job().obj(), view, context())
    binding = cached(view, "rolebindings", "test-launcher")
    desired_subjects = binding["subjects"]
    binding["subjects"] = [*desired_subjects, {"kind": "ServiceAccount", "name": "default"}]
    plan = plan_sync(obj, view, context(now=LATER))
    assert writes(plan) == ["update rolebindings test-launcher"]
    assert plan.actions[0].body is not None
    assert plan.actions[0].body["subjects"] == desired_subjects


def test_a_job_without_workers_has_no_role_and_no_binding() -> None:
    """runLauncherAsWorker alone: a launcher that execs into nobody is granted nothing (a Role
    without names would be one for every pod of the namespace)."""
    view = cluster_view()
    job = v1_job().without("Worker").run_launcher_as_worker().obj()
    plan = plan_sync(job, view, context())
    assert writes(plan) == [
        "create configmaps test-config",
        "create serviceaccounts test-launcher",
        "create jobs test-launcher",
        "update_status mpijobs/status test",
    ]
    converge(job, view, context())
    assert view.get("roles", "ns", "test-launcher") is None
    assert view.get("rolebindings", "ns", "test-launcher") is None


def test_removing_the_worker_role_while_running_revokes_the_grant() -> None:
    view = cluster_view()
    obj = converge(v1_job(2).obj(), view, context())
    del obj["spec"]["mpiReplicaSpecs"]["Worker"]
    plan = plan_sync(obj, view, context(now=LATER))
    assert [w for w in writes(plan) if "pods" in w or "role" in w] == [
        *worker_writes("delete", 2),
        *REVOKE,
    ]
    assert granted(plan) == []


def foreign_pod(name: str) -> dict[str, Any]:
    """A pod of that name that is not the job's, though it carries the job's labels."""
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {
                "training.kubeflow.org/operator-name": "mpi-operator",
                "training.kubeflow.org/job-name": "test",
                "training.kubeflow.org/job-role": "worker",
            },
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "uid": "x", "controller": True}
            ],
        },
    }


def test_a_foreign_pod_holding_a_worker_name_is_never_granted() -> None:
    plan = plan_sync(v1_job().obj(), cluster_view(foreign_pod("test-worker-1")), context())
    assert plan.error is not None and "test-worker-1" in plan.error
    assert granted(plan) == []
    assert not [w for w in writes(plan) if "role" in w]


def test_a_worker_name_taken_over_since_it_was_granted_loses_its_binding_first() -> None:
    """The Role names test-worker-1; the job's pod of that name is gone and another pod holds
    the name: the binding goes before anything else, and the sync stops."""
    view = cluster_view()
    obj = converge(v1_job().obj(), view, context())
    view.add(foreign_pod("test-worker-1"))
    plan = plan_sync(obj, view, context(now=LATER))
    assert writes(plan)[:1] == ["delete rolebindings test-launcher"]
    assert plan.error is not None and "test-worker-1" in plan.error
    assert granted(plan) == []


def test_a_granted_worker_gone_from_the_caches_is_unbound_then_granted_once_created() -> None:
    """Were the create to meet someone else's pod of that name, the sync would stop right
    after it, with no binding left to reach that pod."""
    view = cluster_view()
    obj = converge(v1_job().obj(), view, context())
    del view.objects[("pods", "ns", "test-worker-1")]
    plan = plan_sync(obj, view, context(now=LATER))
    assert [w for w in writes(plan) if "pods" in w or "role" in w] == [
        "delete rolebindings test-launcher",
        "create pods test-worker-1",
        "create rolebindings test-launcher",
    ]
    view.apply(plan.actions)
    assert view.get("rolebindings", "ns", "test-launcher") is not None


def test_a_replaced_worker_is_dropped_from_the_role_while_it_is_gone() -> None:
    view = cluster_view()
    obj = converge(v1_job().obj(), view, context())
    failed = view.get("pods", "ns", "test-worker-1")
    assert failed is not None
    failed["metadata"]["uid"] = "failed-uid"
    failed["status"] = {"phase": "Failed"}
    replacing = plan_sync(obj, view, context(now=LATER))
    assert [w for w in writes(replacing) if "pods" in w or "role" in w] == [
        "delete pods test-worker-1",
        "update roles test-launcher",
    ]
    assert granted(replacing) == [["test-worker-0"]]
    view.apply(replacing.actions)
    obj["status"] = status_of(replacing)
    recreating = plan_sync(obj, view, context(now=LATER))
    assert [w for w in writes(recreating) if "pods" in w or "role" in w] == [
        "create pods test-worker-1",
        "update roles test-launcher",
    ]
    assert granted(recreating) == [["test-worker-0", "test-worker-1"]]


def test_a_terminating_worker_is_not_granted() -> None:
    view = cluster_view()
    obj = converge(v1_job().obj(), view, context())
    leaving = view.get("pods", "ns", "test-worker-1")
    assert leaving is not None
    leaving["metadata"]["deletionTimestamp"] = LATER
    plan = plan_sync(obj, view, context(now=LATER))
    assert writes(plan)[:1] == ["delete rolebindings test-launcher"]
    assert granted(plan) == [["test-worker-0"]]


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
    assert [w for w in writes(resuming) if "pods" in w or "role" in w] == [
        *worker_writes("create", 2),
        *EXEC_ACCESS[1:],
    ]


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


def test_children_training_operator_made_through_kubeflow_org_v1_are_the_jobs_own() -> None:
    """Its children name kubeflow.org/v1 as their controller's version: the same job, so the
    sync neither refuses them nor stops granting their names."""
    view = cluster_view()
    obj = converge(v1_job().obj(), view, context())
    for child in view.objects.values():
        for ref in child["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "MPIJob":
                ref["apiVersion"] = "kubeflow.org/v1"
    plan = plan_sync(obj, view, context(now=LATER))
    assert plan.error is None
    assert plan.actions == []
