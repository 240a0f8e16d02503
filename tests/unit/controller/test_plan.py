"""One sync as a list of API writes, as kubeflow/mpi-operator's controller tests compare them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gang import gang_resources_of, select_gang_scheduler
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.controller.plan import Plan, SyncContext, plan_sync
from mpi_operator.desired.objects import desired_objects
from mpi_operator.desired.transports.ssh import SSHKeyPair
from mpi_operator.testing.view import MemoryView
from mpi_operator.testing.wrappers import MPIJobWrapper

NOW = "2026-01-01T00:00:00Z"
NATIVE = "scheduling.k8s.io/podgroup"
LATER = "2026-01-01T00:05:00Z"
KEY = SSHKeyPair(
    private_key_pem="-----BEGIN EC PRIVATE KEY-----\nx\n-----END EC PRIVATE KEY-----\n",
    public_key_openssh="ecdsa-sha2-nistp521 AAAA\n",
)
# What every fresh job gets first, whatever its workers and gang.
CREATE_SHARED_OBJECTS = [
    "create services test",
    "create configmaps test-config",
    "create secrets test-ssh",
]


def queue(name: str = "default", state: str = "Open") -> dict[str, Any]:
    return {"kind": "Queue", "metadata": {"name": name}, "status": {"state": state}}


def cluster_view(*objects: dict[str, Any]) -> MemoryView:
    """A cache view of a cluster with Volcano's Open default queue, plus ``objects``."""
    return MemoryView(queue(), *objects)


def context(gang: str = "", now: str = NOW, nudge: bool = False) -> SyncContext:
    return SyncContext(
        facts=ClusterFacts(),
        gang=select_gang_scheduler(gang),
        now=now,
        new_key_pair=lambda: KEY,
        nudge=nudge,
    )


def writes(plan: Plan) -> list[str]:
    return [f"{a.verb} {a.resource} {a.name}" for a in plan.actions]


def worker_writes(verb: str, count: int) -> list[str]:
    return [f"{verb} pods test-worker-{i}" for i in range(count)]


def reasons(plan: Plan) -> list[str]:
    return [event.reason for event in plan.events]


def status_of(plan: Plan) -> dict[str, Any]:
    [status_write] = [a for a in plan.actions if a.resource == "mpijobs/status"]
    assert status_write.body is not None
    return dict(status_write.body["status"])


def conditions(status: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in status.get("conditions", [])]


def converge(
    obj: dict[str, Any], view: MemoryView, ctx: SyncContext, rounds: int = 3
) -> dict[str, Any]:
    """Sync until nothing is left to write, applying each plan; returns the job object."""
    obj = copy.deepcopy(obj)
    for _ in range(rounds):
        plan = plan_sync(obj, view, ctx)
        if not plan.actions:
            return obj
        assert writes(plan).count(f"update_status mpijobs/status {obj['metadata']['name']}") <= 1
        view.apply(plan.actions)
        for action in plan.actions:
            if action.resource == "mpijobs/status" and action.body:
                obj["status"] = action.body["status"]
    raise AssertionError(f"no convergence: {writes(plan)}")


def test_a_deleted_job_needs_nothing() -> None:
    plan = plan_sync(None, cluster_view(), context())
    assert plan.actions == [] and plan.events == [] and plan.error is None


def test_an_invalid_job_gets_a_validation_event_and_no_writes() -> None:
    obj = MPIJobWrapper().replicas("Launcher", 2).obj()
    plan = plan_sync(obj, cluster_view(), context())
    assert plan.actions == []
    assert reasons(plan) == ["ValidationError"]
    assert plan.events[0].message == (
        "Found validation errors: spec.mpiReplicaSpecs[Launcher].replicas: must be 1"
    )


def test_a_job_managed_by_multikueue_is_left_alone() -> None:
    obj = MPIJobWrapper().workers(2).run_policy(managedBy="kueue.x-k8s.io/multikueue").obj()
    plan = plan_sync(obj, cluster_view(), context())
    assert plan.actions == [] and plan.events == []


