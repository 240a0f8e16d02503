"""Gang scheduling end to end: the operator's PodGroups under the real Volcano and
scheduler-plugins (Coscheduling) schedulers, with simulated nodes.

One operator per flavour serves the module (pytest finishes every test of one flavour before
it starts the next, so only one operator ever acts on a cluster). The tests size their gangs
against the local cluster's two 8-cpu nodes and wait until no other pod holds any of it.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from mpi_operator.quantity import Quantity
from mpi_operator.sdk import GangState, gang_state

from .clusters import COSCHEDULING, SIM, VOLCANO, E2ECluster, wait_until
from .flyte import judged_until
from .operator import (
    CONDITION_GANG_SCHEDULED,
    GROUP,
    PLURAL,
    POD_GROUP_APIS,
    VERSION,
    OperatorProcess,
    condition,
    create_mpijob,
    event_reasons,
    finish_launcher,
    finish_pod,
    get_mpijob,
    get_pod_group,
    patch_mpijob,
    pods_of,
    retry_gang,
    settle,
    sim_job,
    simulated_operator,
    wait_for_condition,
)
from .rbac import delete_service_account_binding, service_account_kubeconfig

pytestmark = pytest.mark.e2e


NODE_CPU = 8
NODES = 2
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
QUEUE_API = ("scheduling.volcano.sh", "v1beta1", "queues")
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# What the operator stamps on a waiting coscheduling gang's PodGroup when capacity appears.
CAPACITY_ANNOTATION = "training.kubeflow.org/capacity-changed-at"


@dataclass
class Gang:
    """A cluster of one gang flavour and the operator that serves it."""

    cluster: E2ECluster
    operator: OperatorProcess

    @property
    def flavour(self) -> str:
        return self.cluster.flavour


@pytest.fixture(scope="module", params=[VOLCANO, COSCHEDULING])
def gang(
    request: pytest.FixtureRequest,
    local_cluster: Callable[[str], E2ECluster],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Gang]:
    cluster = local_cluster(request.param)
    with simulated_operator(cluster, tmp_path_factory) as process:
        yield Gang(cluster, process)


@pytest.fixture
def ns(gang: Gang, namespace_factory: Callable[[E2ECluster], str]) -> Iterator[str]:
    """A fresh namespace, once the previous tests' pods have left the nodes."""
    wait_until_idle(gang.cluster)
    name = namespace_factory(gang.cluster)
    yield name
    release_held_pods(gang.cluster, name)
    # The namespace controller waits 5 s before it deletes a namespace's content; deleting
    # the jobs has the garbage collector free the nodes for the next test at once.
    with contextlib.suppress(ApiException):
        gang.cluster.custom.delete_collection_namespaced_custom_object(
            GROUP, VERSION, name, PLURAL, propagation_policy="Background"
        )


def release_held_pods(cluster: E2ECluster, namespace: str) -> None:
    """Let held pods end before their namespace goes.

    A deleted namespace loses its pods before its Jobs, and kwok deletes a pod without
    ending it, so a held Job pod would keep the Job's tracking finalizer, and with it the
    namespace and its share of the nodes, forever.
    """
    for pod in cluster.core.list_namespaced_pod(namespace).items:
        annotations = pod.metadata.annotations or {}
        if annotations.get(SIM + "hold") == "true" and SIM + "exit-code" not in annotations:
            with contextlib.suppress(ApiException):
                finish_pod(cluster, namespace, pod.metadata.name)


# --- helpers --------------------------------------------------------------------------------


def busy_pods(cluster: E2ECluster) -> list[str]:
    """Pods outside the system namespaces that hold or may claim node capacity."""
    pods = cluster.core.list_pod_for_all_namespaces().items
    return [
        f"{p.metadata.namespace}/{p.metadata.name}"
        for p in pods
        if not p.metadata.namespace.startswith("kube-")
        and (p.status.phase or "Pending") not in ("Succeeded", "Failed")
    ]


def wait_until_idle(cluster: E2ECluster) -> None:
    """Capacity-sized tests need the default nodes to themselves, and exactly them."""
    nodes = [
        n
        for n in cluster.core.list_node().items
        if not n.spec.unschedulable and not n.metadata.deletion_timestamp
    ]
    cpu = sum(Quantity.parse(n.status.allocatable["cpu"]).value for n in nodes)
    if len(nodes) != NODES or cpu != NODES * NODE_CPU:
        pytest.skip(f"the gang tests size their gangs for {NODES} nodes of {NODE_CPU} cpu")
    wait_until(
        lambda: not busy_pods(cluster),
        120,
        message=lambda: f"earlier tests' pods to go: {busy_pods(cluster)}",
    )


