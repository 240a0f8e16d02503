"""Failed workers and failed launchers, sync by sync: what is replaced, what is counted, and
what the job's conditions say once its retries are spent."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mpi_operator.controller.plan import Plan, SyncContext, plan_sync
from mpi_operator.testing.view import MemoryView
from mpi_operator.testing.wrappers import MPIJobWrapper, owner_references
from tests.unit.controller.test_plan import (
    LATER,
    cluster_view,
    context,
    converge,
    reasons,
    status_of,
    writes,
)

OOM = {"reason": "OOMKilled", "exitCode": 137, "message": "Killed\nout of memory\x1b[0m"}
OOM_TAIL = ": Killed\\nout of memory\\x1b[0m"
# With --failure-log-tail=false a failure message keeps the exit code and reason, not the log.
LOG_TAIL = pytest.mark.parametrize("log_tail", [True, False], ids=["log tail", "no log tail"])


def later(log_tail: bool = True) -> SyncContext:
    return dataclasses.replace(context(now=LATER), failure_log_tail=log_tail)


def fail(view: MemoryView, name: str, uid: str = "", **terminated: Any) -> dict[str, Any]:
    """Turn a cached pod Failed, by its container's exit (``terminated``) or its own reason."""
    pod = view.get("pods", "ns", name)
    assert pod is not None
    if uid:
        pod["metadata"]["uid"] = uid
    container = pod["spec"]["containers"][0]["name"]
    pod["status"] = {
        "phase": "Failed",
        "containerStatuses": [{"name": container, "state": {"terminated": terminated}}],
    }
    return pod


def make_ready(view: MemoryView, job_name: str = "test") -> None:
    for (resource, _, name), pod in view.objects.items():
        if resource == "pods" and name.startswith(f"{job_name}-worker-"):
            pod["status"] = {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
            }


def sync(job: dict[str, Any], view: MemoryView, ctx: SyncContext) -> Plan:
    """One sync whose writes the view takes, and whose status the job takes."""
    plan = plan_sync(job, view, ctx)
    view.apply(plan.actions)
    if any(a.resource == "mpijobs/status" for a in plan.actions):
        job["status"] = status_of(plan)
    return plan


def condition(job: dict[str, Any], kind: str) -> dict[str, Any]:
    [found] = [c for c in job["status"]["conditions"] if c["type"] == kind]
    return dict(found)


@LOG_TAIL
def test_a_failed_worker_is_deleted_by_uid_counted_and_created_again(log_tail: bool) -> None:
    view = cluster_view()
    job = converge(MPIJobWrapper().workers(2).obj(), view, context())
    fail(view, "test-worker-1", uid="u-1", **OOM)

    replacing = sync(job, view, later(log_tail))
    assert writes(replacing) == ["delete pods test-worker-1", "update_status mpijobs/status test"]
    [delete] = replacing.actions[:1]
    assert delete.body == {"preconditions": {"uid": "u-1"}}
    assert reasons(replacing) == ["MPIJobRestarting"]
    assert job["status"]["replicaStatuses"]["Worker"] == {"failed": 1}
    restarting = condition(job, "Restarting")
    assert (restarting["status"], restarting["reason"]) == ("True", "MPIJobRestarting")
    assert restarting["message"] == (
        "Worker pod ns/test-worker-1 failed and is created again (1 of 6 retries used): "
        "container worker exited with code 137" + (OOM_TAIL if log_tail else "")
    )
    assert [e.message for e in replacing.events] == [restarting["message"]]
    assert not replacing.failed

    recreating = sync(job, view, context(now=LATER))
    assert writes(recreating) == ["create pods test-worker-1"]
    assert job["status"]["replicaStatuses"]["Worker"] == {"failed": 1}


def test_workers_failing_together_each_say_which_retry_they_use() -> None:
    view = cluster_view()
    job = converge(MPIJobWrapper().workers(3).obj(), view, context())
    job["status"]["replicaStatuses"] = {"Worker": {"failed": 1}}
    for name in ("test-worker-0", "test-worker-2"):
        fail(view, name, exitCode=1)
    plan = sync(job, view, context(now=LATER))
    assert [e.message.split(": ")[0] for e in plan.events] == [
        "Worker pod ns/test-worker-0 failed and is created again (2 of 6 retries used)",
        "Worker pod ns/test-worker-2 failed and is created again (3 of 6 retries used)",
    ]
    assert job["status"]["replicaStatuses"]["Worker"] == {"failed": 3}