@pytest.mark.parametrize("implementation", ["OpenMPI", "Intel", "MPICH"])
def test_all_resources_are_created_in_order(implementation: str) -> None:
    obj = MPIJobWrapper().workers(5).implementation(implementation).obj()
    plan = plan_sync(obj, cluster_view(), context())
    assert writes(plan) == [
        *CREATE_SHARED_OBJECTS,
        *worker_writes("create", 5),
        "create jobs test-launcher",
        "update_status mpijobs/status test",
    ]
    status = status_of(plan)
    assert conditions(status) == [("Created", "True", "MPIJobCreated")]
    assert status["replicaStatuses"] == {"Launcher": {}, "Worker": {}}
    assert status["startTime"] == NOW
    assert reasons(plan) == ["MPIJobCreated"]
    assert plan.created


@pytest.mark.parametrize("gang", ["volcano", "scheduler-plugins-scheduler", NATIVE])
def test_pod_group_is_created_before_any_worker(gang: str) -> None:
    plan = plan_sync(MPIJobWrapper().workers(2).obj(), cluster_view(), context(gang))
    assert writes(plan)[3:6] == ["create podgroups test", *worker_writes("create", 2)]


def test_a_synced_job_converges_to_no_writes() -> None:
    obj = MPIJobWrapper().workers(3).obj()
    view = cluster_view()
    converged = converge(obj, view, context("volcano"))
    assert plan_sync(converged, view, context("volcano", now=LATER)).actions == []


def cached(view: MemoryView, resource: str, name: str) -> dict[str, Any]:
    found = view.get(resource, "ns", name)
    assert found is not None, f"{resource} {name} is not cached"
    return found


def test_a_service_selecting_other_pods_is_given_the_jobs_selector_back() -> None:
    view = cluster_view()
    obj = converge(MPIJobWrapper().workers(2).obj(), view, context())
    service = cached(view, "services", "test")
    desired_selector = service["spec"]["selector"]
    service["spec"]["selector"] = {"app": "someone-else"}
    plan = plan_sync(obj, view, context(now=LATER))
    assert writes(plan) == ["update services test"]
    assert plan.actions[0].body is not None
    assert plan.actions[0].body["spec"]["selector"] == desired_selector


def test_a_secret_without_the_key_pair_gets_a_new_one() -> None:
    view = cluster_view()
    obj = converge(MPIJobWrapper().workers(2).obj(), view, context())
    cached(view, "secrets", "test-ssh")["data"] = {"ssh-publickey": "AAAA"}
    plan = plan_sync(obj, view, context(now=LATER))
    assert writes(plan) == ["update secrets test-ssh"]
    assert plan.actions[0].body is not None
    assert set(plan.actions[0].body["data"]) == {"ssh-privatekey", "ssh-publickey"}


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("Job", "test-launcher"),
        ("Service", "test"),
        ("ConfigMap", "test-config"),
        ("Secret", "test-ssh"),
        ("Pod", "test-worker-0"),
        ("PodGroup", "test"),
    ],
)
def test_an_object_we_do_not_own_is_never_touched(kind: str, name: str) -> None:
    obj = MPIJobWrapper().workers(2).obj()
    squatter = {"kind": kind, "metadata": {"name": name, "namespace": "ns"}}
    plan = plan_sync(obj, MemoryView(squatter), context("volcano"))
    assert plan.error == (
        f'Resource "{name}" of Kind "{kind}" already exists and is not managed by MPIJob'
    )
    assert "ErrResourceExists" in reasons(plan)
    resource = {"PodGroup": "podgroups", "Pod": "pods"}.get(kind, kind.lower() + "s")
    assert not any(a.resource == resource and a.name == name for a in plan.actions)
    assert not any(a.resource == "mpijobs/status" for a in plan.actions)
    if kind in ("PodGroup", "Service"):
        assert not any(a.resource == "pods" for a in plan.actions)