def gang_condition(cluster: E2ECluster, namespace: str, name: str) -> GangState | None:
    return gang_state(cluster.jobs.get(name, namespace=namespace))


def gang_waits(cluster: E2ECluster, namespace: str, name: str, *reasons: str) -> GangState:
    """The gang's state once GangScheduled is False (with one of ``reasons``, if given)."""

    def waiting() -> GangState | None:
        state = gang_condition(cluster, namespace, name)
        if state is None or state.scheduled:
            return None
        return state if not reasons or state.reason in reasons else None

    return wait_until(
        waiting,
        90,
        message=lambda: f"{name} GangScheduled=False {reasons}: {describe(cluster, namespace)}",
    )


def turned_down_pod(pod: k8s.V1Pod) -> bool:
    """Whether the scheduler has looked at the pod and could not place it."""
    return any(
        c.type == "PodScheduled" and c.status == "False" for c in pod.status.conditions or []
    )


def describe(cluster: E2ECluster, namespace: str) -> str:
    """Pods, PodGroups and MPIJob conditions of a namespace, for failure messages."""
    lines = []
    for pod in cluster.core.list_namespaced_pod(namespace).items:
        scheduled = [
            f"{c.status}/{c.reason}: {c.message}"
            for c in pod.status.conditions or []
            if c.type == "PodScheduled"
        ]
        lines.append(
            f"pod {pod.metadata.name} {pod.status.phase} node={pod.spec.node_name} {scheduled}"
        )
    group, version = POD_GROUP_APIS[cluster.flavour]
    pod_groups = cluster.custom.list_namespaced_custom_object(
        group, version, namespace, "podgroups"
    )
    for pg in pod_groups["items"]:
        lines.append(f"podgroup {pg['metadata']['name']} {pg.get('spec')} {pg.get('status')}")
    jobs = cluster.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    for job in jobs["items"]:
        conditions = [
            (c["type"], c["status"], c.get("reason"))
            for c in (job.get("status") or {}).get("conditions") or []
        ]
        lines.append(f"mpijob {job['metadata']['name']} {conditions}")
    return "\n  " + "\n  ".join(lines)


T = TypeVar("T")


def retry_gang_until(
    cluster: E2ECluster,
    namespace: str,
    name: str,
    done: Callable[[], T | None],
    timeout: float = 90,
    every: float = 5,
) -> T:
    """Wait for ``done``, touching the waiting gang every ``every`` seconds meanwhile: one
    touch can be lost to the plugin's own PodGroup cache (see ``retry_gang``)."""
    last_touch = -every

    def attempt() -> T | None:
        nonlocal last_touch
        value = done()
        if value:
            return value
        if time.monotonic() - last_touch >= every:
            retry_gang(cluster, namespace, name)
            last_touch = time.monotonic()
        return None

    return wait_until(attempt, timeout, message=lambda: describe(cluster, namespace))


@dataclass
class Placements:
    """Samples how many pods of each gang are bound, to catch a gang placed only in part.

    Binding a whole gang takes a few API writes, so a sample may catch it half-way; a gang
    counts as half-placed only when it is still incomplete ``grace`` seconds later.
    """

    cluster: E2ECluster
    namespace: str
    expected: dict[str, int]
    grace: float = 5.0
    samples: list[tuple[float, str, int]] = field(default_factory=list)
    untracked: set[str] = field(default_factory=set)

    def sample(self) -> dict[str, tuple[int, int]]:
        """Job name -> (bound pods, pods) for every tracked job."""
        counts = {name: (0, 0) for name in self.expected if name not in self.untracked}
        now = time.monotonic()
        for pod in self.cluster.core.list_namespaced_pod(self.namespace).items:
            name = (pod.metadata.labels or {}).get(JOB_NAME_LABEL)
            if name not in counts:
                continue
            bound, total = counts[name]
            counts[name] = (bound + (1 if pod.spec.node_name else 0), total + 1)
        self.samples.extend((now, name, bound) for name, (bound, _) in counts.items())
        return counts

    def bound(self, name: str) -> int:
        return self.sample()[name][0]

    def placed(self, name: str) -> bool:
        """Whether every pod of the gang is bound."""
        bound, total = self.sample()[name]
        return total == self.expected[name] and bound == total

    def untrack(self, name: str) -> None:
        """Stop sampling a job, e.g. before it finishes and its pods go."""
        self.untracked.add(name)

    def assert_never_half_placed(self) -> None:
        for at, name, bound in self.samples:
            wanted = self.expected[name]
            if bound in (0, wanted):
                continue
            later = [b for t, n, b in self.samples if n == name and at < t <= at + self.grace]
            assert not later or wanted in later, (
                f"{name}: {bound} of {wanted} pods bound and still incomplete "
                f"{self.grace:.0f}s later: {later}"
            )