def test_a_worker_being_deleted_is_not_counted_again() -> None:
    view = cluster_view()
    job = converge(MPIJobWrapper().workers(2).obj(), view, context())
    pod = fail(view, "test-worker-0", exitCode=1)
    pod["metadata"]["deletionTimestamp"] = LATER
    # Its deletion is the replacement under way: nothing to write, nothing counted.
    assert plan_sync(job, view, context(now=LATER)).actions == []


def test_a_succeeded_worker_is_left_as_it_is() -> None:
    view = cluster_view()
    job = converge(MPIJobWrapper().workers(2).obj(), view, context())
    pod = view.get("pods", "ns", "test-worker-1")
    assert pod is not None
    pod["status"] = {"phase": "Succeeded"}
    assert not any(a.resource == "pods" for a in plan_sync(job, view, context(now=LATER)).actions)


def test_a_worker_that_ended_before_any_launcher_is_created_again_without_counting() -> None:
    # sshd exits 0 on SIGTERM; a job waiting for ready workers must not wait for it forever.
    view = cluster_view()
    job = MPIJobWrapper().workers(2).launcher_creation_policy("WaitForWorkersReady").obj()
    job = converge(job, view, context())
    pod = view.get("pods", "ns", "test-worker-1")
    assert pod is not None
    pod["status"] = {"phase": "Succeeded"}
    replacing = sync(job, view, context(now=LATER))
    assert [w for w in writes(replacing) if "pods" in w] == ["delete pods test-worker-1"]
    assert reasons(replacing) == ["MPIJobRestarting"]
    assert "failed" not in job["status"]["replicaStatuses"]["Worker"]
    recreating = sync(job, view, context(now=LATER))
    assert [w for w in writes(recreating) if "pods" in w] == ["create pods test-worker-1"]


def test_wait_for_workers_ready_recovers_from_a_failed_worker() -> None:
    view = cluster_view()
    job = MPIJobWrapper().workers(2).launcher_creation_policy("WaitForWorkersReady").obj()
    job = converge(job, view, context())
    assert view.get("jobs", "ns", "test-launcher") is None
    make_ready(view)
    fail(view, "test-worker-0", exitCode=255, reason="Error")

    assert "delete pods test-worker-0" in writes(sync(job, view, context(now=LATER)))
    assert writes(sync(job, view, context(now=LATER))) == ["create pods test-worker-0"]
    make_ready(view)
    assert "create jobs test-launcher" in writes(sync(job, view, context(now=LATER)))
    assert job["status"]["replicaStatuses"]["Worker"]["failed"] == 1