def test_suspended_job_gets_a_suspended_launcher_and_no_workers() -> None:
    obj = MPIJobWrapper().workers(2).suspend().obj()
    plan = plan_sync(obj, cluster_view(), context("volcano"))
    assert writes(plan) == [
        *CREATE_SHARED_OBJECTS,
        "create jobs test-launcher",
        "update_status mpijobs/status test",
    ]
    launcher = plan.actions[3].body
    assert launcher is not None and launcher["spec"]["suspend"] is True
    status = status_of(plan)
    # Upstream's order but the job's state last, where the State column reads it.
    assert conditions(status) == [
        ("Created", "True", "MPIJobCreated"),
        ("Running", "False", "MPIJobSuspended"),
        ("Suspended", "True", "MPIJobSuspended"),
    ]
    assert "startTime" not in status


def test_a_stored_order_with_the_state_not_last_is_rewritten_once() -> None:
    """Upstream's order for a suspended job ends with Running=False; the first sync moves the
    state after it, in one status write, and the next has nothing to write."""
    view = cluster_view()
    obj = converge(MPIJobWrapper().workers(2).suspend().obj(), view, context("volcano"))
    created, running, suspended = obj["status"]["conditions"]
    obj["status"]["conditions"] = [created, suspended, running]
    plan = plan_sync(obj, view, context("volcano", now=LATER))
    assert writes(plan) == ["update_status mpijobs/status test"]
    assert status_of(plan)["conditions"] == [created, running, suspended]
    assert plan.events == []
    obj["status"] = status_of(plan)
    assert plan_sync(obj, view, context("volcano", now=LATER)).actions == []


def test_suspending_a_running_job_deletes_workers_and_pod_group() -> None:
    obj = MPIJobWrapper().workers(2).obj()
    view = cluster_view()
    obj = converge(obj, view, context("volcano"))
    obj["spec"]["runPolicy"] = {"suspend": True}
    plan = plan_sync(obj, view, context("volcano", now=LATER))
    assert writes(plan) == [
        "update jobs test-launcher",
        *worker_writes("delete", 2),
        "delete podgroups test",
        "update_status mpijobs/status test",
    ]
    assert plan.actions[0].body is not None and plan.actions[0].body["spec"]["suspend"] is True


def test_resuming_recreates_pod_group_and_workers_and_clears_launcher_start_time() -> None:
    obj = MPIJobWrapper().workers(2).suspend().obj()
    view = cluster_view()
    obj = converge(obj, view, context("volcano"))
    launcher = view.get("jobs", "ns", "test-launcher")
    assert launcher is not None
    launcher["status"] = {"startTime": NOW}
    obj["spec"]["runPolicy"]["suspend"] = False
    obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"].setdefault("spec", {})[
        "nodeSelector"
    ] = {"pool": "gpu"}
    plan = plan_sync(obj, view, context("volcano", now=LATER))
    assert writes(plan) == [
        "create podgroups test",
        *worker_writes("create", 2),
        "update_status jobs/status test-launcher",
        "update jobs test-launcher",
        "update_status mpijobs/status test",
    ]
    resumed = plan.actions[4].body
    assert resumed is not None
    assert resumed["spec"]["suspend"] is False
    assert resumed["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert "startTime" not in resumed.get("status", {})
    status = status_of(plan)
    assert ("Suspended", "False", "MPIJobResumed") in conditions(status)
    assert status["startTime"] == LATER


def test_wait_for_workers_ready_creates_the_launcher_only_after_every_worker_is_ready() -> None:
    obj = MPIJobWrapper().workers(2).launcher_creation_policy("WaitForWorkersReady").obj()
    view = cluster_view()
    plan = plan_sync(obj, view, context())
    assert "create jobs test-launcher" not in writes(plan)
    view.apply(plan.actions)
    for i in range(2):
        pod = view.get("pods", "ns", f"test-worker-{i}")
        assert pod is not None
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
    assert "create jobs test-launcher" not in writes(plan_sync(obj, view, context()))
    for i in range(2):
        pod = view.get("pods", "ns", f"test-worker-{i}")
        assert pod is not None
        pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert "create jobs test-launcher" in writes(plan_sync(obj, view, context()))


def test_wait_for_workers_ready_does_not_start_a_suspended_launcher() -> None:
    obj = MPIJobWrapper().workers(2).launcher_creation_policy("WaitForWorkersReady").suspend().obj()
    plan = plan_sync(obj, cluster_view(), context())
    assert "create jobs test-launcher" not in writes(plan)


def test_scaling_down_deletes_the_surplus_workers_by_name() -> None:
    obj = MPIJobWrapper().workers(3).run_launcher_as_worker().obj()
    view = cluster_view()
    obj = converge(obj, view, context())
    obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 1
    plan = plan_sync(obj, view, context(now=LATER))
    assert [w for w in writes(plan) if w.startswith("delete")] == [
        "delete pods test-worker-1",
        "delete pods test-worker-2",
    ]
    assert "update configmaps test-config" in writes(plan)


def finished(obj: dict[str, Any], policy: str) -> dict[str, Any]:
    obj["spec"].setdefault("runPolicy", {})["cleanPodPolicy"] = policy
    obj["status"] = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "MPIJobCreated"},
            {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded"},
        ],
        "completionTime": NOW,
        "replicaStatuses": {"Worker": {"active": 2}},
    }
    return obj