def new_node_name() -> str:
    return f"gang-extra-{uuid.uuid4().hex[:8]}"


def amount(value: object) -> object:
    return Quantity.parse(value).value


# --- every flavour ------------------------------------------------------------------------


def test_a_gang_too_big_for_the_cluster_waits_whole_and_starts_once_two_nodes_are_added(
    gang: Gang, ns: str, node_factory: Callable[..., str]
) -> None:
    c = gang.cluster
    # 4 x 4.5 cpu workers and a launcher: one worker per 8-cpu node, so four nodes; two exist.
    # The 18.1 cpu stay within Volcano's admission (1.2 x the 16 cpu): it tries the gang.
    create_mpijob(c, ns, sim_job("big", workers=4).workers(4, cpu="4500m").obj())
    placements = Placements(c, ns, {"big": 5})
    reason = {"volcano": "Unschedulable", "scheduler-plugins": "PodGroupScheduling"}[gang.flavour]

    def turned_down_whole() -> GangState | None:
        assert placements.bound("big") == 0, describe(c, ns)
        pods = pods_of(c, ns, "big")
        state = gang_condition(c, ns, "big")
        if len(pods) < 5 or not all(turned_down_pod(p) for p in pods):
            return None
        return state if state and not state.scheduled and state.reason == reason else None

    state = wait_until(turned_down_whole, 90, message=lambda: describe(c, ns))
    assert state.message, state
    wait_until(lambda: reason in event_reasons(c, ns, "big"), 30, message="the event")
    settle(2)
    pods = pods_of(c, ns, "big")
    assert [p.status.phase for p in pods] == ["Pending"] * 5
    assert [p.spec.node_name for p in pods] == [None] * 5
    running = condition(get_mpijob(c, ns, "big"), "Running")
    assert running is None or running["status"] == "False", running

    added = time.monotonic()
    for _ in range(2):
        node_factory(c, new_node_name(), cpu=str(NODE_CPU), memory="32Gi")
    ready = time.monotonic()
    # Nobody touches the PodGroup: Volcano looks at every gang each second, and the operator
    # nudges coscheduling, which looks again only when the PodGroup changes.
    wait_until(lambda: placements.placed("big"), 30, message=lambda: describe(c, ns))
    print(
        f"\n{gang.flavour}: gang bound {time.monotonic() - ready:.1f} s after the second node "
        f"was Ready ({time.monotonic() - added:.1f} s after the first was created)"
    )
    pod_group = get_pod_group(c, ns, "big")
    assert pod_group is not None
    stamped = CAPACITY_ANNOTATION in (pod_group["metadata"].get("annotations") or {})
    nudges = gang.operator.metric("mpi_operator_gang_capacity_nudges_total")
    if gang.flavour == "scheduler-plugins":
        assert stamped, pod_group["metadata"]
        assert nudges is not None and nudges >= 1
    else:
        assert not stamped, pod_group["metadata"]
        assert not nudges, "Volcano needs no nudge"
    wait_for_condition(c, ns, "big", "Succeeded", operator=gang.operator)
    done = wait_for_condition(c, ns, "big", CONDITION_GANG_SCHEDULED, operator=gang.operator)
    assert condition(done, CONDITION_GANG_SCHEDULED)["reason"] == "PodGroupRunning"  # type: ignore[index]
    placements.assert_never_half_placed()