@LOG_TAIL
def test_with_no_retries_a_failed_worker_fails_the_job_with_its_own_reason(log_tail: bool) -> None:
    view = cluster_view()
    job = (
        MPIJobWrapper()
        .workers(2)
        .launcher_creation_policy("WaitForWorkersReady")
        .run_policy(backoffLimit=0)
        .obj()
    )
    job = converge(job, view, context())
    fail(view, "test-worker-1", **OOM)

    failing = sync(job, view, later(log_tail))
    assert writes(failing) == ["update_status mpijobs/status test"]
    assert failing.failed and failing.continued
    failed = condition(job, "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "WorkerFailed/OOMKilled")
    assert failed["message"] == (
        "Worker pod ns/test-worker-1 failed and the job's retries are spent "
        "(backoffLimit 0: 1 worker and 0 launcher failures): "
        "container worker exited with code 137" + (OOM_TAIL if log_tail else "")
    )
    assert [(e.type, e.reason, e.message) for e in failing.events] == [
        ("Warning", "WorkerFailed/OOMKilled", failed["message"])
    ]
    assert job["status"]["completionTime"] == LATER
    assert job["status"]["replicaStatuses"]["Worker"] == {"failed": 1}
    # Finished: no launcher, no replacement, nothing more to write.
    assert plan_sync(job, view, context(now=LATER)).actions == []


def test_an_evicted_worker_that_spends_the_retries_keeps_upstreams_reason() -> None:
    view = cluster_view()
    job = converge(MPIJobWrapper().workers(2).run_policy(backoffLimit=0).obj(), view, context())
    pod = view.get("pods", "ns", "test-worker-1")
    assert pod is not None
    pod["status"] = {"phase": "Failed", "reason": "Evicted", "message": "low on memory"}
    sync(job, view, context(now=LATER))
    failed = condition(job, "Failed")
    assert failed["reason"] == "MPIJobEvicted"
    assert failed["message"].endswith("launcher failures): low on memory")


@pytest.mark.parametrize("policy", ["None", "Running", "All"])
def test_a_job_failed_by_a_worker_stops_its_running_launcher(policy: str) -> None:
    view = cluster_view()
    job = MPIJobWrapper().workers(2).clean_pod_policy(policy).run_policy(backoffLimit=0).obj()
    job = converge(job, view, context())
    launcher = view.get("jobs", "ns", "test-launcher")
    assert launcher is not None and not launcher["spec"].get("suspend")
    fail(view, "test-worker-1", exitCode=1, reason="Error")
    sync(job, view, context(now=LATER))
    assert condition(job, "Failed")["reason"] == "WorkerFailed/Error"

    ending = sync(job, view, context(now=LATER))
    [stop] = [a for a in ending.actions if a.resource == "jobs"]
    assert stop.body is not None and stop.body["spec"]["suspend"] is True
    deleted = [a.name for a in ending.actions if a.verb == "delete"]
    assert deleted == {"None": [], "Running": ["test-worker-0"], "All": worker_names(2)}[policy]
    assert plan_sync(job, view, context(now=LATER)).actions == []
    assert job["status"]["replicaStatuses"]["Worker"] == {"failed": 1}


def worker_names(count: int) -> list[str]:
    return [f"test-worker-{i}" for i in range(count)]


@LOG_TAIL
def test_worker_and_launcher_failures_share_the_backoff_limit(log_tail: bool) -> None:
    view = cluster_view()
    job = converge(MPIJobWrapper().workers(2).run_policy(backoffLimit=2).obj(), view, context())
    fail(view, "test-worker-0", exitCode=1, reason="Error")
    sync(job, view, context(now=LATER))
    sync(job, view, context(now=LATER))
    launcher = view.get("jobs", "ns", "test-launcher")
    assert launcher is not None
    launcher["metadata"]["uid"] = "launcher-uid"
    launcher["status"] = {"failed": 2, "active": 1}
    view.add(
        {
            "kind": "Pod",
            "metadata": {
                "name": "test-launcher-x",
                "namespace": "ns",
                "creationTimestamp": LATER,
                "ownerReferences": [{"uid": "launcher-uid", "controller": True}],
            },
            "status": {
                "phase": "Failed",
                "containerStatuses": [
                    {
                        "name": "launcher",
                        "state": {
                            "terminated": {
                                "exitCode": 1,
                                "reason": "Error",
                                "message": "ssh: connect to host test-worker-0 port 22",
                            }
                        },
                    }
                ],
            },
        }
    )

    failing = sync(job, view, later(log_tail))
    assert failing.failed
    failed = condition(job, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded/Error"
    assert failed["message"] == (
        "Job has reached the specified backoff limit "
        "(backoffLimit 2: 1 worker and 2 launcher failures): "
        "container launcher exited with code 1"
        + (": ssh: connect to host test-worker-0 port 22" if log_tail else "")
    )
    assert [(e.reason, e.message) for e in failing.events] == [
        ("BackoffLimitExceeded/Error", failed["message"])
    ]


def test_a_failed_worker_after_the_retries_are_spent_fails_the_job_without_a_launcher() -> None:
    # However the count got past the limit, the next failed worker ends the job: it must not
    # wait for a launcher that, with WaitForWorkersReady, would never come.
    view = cluster_view()
    job = MPIJobWrapper().workers(2).launcher_creation_policy("WaitForWorkersReady").obj()
    job = converge(job, view, context())
    job["status"]["replicaStatuses"] = {"Worker": {"failed": 9}}
    fail(view, "test-worker-0", exitCode=1, reason="Error")
    failing = sync(job, view, context(now=LATER))
    assert failing.failed and condition(job, "Failed")["reason"] == "WorkerFailed/Error"
    assert not any(a.verb == "delete" for a in failing.actions)


def test_suspension_keeps_the_worker_failures_counted() -> None:
    view = cluster_view()
    job = converge(MPIJobWrapper().workers(2).obj(), view, context())
    fail(view, "test-worker-0", exitCode=1)
    sync(job, view, context(now=LATER))
    job["spec"].setdefault("runPolicy", {})["suspend"] = True
    suspending = sync(job, view, context(now=LATER))
    assert "delete pods test-worker-1" in writes(suspending)
    assert job["status"]["replicaStatuses"]["Worker"] == {"failed": 1}


@pytest.mark.parametrize("gang", ["volcano", "scheduler-plugins-scheduler", "koord-scheduler"])
def test_a_replaced_worker_rejoins_its_gang(gang: str) -> None:
    view = cluster_view()
    job = converge(MPIJobWrapper().workers(2).obj(), view, context(gang))
    before = view.get("pods", "ns", "test-worker-1")
    assert before is not None
    original = {"metadata": dict(before["metadata"]), "spec": dict(before["spec"])}
    fail(view, "test-worker-1", exitCode=1)
    replacing = sync(job, view, context(gang, now=LATER))
    recreating = sync(job, view, context(gang, now=LATER))
    # The gang's objects stay as they are: minMember still counts the whole gang.
    assert [w for w in writes(replacing) + writes(recreating) if "pods" not in w] == [
        "update_status mpijobs/status test"
    ]
    after = view.get("pods", "ns", "test-worker-1")
    assert after is not None
    assert after["metadata"].get("labels") == original["metadata"].get("labels")
    assert after["metadata"].get("annotations") == original["metadata"].get("annotations")
    assert after["spec"].get("schedulerName") == original["spec"].get("schedulerName")


@pytest.mark.parametrize(
    ("now", "deleted", "requeue_after"),
    [
        ("2026-01-01T00:04:59Z", False, 1.0),
        ("2026-01-01T00:05:00Z", True, None),
        ("2026-01-02T00:00:00Z", True, None),
    ],
)
def test_a_finished_v1_job_is_deleted_once_its_ttl_has_passed_since_completion(
    now: str, deleted: bool, requeue_after: float | None
) -> None:
    """training-operator's rule, which Flyte relies on."""
    job = MPIJobWrapper().v1().workers(1).uid("u-9").run_policy(ttlSecondsAfterFinished=300)
    plan = plan_sync(finished_at(job), cluster_view(), context(now=now))
    assert (writes(plan) == ["delete mpijobs test"]) is deleted
    if deleted:
        assert plan.actions[0].body == {"preconditions": {"uid": "u-9"}}
    assert plan.requeue_after == requeue_after


def finished_launcher(ttl: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {}}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {
        "kind": "Job",
        "metadata": {
            "name": "test-launcher",
            "namespace": "ns",
            "ownerReferences": owner_references(),
        },
        "spec": spec,
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }


def test_a_finished_v2beta1_job_stays_and_its_launcher_job_gets_the_ttl() -> None:
    """kubeflow/mpi-operator's rule: the MPIJob and its status stay, whatever the time; the
    Job controller deletes the launcher Job. A job upstream ran to the end long ago keeps it
    all after a switch to this operator."""
    job = MPIJobWrapper().workers(1).run_policy(ttlSecondsAfterFinished=60)
    view = cluster_view(finished_launcher())
    plan = plan_sync(finished_at(job), view, context(now="2027-01-01T00:00:00Z"))
    assert writes(plan) == ["update jobs test-launcher"]
    assert plan.actions[0].body is not None
    assert plan.actions[0].body["spec"]["ttlSecondsAfterFinished"] == 60
    assert plan.requeue_after is None
    view.apply(plan.actions)
    assert plan_sync(finished_at(job), view, context(now="2027-01-01T00:00:00Z")).actions == []


def test_a_v2beta1_launcher_job_gets_no_ttl_before_the_job_is_recorded_finished() -> None:
    """Were the Job controller to delete it first, the next sync would create it again."""
    job = MPIJobWrapper().workers(1).run_policy(ttlSecondsAfterFinished=0)
    plan = plan_sync(job.obj(), cluster_view(), context())
    [launcher] = [a.body for a in plan.actions if a.resource == "jobs"]
    assert launcher is not None and "ttlSecondsAfterFinished" not in launcher["spec"]


def test_a_v2beta1_launcher_job_already_gone_is_not_created_again() -> None:
    job = MPIJobWrapper().workers(1).run_policy(ttlSecondsAfterFinished=0)
    plan = plan_sync(finished_at(job), cluster_view(), context(now=LATER))
    assert plan.actions == []


@pytest.mark.parametrize("completion", ["9999-12-31T23:59:59Z", "2026-01-01T00:00:00"])
def test_a_completion_time_that_cannot_be_a_deadline_is_no_deadline(completion: str) -> None:
    job = MPIJobWrapper().v1().workers(1).run_policy(ttlSecondsAfterFinished=2147483647)
    plan = plan_sync(finished_at(job, completion), cluster_view(), context(now=LATER))
    assert plan.actions == [] and plan.requeue_after is None


def test_a_finished_job_without_a_ttl_stays() -> None:
    plan = plan_sync(finished_at(MPIJobWrapper().workers(1)), cluster_view(), context(now=LATER))
    assert plan.actions == [] and plan.requeue_after is None


def finished_at(job: MPIJobWrapper, completion: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    obj = job.obj()
    obj["status"] = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "MPIJobCreated"},
            {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded"},
        ],
        "completionTime": completion,
    }
    return obj