@pytest.mark.parametrize(
    ("policy", "deleted"),
    [
        ("All", ["test-worker-0", "test-worker-1", "test-worker-2"]),
        ("Running", ["test-worker-0", "test-worker-2"]),
        ("None", []),
    ],
)
def test_finished_job_cleans_up_workers_per_policy(policy: str, deleted: list[str]) -> None:
    job = MPIJobWrapper().workers(3).obj()
    view = cluster_view()
    converge(job, view, context("scheduler-plugins-scheduler"))
    phases = ["Running", "Succeeded", "Pending"]
    for i, phase in enumerate(phases):
        pod = view.get("pods", "ns", f"test-worker-{i}")
        assert pod is not None
        pod["status"] = {"phase": phase}
    launcher_completed(view)
    plan = plan_sync(finished(job, policy), view, context("scheduler-plugins-scheduler"))
    assert [a.name for a in plan.actions if a.resource == "pods"] == deleted
    assert ("delete podgroups test" in writes(plan)) is (policy != "None")
    if policy != "None":
        assert status_of(plan)["replicaStatuses"]["Worker"] == {}
    else:
        assert plan.actions == []


def test_a_finished_launcher_of_a_finished_job_is_left_as_it_is() -> None:
    job = finished(MPIJobWrapper().workers(1).obj(), "None")
    launcher = {
        "kind": "Job",
        "metadata": {"name": "test-launcher", "namespace": "ns"},
        "spec": {},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }
    assert plan_sync(job, cluster_view(launcher), context()).actions == []


def test_finished_job_writes_status_once_not_every_sync() -> None:
    job = finished(MPIJobWrapper().workers(1).obj(), "All")
    view = cluster_view()
    plan = plan_sync(job, view, context())
    job["status"] = status_of(plan)
    assert plan_sync(job, view, context(now=LATER)).actions == []


def test_gang_policy_change_updates_the_pod_group_in_place() -> None:
    obj = MPIJobWrapper().workers(2).obj()
    view = cluster_view()
    obj = converge(obj, view, context("volcano"))
    obj["spec"].setdefault("runPolicy", {})["schedulingPolicy"] = {"minAvailable": 2, "queue": "q"}
    plan = plan_sync(obj, view, context("volcano", now=LATER))
    assert writes(plan)[0] == "update podgroups test"
    body = plan.actions[0].body
    assert body is not None and body["spec"]["minMember"] == 2 and body["spec"]["queue"] == "q"


@pytest.mark.parametrize("gang", ["volcano", NATIVE])
def test_suspending_deletes_the_pod_group_and_resuming_creates_it_again(gang: str) -> None:
    view = cluster_view()
    obj = converge(MPIJobWrapper().workers(2).obj(), view, context(gang))
    obj["spec"]["runPolicy"] = {"suspend": True}
    obj = converge(obj, view, context(gang, now=LATER))
    assert [k for k in view.objects if k[0] in ("podgroups", "pods")] == []
    obj["spec"]["runPolicy"] = {"suspend": False}
    plan = plan_sync(obj, view, context(gang, now=LATER))
    assert writes(plan)[:3] == ["create podgroups test", *worker_writes("create", 2)]