def test_of_two_gangs_with_room_for_one_one_runs_whole_and_the_other_waits_whole(
    gang: Gang, ns: str
) -> None:
    c = gang.cluster
    names = ("first", "second")
    for name in names:
        # 2 x 7 cpu workers and a launcher: 14.1 of the 16 cpu, so only one gang fits.
        job = (
            sim_job(name, workers=2)
            .workers(2, cpu="7")
            .template_annotation("Launcher", SIM + "hold", "true")
            .clean_pod_policy("Running")
        )
        create_mpijob(c, ns, job.obj())
    placements = Placements(c, ns, dict.fromkeys(names, 3))

    def running_one() -> str | None:
        return next((name for name in names if placements.placed(name)), None)

    winner = wait_until(running_one, 90, message=lambda: describe(c, ns))
    loser = next(name for name in names if name != winner)
    gang_waits(c, ns, loser)
    wait_for_condition(c, ns, winner, CONDITION_GANG_SCHEDULED, operator=gang.operator)
    settle(2)
    assert placements.bound(loser) == 0, describe(c, ns)
    assert placements.placed(winner), describe(c, ns)

    placements.untrack(winner)
    finish_launcher(c, ns, winner)
    wait_for_condition(c, ns, winner, "Succeeded", operator=gang.operator)
    wait_until(
        lambda: not pods_of(c, ns, winner, "worker"), 60, message=f"{winner}'s workers to go"
    )
    # Coscheduling is not woken by the winner's pods going away; the operator nudges it.
    wait_until(lambda: placements.placed(loser), 90, message=lambda: describe(c, ns))
    wait_for_condition(c, ns, loser, CONDITION_GANG_SCHEDULED, operator=gang.operator)
    finish_launcher(c, ns, loser)
    wait_for_condition(c, ns, loser, "Succeeded", operator=gang.operator)
    placements.assert_never_half_placed()


def test_min_resources_larger_than_the_cluster_hold_the_gang_until_removed(
    gang: Gang, ns: str
) -> None:
    c = gang.cluster
    policy = {"minResources": {"cpu": "1000", "memory": "1000Gi"}}
    create_mpijob(c, ns, sim_job("reserved").scheduling_policy(**policy).obj())
    placements = Placements(c, ns, {"reserved": 3})

    def turned_down() -> bool:
        assert placements.bound("reserved") == 0, describe(c, ns)
        pods = pods_of(c, ns, "reserved")
        return len(pods) == 3 and all(turned_down_pod(p) for p in pods)

    wait_until(turned_down, 90, message=lambda: describe(c, ns))
    state = gang_waits(c, ns, "reserved")
    assert state.message, state
    before = get_pod_group(c, ns, "reserved")
    assert before is not None
    assert amount(before["spec"]["minResources"]["cpu"]) == 1000
    assert amount(before["spec"]["minResources"]["memory"]) == amount("1000Gi")
    settle(2)
    assert placements.bound("reserved") == 0, describe(c, ns)

    patch = {"spec": {"runPolicy": {"schedulingPolicy": {"minResources": None}}}}
    patch_mpijob(c, ns, "reserved", patch)

    def recomputed() -> dict[str, Any] | None:
        pg = get_pod_group(c, ns, "reserved")
        resources = (pg or {}).get("spec", {}).get("minResources") or {}
        # The launcher's and the two workers' 100m each.
        return pg if resources and amount(resources.get("cpu")) == amount("300m") else None

    after = wait_until(recomputed, 60, message=lambda: describe(c, ns))
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    # Coscheduling is woken by the update but reads the PodGroup through a cache of its own,
    # which may not have the new spec yet; it then turns the gang down on the old
    # minResources and waits for the next event.
    assert "memory" not in after["spec"]["minResources"]
    retry_gang_until(c, ns, "reserved", lambda: placements.bound("reserved") == 3)
    wait_for_condition(c, ns, "reserved", "Succeeded", operator=gang.operator)
    placements.assert_never_half_placed()


def test_min_available_below_the_pod_count_starts_the_gang_with_what_fits(
    gang: Gang, ns: str
) -> None:
    c = gang.cluster
    # Room for the launcher and two of the four 6-cpu workers: exactly minAvailable pods.
    job = (
        sim_job("elastic", workers=4)
        .workers(4, cpu="6")
        .scheduling_policy(minAvailable=3)
        .template_annotation("Launcher", SIM + "hold", "true")
    )
    create_mpijob(c, ns, job.obj())
    placements = Placements(c, ns, {"elastic": 5})

    def three_bound() -> bool:
        return placements.bound("elastic") == 3

    wait_until(three_bound, 90, message=lambda: describe(c, ns))
    scheduled = wait_for_condition(
        c, ns, "elastic", CONDITION_GANG_SCHEDULED, operator=gang.operator
    )
    assert condition(scheduled, CONDITION_GANG_SCHEDULED)["reason"] == "PodGroupRunning"  # type: ignore[index]
    pg = get_pod_group(c, ns, "elastic")
    assert pg is not None and pg["spec"]["minMember"] == 3
    settle(2)
    pods = pods_of(c, ns, "elastic")
    bound = sorted(
        p.metadata.labels["training.kubeflow.org/job-role"] for p in pods if p.spec.node_name
    )
    assert bound == ["launcher", "worker", "worker"], describe(c, ns)
    waiting = [p for p in pods if not p.spec.node_name]
    assert len(waiting) == 2 and all(p.status.phase == "Pending" for p in waiting)
    finish_launcher(c, ns, "elastic")
    wait_for_condition(c, ns, "elastic", "Succeeded", operator=gang.operator)