def test_a_native_gang_change_updates_its_min_count_in_place() -> None:
    view = cluster_view()
    obj = converge(MPIJobWrapper().workers(2).obj(), view, context(NATIVE))
    obj["spec"].setdefault("runPolicy", {})["schedulingPolicy"] = {"minAvailable": 2}
    plan = plan_sync(obj, view, context(NATIVE, now=LATER))
    assert writes(plan)[0] == "update podgroups test"
    body = plan.actions[0].body
    assert body is not None and body["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}


def pod_group_with_status(view: MemoryView, status: dict[str, Any]) -> None:
    [key] = [k for k in view.objects if k[0] == "podgroups"]
    view.objects[key] = {**view.objects[key], "status": status}


def gang_condition(plan: Plan) -> tuple[str, str] | None:
    for cond in status_of(plan).get("conditions", []):
        if cond["type"] == "GangScheduled":
            return cond["status"], cond["reason"]
    return None


@pytest.mark.parametrize(
    ("gang", "status", "expected", "event_type"),
    [
        ("volcano", {"phase": "Pending"}, ("False", "PodGroupPending"), "Normal"),
        (
            "volcano",
            {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "Unschedulable",
                        "status": "True",
                        "message": "3/3 tasks unschedulable",
                    }
                ],
            },
            ("False", "Unschedulable"),
            "Warning",
        ),
        ("volcano", {"phase": "Running"}, ("True", "PodGroupRunning"), "Normal"),
        (
            "scheduler-plugins-scheduler",
            {"phase": "Scheduling"},
            ("False", "PodGroupScheduling"),
            "Normal",
        ),
        (
            "scheduler-plugins-scheduler",
            {"phase": "Running"},
            ("True", "PodGroupRunning"),
            "Normal",
        ),
    ],
    ids=[
        "volcano pending",
        "volcano unschedulable",
        "volcano placed",
        "cosched waiting",
        "cosched placed",
    ],
)
def test_the_schedulers_verdict_on_the_pod_group_becomes_the_gang_scheduled_condition(
    gang: str, status: dict[str, Any], expected: tuple[str, str], event_type: str
) -> None:
    view = cluster_view()
    obj = converge(MPIJobWrapper().workers(2).obj(), view, context(gang))
    pod_group_with_status(view, status)
    plan = plan_sync(obj, view, context(gang, now=LATER))
    assert writes(plan) == ["update_status mpijobs/status test"]
    assert gang_condition(plan) == expected
    assert status_of(plan)["conditions"][-1]["type"] == "Created"
    [event] = [e for e in plan.events if e.reason == expected[1]]
    assert event.type == event_type
    # Reported once: the same verdict again writes nothing.
    obj["status"] = status_of(plan)
    assert plan_sync(obj, view, context(gang, now=LATER)).actions == []


COSCHEDULING = "scheduler-plugins-scheduler"


@pytest.mark.parametrize(
    ("gang", "status", "nudge", "expected"),
    [
        (COSCHEDULING, {"phase": "Scheduling"}, True, ["patch podgroups test"]),
        (COSCHEDULING, {"phase": "Pending"}, True, ["patch podgroups test"]),
        (COSCHEDULING, {"phase": "Scheduling"}, False, []),
        (COSCHEDULING, {"phase": "Running"}, True, []),
        (COSCHEDULING, {}, True, []),
        ("volcano", {"phase": "Pending"}, True, []),
    ],
    ids=[
        "cosched waiting",
        "cosched too few pods",
        "cosched not asked",
        "cosched placed",
        "cosched not observed",
        "volcano needs none",
    ],
)
def test_a_nudge_stamps_only_a_waiting_gang_whose_scheduler_needs_it(
    gang: str, status: dict[str, Any], nudge: bool, expected: list[str]
) -> None:
    view = cluster_view()
    obj = converge(MPIJobWrapper().workers(2).obj(), view, context(gang))
    pod_group_with_status(view, status)
    obj["status"] = status_of(plan_sync(obj, view, context(gang))) if status else obj["status"]
    plan = plan_sync(obj, view, context(gang, now=LATER, nudge=nudge))
    assert writes(plan) == expected
    assert plan.nudged is bool(expected)
    if expected:
        assert plan.actions[0].body == {
            "metadata": {"annotations": {"training.kubeflow.org/capacity-changed-at": LATER}}
        }


def test_a_nudged_gang_whose_pod_group_needs_an_update_gets_the_update_alone() -> None:
    view = cluster_view()
    obj = converge(MPIJobWrapper().workers(2).obj(), view, context(COSCHEDULING))
    pod_group_with_status(view, {"phase": "Scheduling"})
    obj["status"] = status_of(plan_sync(obj, view, context(COSCHEDULING)))
    obj["spec"].setdefault("runPolicy", {})["schedulingPolicy"] = {"minAvailable": 2}
    plan = plan_sync(obj, view, context(COSCHEDULING, now=LATER, nudge=True))
    assert writes(plan) == ["update podgroups test"]
    assert not plan.nudged


def test_a_pod_group_the_scheduler_has_not_seen_yet_sets_no_gang_condition() -> None:
    view = cluster_view()
    obj = converge(MPIJobWrapper().workers(2).obj(), view, context("volcano"))
    assert all(c["type"] != "GangScheduled" for c in obj["status"]["conditions"])


def pods_running(view: MemoryView, workers: int) -> None:
    """The job's workers and its launcher's pod run, as their kubelets report."""
    launcher = view.get("jobs", "ns", "test-launcher")
    assert launcher is not None
    launcher["metadata"]["uid"] = "launcher-uid"
    for i in range(workers):
        pod = view.get("pods", "ns", f"test-worker-{i}")
        assert pod is not None
        pod["status"] = {"phase": "Running"}
    view.add(
        {
            "kind": "Pod",
            "metadata": {
                "name": "test-launcher-abcde",
                "namespace": "ns",
                "ownerReferences": [{"uid": "launcher-uid", "controller": True}],
            },
            "status": {"phase": "Running"},
        }
    )


def observed_waiting(gang: str, view: MemoryView) -> dict[str, Any]:
    """A running job whose GangScheduled condition says the gang waits."""
    obj = converge(MPIJobWrapper().workers(2).obj(), view, context(gang))
    pods_running(view, workers=2)
    pod_group_with_status(view, {"phase": "Pending"})
    obj["status"] = status_of(plan_sync(obj, view, context(gang)))
    assert ("GangScheduled", "False", "PodGroupPending") in conditions(obj["status"])
    return obj


def launcher_completed(view: MemoryView) -> None:
    launcher = view.get("jobs", "ns", "test-launcher")
    assert launcher is not None
    launcher["status"] = {
        "conditions": [{"type": "Complete", "status": "True"}],
        "completionTime": LATER,
        "succeeded": 1,
    }


GANGS = ["volcano", "scheduler-plugins-scheduler"]


@pytest.mark.parametrize("gang", GANGS)
def test_a_gang_reported_placed_only_as_its_launcher_finishes_reads_scheduled(gang: str) -> None:
    view = cluster_view()
    obj = observed_waiting(gang, view)
    launcher_completed(view)
    pod_group_with_status(view, {"phase": "Running"})
    plan = plan_sync(obj, view, context(gang, now=LATER))
    assert ("Succeeded", "True", "MPIJobSucceeded") in conditions(status_of(plan))
    assert gang_condition(plan) == ("True", "PodGroupRunning")
    # The next sync cleans the finished job up: this status write's event must start it.
    assert plan.continued