def test_the_pod_group_follows_the_job_through_update_suspend_resume_and_completion(
    gang: Gang, ns: str
) -> None:
    c = gang.cluster
    job = (
        sim_job("life")
        .template_annotation("Launcher", SIM + "hold", "true")
        .clean_pod_policy("Running")
    )
    create_mpijob(c, ns, job.obj())
    wait_for_condition(c, ns, "life", CONDITION_GANG_SCHEDULED, operator=gang.operator)
    first = get_pod_group(c, ns, "life")
    assert first is not None and first["spec"]["minMember"] == 3

    policy: dict[str, Any] = {"minAvailable": 2}
    if gang.flavour == "scheduler-plugins":
        policy["scheduleTimeoutSeconds"] = 30
    patch_mpijob(c, ns, "life", {"spec": {"runPolicy": {"schedulingPolicy": policy}}})

    def updated() -> dict[str, Any] | None:
        pg = get_pod_group(c, ns, "life")
        return pg if pg and pg["spec"].get("minMember") == 2 else None

    second = wait_until(updated, 60, message=lambda: describe(c, ns))
    assert second["metadata"]["uid"] == first["metadata"]["uid"]
    # minResources now counts the two pods the gang needs: the launcher and one worker.
    assert amount(second["spec"]["minResources"]["cpu"]) == amount("200m")
    if gang.flavour == "scheduler-plugins":
        assert second["spec"]["scheduleTimeoutSeconds"] == 30

    patch_mpijob(c, ns, "life", {"spec": {"runPolicy": {"suspend": True}}})
    wait_for_condition(c, ns, "life", "Suspended", operator=gang.operator)
    wait_until(
        lambda: get_pod_group(c, ns, "life") is None, 60, message="PodGroup deleted on suspend"
    )
    wait_until(lambda: not pods_of(c, ns, "life", "worker"), 60, message="workers deleted")

    patch_mpijob(c, ns, "life", {"spec": {"runPolicy": {"suspend": False}}})
    third = wait_until(
        lambda: get_pod_group(c, ns, "life"), 60, message="PodGroup re-created on resume"
    )
    assert third["metadata"]["uid"] != first["metadata"]["uid"]
    assert third["spec"]["minMember"] == 2

    def launcher_running() -> bool:
        pods = pods_of(c, ns, "life", "launcher")
        return any(p.status.phase == "Running" for p in pods)

    wait_until(launcher_running, 90, message=lambda: describe(c, ns))
    finish_launcher(c, ns, "life")
    wait_for_condition(c, ns, "life", "Succeeded", operator=gang.operator)
    wait_until(
        lambda: get_pod_group(c, ns, "life") is None, 60, message="PodGroup deleted at the end"
    )


def test_a_finished_job_keeps_its_pod_group_only_with_clean_pod_policy_none(
    gang: Gang, ns: str
) -> None:
    c = gang.cluster
    policies = {"all": "All", "running": "Running", "none": "None"}
    for name, policy in policies.items():
        create_mpijob(c, ns, sim_job(name).clean_pod_policy(policy).obj())
    for name in policies:
        wait_for_condition(c, ns, name, "Succeeded", operator=gang.operator)
    for name in ("all", "running"):
        wait_until(
            lambda name=name: get_pod_group(c, ns, name) is None,  # type: ignore[misc]
            60,
            message=f"PodGroup {name} deleted",
        )
    settle(1)
    assert get_pod_group(c, ns, "none") is not None


def test_a_gang_reported_placed_only_after_its_job_finished_reads_scheduled(
    gang: Gang, ns: str
) -> None:
    c = gang.cluster
    # The launcher ends as soon as it runs, often before the scheduler's status says Running.
    job = sim_job("brief").template_annotation("Launcher", SIM + "run-for", "1ms")
    create_mpijob(c, ns, job.obj())
    wait_for_condition(c, ns, "brief", "Succeeded", operator=gang.operator)
    done = wait_for_condition(c, ns, "brief", CONDITION_GANG_SCHEDULED, operator=gang.operator)
    assert condition(done, "Succeeded")["status"] == "True"  # type: ignore[index]