@pytest.mark.parametrize("gang", GANGS)
def test_a_gang_reported_placed_after_its_job_finished_reads_scheduled(gang: str) -> None:
    view = cluster_view()
    obj = observed_waiting(gang, view)
    launcher_completed(view)
    obj["status"] = status_of(plan_sync(obj, view, context(gang, now=LATER)))
    assert ("Succeeded", "True", "MPIJobSucceeded") in conditions(obj["status"])
    cleanup = plan_sync(obj, view, context(gang, now=LATER))
    assert cleanup.actions == [] and not cleanup.continued

    pod_group_with_status(view, {"phase": "Running"})
    plan = plan_sync(obj, view, context(gang, now=LATER))
    assert writes(plan) == ["update_status mpijobs/status test"]
    assert gang_condition(plan) == ("True", "PodGroupRunning")
    assert reasons(plan) == ["PodGroupRunning"]


@pytest.mark.parametrize("gang", GANGS)
def test_a_finished_job_whose_gang_ran_is_never_reported_waiting_again(gang: str) -> None:
    view = cluster_view()
    obj = converge(MPIJobWrapper().workers(2).obj(), view, context(gang))
    pods_running(view, workers=2)
    pod_group_with_status(view, {"phase": "Running"})
    obj = converge(obj, view, context(gang))
    launcher_completed(view)
    obj["status"] = status_of(plan_sync(obj, view, context(gang)))
    assert ("GangScheduled", "True", "PodGroupRunning") in conditions(obj["status"])
    # Its pods gone, the scheduler counts too few of them again.
    pod_group_with_status(view, {"phase": "Pending"})
    assert plan_sync(obj, view, context(gang, now=LATER)).actions == []


@pytest.mark.parametrize(
    ("queues", "reason", "message"),
    [
        ([], "QueueNotFound", 'Volcano queue "q" does not exist'),
        ([queue("q", "Closed")], "QueueNotOpen", 'Volcano queue "q" is Closed'),
    ],
    ids=["missing", "closed"],
)
def test_a_volcano_queue_that_cannot_admit_the_gang_is_named_in_the_condition(
    queues: list[dict[str, Any]], reason: str, message: str
) -> None:
    view = cluster_view(*queues)
    job = MPIJobWrapper().workers(2).scheduling_policy(queue="q").obj()
    obj = converge(job, view, context("volcano"))
    [cond] = [c for c in obj["status"]["conditions"] if c["type"] == "GangScheduled"]
    assert (cond["status"], cond["reason"]) == ("False", reason)
    assert cond["message"].startswith(message)
    # Once the queue is there and Open, the PodGroup's own status speaks again.
    view.add(queue("q"))
    pod_group_with_status(view, {"phase": "Pending"})
    plan = plan_sync(obj, view, context("volcano", now=LATER))
    assert gang_condition(plan) == ("False", "PodGroupPending")


def test_a_placed_gang_is_not_reported_blocked_when_its_queue_closes_later() -> None:
    view = cluster_view(queue("q", "Closed"))
    job = MPIJobWrapper().workers(2).scheduling_policy(queue="q").obj()
    obj = converge(job, view, context("volcano"))
    pod_group_with_status(view, {"phase": "Running"})
    plan = plan_sync(obj, view, context("volcano", now=LATER))
    assert gang_condition(plan) == ("True", "PodGroupRunning")


def test_independent_writes_of_a_fresh_job_are_marked_to_go_out_together() -> None:
    obj = MPIJobWrapper().workers(3).obj()
    plan = plan_sync(obj, cluster_view(), context("volcano"))
    assert [(a.resource, a.batch) for a in plan.actions] == [
        ("services", "shared objects"),
        ("configmaps", "shared objects"),
        ("secrets", "shared objects"),
        ("podgroups", ""),
        ("pods", "worker pods"),
        ("pods", "worker pods"),
        ("pods", "worker pods"),
        ("jobs", ""),
        ("mpijobs/status", ""),
    ]


def test_a_job_from_submission_to_running_costs_two_syncs_of_writes() -> None:
    """The common path, sync by sync: every write and event a running job costs."""
    obj = MPIJobWrapper().workers(2).obj()
    view = cluster_view()
    first = plan_sync(obj, view, context())
    assert writes(first) == [
        *CREATE_SHARED_OBJECTS,
        *worker_writes("create", 2),
        "create jobs test-launcher",
        "update_status mpijobs/status test",
    ]
    assert reasons(first) == ["MPIJobCreated"]
    view.apply(first.actions)
    obj["status"] = status_of(first)
    # The workers and the launcher's pod start (one sync sees them all).
    pods_running(view, workers=2)
    second = plan_sync(obj, view, context(now=LATER))
    # discover_hosts.sh now lists the running workers; the status says Running.
    assert writes(second) == ["update configmaps test-config", "update_status mpijobs/status test"]
    assert reasons(second) == ["MPIJobRunning"]
    obj["status"] = status_of(second)
    assert obj["status"]["replicaStatuses"] == {"Launcher": {"active": 1}, "Worker": {"active": 2}}
    view.apply(second.actions)
    third = plan_sync(obj, view, context(now=LATER))
    assert third.actions == [] and third.events == []


def workers_running_before_the_launcher(obj: dict[str, Any], view: MemoryView) -> None:
    first = plan_sync(obj, view, context())
    view.apply(first.actions)
    obj["status"] = status_of(first)
    started = [{"name": "worker", "state": {"running": {"startedAt": "2026-01-01T00:00:10Z"}}}]
    for i in range(2):
        pod = view.get("pods", "ns", f"test-worker-{i}")
        assert pod is not None
        pod["status"] = {"phase": "Running", "containerStatuses": started}


def test_workers_running_before_their_launcher_share_its_status_write() -> None:
    obj = MPIJobWrapper().workers(2).obj()
    view = cluster_view()
    workers_running_before_the_launcher(obj, view)
    waiting = plan_sync(obj, view, context(now="2026-01-01T00:00:20Z"))
    # The hosts the launcher reads are current; the count waits for the launcher.
    assert writes(waiting) == ["update configmaps test-config"]
    assert waiting.requeue_after == 20.0
    view.apply(waiting.actions)
    pods_running(view, workers=2)
    running = plan_sync(obj, view, context(now="2026-01-01T00:00:30Z"))
    assert writes(running) == ["update_status mpijobs/status test"]
    assert status_of(running)["replicaStatuses"] == {
        "Launcher": {"active": 1},
        "Worker": {"active": 2},
    }
    assert reasons(running) == ["MPIJobRunning"] and running.requeue_after is None


def test_a_held_worker_count_is_written_when_the_launcher_is_late() -> None:
    obj = MPIJobWrapper().workers(2).obj()
    view = cluster_view()
    workers_running_before_the_launcher(obj, view)
    late = plan_sync(obj, view, context(now="2026-01-01T00:00:40Z"))
    assert writes(late) == ["update configmaps test-config", "update_status mpijobs/status test"]
    assert status_of(late)["replicaStatuses"] == {"Launcher": {}, "Worker": {"active": 2}}
    assert late.requeue_after is None


@pytest.mark.parametrize("transport", ["SSH", "KubectlExec"])
@pytest.mark.parametrize("suspended", [False, True], ids=["running", "suspended"])
@pytest.mark.parametrize(
    "gang", ["", "volcano", "scheduler-plugins-scheduler", "koord-scheduler", NATIVE], ids=str
)
def test_a_first_sync_creates_what_render_lists_in_the_same_order(
    gang: str, suspended: bool, transport: str
) -> None:
    wrapper = MPIJobWrapper().workers(3).suspend(suspended)
    if transport == "KubectlExec":
        wrapper = wrapper.v1()
    ctx = context(gang)
    plan = plan_sync(wrapper.obj(), cluster_view(), ctx)
    created = [(a.resource, a.name, a.body) for a in plan.actions if a.verb == "create"]
    plurals = {"Service": "services", "ConfigMap": "configmaps", "Secret": "secrets"}
    plurals |= {"Pod": "pods", "Job": "jobs", "ServiceAccount": "serviceaccounts"}
    plurals |= {"Role": "roles", "RoleBinding": "rolebindings"}
    plurals |= {r.kind: r.plural for r in gang_resources_of(ctx.gang)}
    job = wrapper.defaulted()
    rendered = [
        (plurals[o["kind"]], o["metadata"]["name"], o)
        for o in desired_objects(job, ctx.facts, ctx.gang, KEY)
    ]
    assert created == rendered