def test_wait_for_workers_ready_runs_a_gang_of_the_workers_to_completion(
    gang: Gang, ns: str
) -> None:
    c = gang.cluster
    job = sim_job("ordered", workers=2).launcher_creation_policy("WaitForWorkersReady")
    create_mpijob(c, ns, job.obj())
    pg = wait_until(lambda: get_pod_group(c, ns, "ordered"), 60, message="PodGroup")
    # The launcher is created once the workers run, so the gang is the workers alone.
    assert pg["spec"]["minMember"] == 2
    wait_for_condition(c, ns, "ordered", "Succeeded", operator=gang.operator)
    wait_for_condition(c, ns, "ordered", CONDITION_GANG_SCHEDULED, operator=gang.operator)
    launcher = pods_of(c, ns, "ordered", "launcher")
    assert launcher and launcher[0].spec.scheduler_name == c.scheduler_name


def test_a_failed_worker_is_replaced_into_its_running_gang(gang: Gang, ns: str) -> None:
    c = gang.cluster
    job = sim_job("rejoin").template_annotation("Launcher", SIM + "hold", "true")
    create_mpijob(c, ns, job.obj())
    wait_for_condition(c, ns, "rejoin", "Running", operator=gang.operator)
    first = c.core.read_namespaced_pod("rejoin-worker-1", ns)
    finish_pod(c, ns, "rejoin-worker-1", exit_code=1)

    def replacement() -> k8s.V1Pod | None:
        with contextlib.suppress(ApiException):
            pod = c.core.read_namespaced_pod("rejoin-worker-1", ns)
            if pod.metadata.uid != first.metadata.uid and pod.status.phase == "Running":
                return pod
        return None

    # The gang's scheduler places it: minMember still counts the whole gang, which the
    # replacement completes again.
    second = wait_until(replacement, 90, message="replacement worker running")
    assert second.spec.scheduler_name == c.scheduler_name
    assert second.metadata.labels == first.metadata.labels
    assert second.metadata.annotations == first.metadata.annotations
    wait_for_condition(c, ns, "rejoin", "Running", operator=gang.operator)
    finish_launcher(c, ns, "rejoin")
    done = wait_for_condition(c, ns, "rejoin", "Succeeded", operator=gang.operator)
    assert done["status"]["replicaStatuses"]["Worker"]["failed"] == 1


def test_a_v1_jobs_gang_waits_visibly_and_flyte_reads_every_status_it_passes_through(
    gang: Gang, ns: str, node_factory: Callable[..., str]
) -> None:
    """A kubeflow.org/v1 job (Flyte's) whose gang first cannot fit: GangScheduled=False says
    why while it waits, and goes once the gang is placed, so the newest True condition is
    always one Flyte knows; Flyte's own GetTaskPhase judges every version of the job."""
    c = gang.cluster
    # 4 x 4.5 cpu workers: one per 8-cpu node, so four nodes; two exist.
    job = sim_job("flyte", workers=4).workers(4, cpu="4500m").v1().obj()
    job["metadata"]["namespace"] = ns
    c.custom.create_namespaced_custom_object(GROUP, "v1", ns, PLURAL, job)

    def read() -> dict[str, Any]:
        found: dict[str, Any] = c.custom.get_namespaced_custom_object(
            GROUP, "v1", ns, PLURAL, "flyte"
        )
        return found

    state = gang_waits(c, ns, "flyte")
    assert state.reason and state.message, state
    waiting = judged_until(read, lambda p: True, timeout=30)
    assert waiting[-1].phase == "Queued", waiting
    for _ in range(2):
        node_factory(c, new_node_name(), cpu=str(NODE_CPU), memory="32Gi")
    judged = judged_until(read, lambda p: p.phase == "Success", timeout=180)
    assert {p.phase for p in judged} <= {"Queued", "Running", "Success"}, judged
    assert condition(read(), CONDITION_GANG_SCHEDULED) is None
    assert "PodGroupRunning" in event_reasons(c, ns, "flyte")


# --- Volcano --------------------------------------------------------------------------------


@pytest.fixture
def volcano_queue(gang: Gang) -> Iterator[Callable[..., str]]:
    """``volcano_queue(name=None)``: an open Volcano Queue, deleted after the test."""
    created: list[str] = []

    def make(name: str | None = None) -> str:
        name = name or f"gang-{uuid.uuid4().hex[:8]}"
        body = {
            "apiVersion": f"{QUEUE_API[0]}/{QUEUE_API[1]}",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1, "reclaimable": True},
        }
        gang.cluster.custom.create_cluster_custom_object(*QUEUE_API, body)
        created.append(name)

        def is_open() -> bool:
            return queue_status(gang.cluster, name).get("state") == "Open"

        # vc-controller-manager's queue controller opens it; Volcano skips queues that are not.
        wait_until(is_open, 30, message=f"Volcano queue {name} Open")
        return name

    yield make
    for name in created:
        with contextlib.suppress(ApiException):
            gang.cluster.custom.delete_cluster_custom_object(*QUEUE_API, name)


def queue_status(cluster: E2ECluster, name: str) -> dict[str, Any]:
    queue = cluster.custom.get_cluster_custom_object(*QUEUE_API, name)
    return dict(queue.get("status") or {})  # type: ignore[union-attr]


@pytest.fixture
def priority_class(gang: Gang) -> Iterator[str]:
    name = f"gang-high-{uuid.uuid4().hex[:8]}"
    body = k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name=name), value=1000)
    scheduling = k8s.SchedulingV1Api(gang.cluster.api)
    scheduling.create_priority_class(body)
    yield name
    with contextlib.suppress(ApiException):
        scheduling.delete_priority_class(name)


@pytest.mark.parametrize("gang", [VOLCANO], indirect=True)
def test_volcano_puts_the_gang_in_the_policy_queue_else_in_the_annotated_one(
    gang: Gang, ns: str, volcano_queue: Callable[..., str]
) -> None:
    c = gang.cluster
    policy_queue, annotated_queue = volcano_queue(), volcano_queue()
    both = sim_job("both").annotation(QUEUE_ANNOTATION, annotated_queue)
    create_mpijob(c, ns, both.scheduling_policy(queue=policy_queue).obj())
    create_mpijob(c, ns, sim_job("annotated").annotation(QUEUE_ANNOTATION, annotated_queue).obj())
    for name in ("both", "annotated"):
        wait_for_condition(c, ns, name, "Succeeded", operator=gang.operator)
    assert get_pod_group(c, ns, "both")["spec"]["queue"] == policy_queue  # type: ignore[index]
    assert get_pod_group(c, ns, "annotated")["spec"]["queue"] == annotated_queue  # type: ignore[index]

    # Volcano's own account: each queue holds the two workers that keep running.
    for queue in (policy_queue, annotated_queue):
        wait_until(
            lambda queue=queue: (
                amount(  # type: ignore[misc]
                    (queue_status(c, queue).get("allocated") or {}).get("pods", "0")
                )
                == 2
            ),
            30,
            message=lambda queue=queue: f"queue {queue} status: {queue_status(c, queue)}",  # type: ignore[misc]
        )


@pytest.mark.parametrize("gang", [VOLCANO], indirect=True)
def test_volcano_gets_the_policy_priority_class(gang: Gang, ns: str, priority_class: str) -> None:
    c = gang.cluster
    create_mpijob(c, ns, sim_job("urgent").scheduling_policy(priorityClass=priority_class).obj())
    wait_for_condition(c, ns, "urgent", "Succeeded", operator=gang.operator)
    pg = get_pod_group(c, ns, "urgent")
    assert pg is not None and pg["spec"]["priorityClassName"] == priority_class


@pytest.mark.parametrize("gang", [VOLCANO], indirect=True)
def test_a_gang_whose_volcano_queue_does_not_exist_says_so_until_it_is_created(
    gang: Gang, ns: str, volcano_queue: Callable[..., str]
) -> None:
    c = gang.cluster
    missing = f"gang-missing-{uuid.uuid4().hex[:8]}"
    create_mpijob(c, ns, sim_job("lost").scheduling_policy(queue=missing).obj())
    # Volcano leaves a gang of an unknown queue out of its snapshot: no PodGroup status, no
    # pod condition, no event. The operator reads the queue itself and says why.
    waiting = wait_for_condition(
        c, ns, "lost", CONDITION_GANG_SCHEDULED, status="False", operator=gang.operator
    )
    cond = condition(waiting, CONDITION_GANG_SCHEDULED)
    assert cond is not None and cond["reason"] == "QueueNotFound"
    assert f'Volcano queue "{missing}" does not exist' in cond["message"]
    # The event is sent after the status write that carries the condition.
    wait_until(lambda: "QueueNotFound" in event_reasons(c, ns, "lost"), 30, message="the event")
    pg = get_pod_group(c, ns, "lost")
    assert pg is not None and not pg.get("status"), pg
    pods = pods_of(c, ns, "lost")
    assert len(pods) == 3
    assert all(p.status.phase == "Pending" and not p.spec.node_name for p in pods)

    volcano_queue(missing)
    wait_for_condition(c, ns, "lost", "Succeeded", operator=gang.operator)
    wait_for_condition(c, ns, "lost", CONDITION_GANG_SCHEDULED, operator=gang.operator)


# --- scheduler-plugins ----------------------------------------------------------------------


def timeout_rejections(cluster: E2ECluster, namespace: str) -> int:
    """How often a pod's Permit wait expired (each ends one attempt at the whole gang)."""
    count = 0
    for event in cluster.core.list_namespaced_event(namespace).items:
        if event.reason == "FailedScheduling" and "rejected due to timeout" in (
            event.message or ""
        ):
            count += event.series.count if event.series else event.count or 1
    return count


@pytest.mark.parametrize("gang", [COSCHEDULING], indirect=True)
def test_coscheduling_retries_the_whole_gang_when_its_schedule_timeout_expires(
    gang: Gang, ns: str, node_factory: Callable[..., str]
) -> None:
    c = gang.cluster
    # 10 workers of 1.5 cpu fill the two nodes but for 0.5 cpu each, so the 0.9-cpu launcher
    # (or an 11th pod) never fits, while the 15.9 cpu of minResources pass the plugin's
    # cluster-wide check. One pod of 11 missing is within the plugin's 10% tolerance: the
    # placed pods wait in Permit for scheduleTimeoutSeconds instead of being turned down.
    job = (
        sim_job("patient", workers=10)
        .workers(10, cpu="1500m")
        .launcher(cpu="900m")
        .scheduling_policy(scheduleTimeoutSeconds=3)
    )
    create_mpijob(c, ns, job.obj())
    pg = wait_until(lambda: get_pod_group(c, ns, "patient"), 60, message="PodGroup")
    assert pg["spec"]["scheduleTimeoutSeconds"] == 3
    placements = Placements(c, ns, {"patient": 11})

    def timed_out_twice() -> bool:
        assert placements.bound("patient") == 0, describe(c, ns)
        return timeout_rejections(c, ns) >= 2

    # A gang turned down by its timeout waits in the scheduler's unschedulable pool until an
    # event requeues it; the touches stand in for the unrelated pod adds that do so on a busy
    # cluster, so the second attempt does not wait for the 5-minute flush.
    retry_gang_until(c, ns, "patient", timed_out_twice)
    pods = pods_of(c, ns, "patient")
    assert len(pods) == 11
    assert all(p.status.phase == "Pending" and not p.spec.node_name for p in pods)
    gang_waits(c, ns, "patient", "PodGroupScheduling")

    # The new node wakes the pod that did not fit, and the operator's nudge the rest.
    node_factory(c, new_node_name(), cpu=str(NODE_CPU), memory="32Gi")
    wait_until(lambda: placements.placed("patient"), 90, message=lambda: describe(c, ns))
    wait_for_condition(c, ns, "patient", "Succeeded", operator=gang.operator)
    placements.assert_never_half_placed()


@pytest.mark.parametrize("gang", [COSCHEDULING], indirect=True)
def test_an_operator_refused_nodes_says_so_once_and_serves_without_nudges(
    gang: Gang, ns: str, tmp_path: Path
) -> None:
    c = gang.cluster
    kubeconfig = service_account_kubeconfig(
        c.kubeconfig,
        ns,
        tmp_path,
        without=("nodes",),
        gang_scheduling=gang.operator.gang_scheduling,
    )
    try:
        wait_until(
            lambda: may_list_mpijobs(kubeconfig, ns), 10, message="the binding to take effect"
        )
        # Scoped to an empty namespace: the module's operator serves the jobs.
        operator = OperatorProcess(
            c,
            tmp_path,
            name="operator-without-nodes",
            kubeconfig=kubeconfig,
            lock_namespace=ns,
            extra_args=[f"--namespace={ns}"],
        ).start()
        try:
            settle(3)
            lines = operator.log_path.read_text().splitlines()
            refused = [line for line in lines if "cannot list and watch nodes" in line]
            assert len(refused) == 1, operator.log_tail()
            assert "not nudged" in refused[0]
            assert operator.get("/readyz", operator.health_port).rstrip().endswith("ok")
        finally:
            assert operator.stop() == 0, operator.log_tail()
    finally:
        delete_service_account_binding(c.kubeconfig, ns)


def may_list_mpijobs(kubeconfig: Path, namespace: str) -> bool:
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        k8s.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
        return True
    except ApiException as error:
        if error.status != 403:
            raise
        return False
    finally:
        api.close()  # type: ignore[no-untyped-call]
