"""Koordinator's koord-scheduler in the local cluster: plain pods that name a gang in the
annotations Koordinator reads (apis/extension/coscheduling.go) bind all together or not at
all, and what the scheduler shows of a gang that waits."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest

import hack.cluster as localcluster
from mpi_operator.api.constants import LABEL_JOB_ROLE
from mpi_operator.sdk import GangState
from mpi_operator.testing.wrappers import MPIJobWrapper

from .clusters import SIM, E2ECluster, sim_pod_spec, wait_until
from .operator import (
    CONDITION_GANG_SCHEDULED,
    OperatorProcess,
    condition,
    create_mpijob,
    finish_launcher,
    get_mpijob,
    operator_fixture,
    pods_of,
    settle,
    sim_job,
    wait_for_condition,
)
from .test_cluster_smoke import all_running, bound, describe_pods, pod_condition
from .test_gang import Placements, gang_condition, turned_down_pod

pytestmark = [pytest.mark.e2e, pytest.mark.koordinator]

GANG = "gang.scheduling.koordinator.sh/"
# How koord-scheduler turns down the members that waited for one that did not fit, in one form.
REJECTED_WHOLE = "all pending pods is already been attempted"


@pytest.fixture
def koord(
    local_cluster: Callable[[str], E2ECluster],
    namespace_factory: Callable[[E2ECluster], str],
) -> tuple[E2ECluster, str]:
    c = local_cluster("koordinator")
    return c, namespace_factory(c)


def gang_annotations(
    name: str, min_available: int, total: int, mode: str = "Strict", waiting: str = "30s"
) -> dict[str, str]:
    return {
        GANG + "name": name,
        GANG + "min-available": str(min_available),
        GANG + "total-number": str(total),
        GANG + "mode": mode,
        GANG + "waiting-time": waiting,
    }


def create_members(
    c: E2ECluster,
    ns: str,
    gang: dict[str, str],
    indices: range,
    cpu: str,
    node_label: dict[str, str],
) -> list[str]:
    names = []
    for i in indices:
        annotations, spec = sim_pod_spec(cpu=cpu, scheduler_name=c.scheduler_name)
        spec["nodeSelector"] = node_label
        name = f"{gang[GANG + 'name']}-{i}"
        c.create_pod(
            ns, {"metadata": {"name": name, "annotations": annotations | gang}, "spec": spec}
        )
        names.append(name)
    return names


def own_nodes(
    c: E2ECluster, node_factory: Callable[..., str], count: int, cpu: str = "4"
) -> tuple[str, dict[str, str]]:
    """``count`` nodes only this test's pods select (a label of its own), and that label."""
    tag = uuid.uuid4().hex[:8]
    label = {"e2e-koord": tag}
    for i in range(count):
        node_factory(c, f"koord-{tag}-{i}", cpu=cpu, memory="8Gi", labels=label)
    return tag, label


def scheduled_message(c: E2ECluster, ns: str, name: str) -> str | None:
    """The message of a pod's PodScheduled=False condition, if it has one."""
    cond = pod_condition(c.get_pod(ns, name), "PodScheduled")
    if cond is None or cond["status"] != "False":
        return None
    return str(cond.get("message") or "")


def gang_read_by_scheduler(c: E2ECluster, namespace: str, gang: str) -> str:
    """What koord-scheduler logged of a gang's parameters when it first saw one of its pods
    (``TryInitByPodConfig done, gangName: ..., waitTime: ...``), or ""."""
    log = localcluster.cluster_dir(c.name) / "logs" / "koord-scheduler.log"
    marker = f"TryInitByPodConfig done, gangName: {namespace}/{gang},"
    lines = log.read_text(errors="replace").splitlines()
    return next((line[line.index(marker) :] for line in lines if marker in line), "")


def test_gang_that_does_not_fit_binds_no_pod_until_a_node_is_added(
    koord: tuple[E2ECluster, str], node_factory: Callable[..., str]
) -> None:
    """3 pods of 3 cpu in a gang of 3 on two 4-cpu nodes: two would fit, none binds; the
    scheduler says so on the pods. A third node lets all of them bind, with no other nudge:
    Koordinator retries a rejected gang on a node being added."""
    c, ns = koord
    tag, label = own_nodes(c, node_factory, 2)
    gang = gang_annotations(f"big-{tag}", 3, 3)
    names = create_members(c, ns, gang, range(3), "3", label)

    def rejected() -> list[str] | None:
        messages = [scheduled_message(c, ns, n) for n in names]
        return [m for m in messages if m is not None] if all(messages) else None

    messages = wait_until(rejected, 60, message=lambda: describe_pods(c, ns))
    assert bound(c, ns, names) == []
    # Every annotation was read as meant (a bad waiting-time falls back to the default).
    assert gang_read_by_scheduler(c, ns, f"big-{tag}").endswith(
        "minRequiredNumber: 3, totalChildrenNum: 3, mode: Strict, waitTime: 30s, "
        f"groupSlice: [{ns}/big-{tag}]"
    ), gang_read_by_scheduler(c, ns, f"big-{tag}")
    # The members rejected with the one that did not fit say which gang and why.
    group = f'GangGroup "{ns}/big-{tag}" gets rejected due to member Pod'
    assert any(m.startswith(group) and "Insufficient cpu" in m for m in messages), messages

    node_factory(c, f"koord-{tag}-2", cpu="4", memory="8Gi", labels=label)
    wait_until(lambda: all_running(c, ns, names), 90, message=lambda: describe_pods(c, ns))
    nodes = {c.get_pod(ns, n)["spec"]["nodeName"] for n in names}
    assert len(nodes) == 3, f"3-cpu pods on 4-cpu nodes must spread: {nodes}"


def test_members_wait_unseen_until_min_available_of_them_exist(
    koord: tuple[E2ECluster, str], node_factory: Callable[..., str]
) -> None:
    """Until a gang has min-available pods the scheduler does not queue its members at all:
    no PodScheduled condition, no event. The last member lets all of them bind."""
    c, ns = koord
    tag, label = own_nodes(c, node_factory, 1)
    gang = gang_annotations(f"late-{tag}", 3, 3)
    early = create_members(c, ns, gang, range(2), "1", label)
    # A pod of the default scheduler created after them and seen bound shows that the
    # cluster has moved on meanwhile.
    annotations, spec = sim_pod_spec()
    spec["nodeSelector"] = label
    c.create_pod(ns, {"metadata": {"name": "witness", "annotations": annotations}, "spec": spec})
    wait_until(lambda: bound(c, ns, ["witness"]), 60, message=lambda: describe_pods(c, ns))
    for name in early:
        assert pod_condition(c.get_pod(ns, name), "PodScheduled") is None, describe_pods(c, ns)
        assert c.events_for(ns, name) == []

    names = early + create_members(c, ns, gang, range(2, 3), "1", label)
    wait_until(lambda: all_running(c, ns, names), 90, message=lambda: describe_pods(c, ns))


@pytest.mark.parametrize(
    ("min_available", "pods", "cpu", "binding"),
    [
        pytest.param(4, 4, "1", 4, id="gang-that-fits"),
        # 3-cpu pods on two 4-cpu nodes: two fit, which is min-available; the third waits.
        pytest.param(2, 3, "3", 2, id="min-available-below-the-pod-count"),
    ],
)
def test_gang_binds_the_members_that_fit_once_min_available_of_them_do(
    koord: tuple[E2ECluster, str],
    node_factory: Callable[..., str],
    min_available: int,
    pods: int,
    cpu: str,
    binding: int,
) -> None:
    c, ns = koord
    tag, label = own_nodes(c, node_factory, 2)
    gang = gang_annotations(f"g-{tag}", min_available, pods)
    names = create_members(c, ns, gang, range(pods), cpu, label)

    def settled() -> bool:
        running = [n for n in names if c.get_pod(ns, n)["status"].get("phase") == "Running"]
        waiting = [n for n in names if scheduled_message(c, ns, n)]
        return len(running) == binding and len(waiting) == pods - binding

    wait_until(settled, 90, message=lambda: describe_pods(c, ns))
    assert len(bound(c, ns, names)) == binding, describe_pods(c, ns)


# --- the operator: --gang-scheduling koord-scheduler ---------------------------------------

koord_operator = operator_fixture("koordinator", name="koord_operator")


@dataclass
class Served:
    """A namespace of the Koordinator cluster that the operator serves, and nodes of its own."""

    cluster: E2ECluster
    namespace: str
    operator: OperatorProcess
    node_factory: Callable[..., str]

    def nodes(self, count: int) -> tuple[str, dict[str, str]]:
        return own_nodes(self.cluster, self.node_factory, count, cpu="8")


@pytest.fixture
def served(
    koord: tuple[E2ECluster, str],
    node_factory: Callable[..., str],
    koord_operator: OperatorProcess,
) -> Served:
    return Served(*koord, koord_operator, node_factory)


def own_job(name: str, label: dict[str, str], workers: int, cpu: str) -> MPIJobWrapper:
    """A job whose pods go only to this test's nodes; the launcher runs until released."""
    job = (
        sim_job(name, workers=workers)
        .workers(workers, cpu=cpu)
        .template_annotation("Launcher", SIM + "hold", "true")
    )
    for role in ("Launcher", "Worker"):
        job.pod_spec_field(role, "nodeSelector", label)
    return job


def failed_scheduling(c: E2ECluster, namespace: str) -> int:
    """How often koord-scheduler turned a pod of the namespace down (event series included)."""
    return sum(
        (event.series.count if event.series else event.count or 1)
        for event in c.core.list_namespaced_event(namespace).items
        if event.reason == "FailedScheduling"
    )


def test_an_mpijob_too_big_binds_no_pod_says_why_and_runs_once_two_nodes_are_added(
    served: Served,
) -> None:
    """4 workers of 4.5 cpu and a launcher need four 8-cpu nodes; two exist."""
    c, ns, operator = served.cluster, served.namespace, served.operator
    tag, label = served.nodes(2)
    create_mpijob(c, ns, own_job("big", label, 4, "4500m").obj())
    placements = Placements(c, ns, {"big": 5})

    def turned_down_whole() -> GangState | None:
        assert placements.bound("big") == 0, describe_pods(c, ns)
        pods = pods_of(c, ns, "big")
        if len(pods) < 5 or not all(turned_down_pod(p) for p in pods):
            return None
        state = gang_condition(c, ns, "big")
        return state if state and state.reason == "Unschedulable" else None

    state = wait_until(turned_down_whole, 90, message=lambda: describe_pods(c, ns))
    assert not state.scheduled, state
    # The scheduler's own words from one of the pods (which it rewrites on each retry).
    assert "Insufficient cpu" in state.message or REJECTED_WHOLE in state.message, state
    running = condition(get_mpijob(c, ns, "big"), "Running")
    assert running is None or running["status"] == "False", running

    for i in range(2, 4):
        served.node_factory(c, f"koord-{tag}-{i}", cpu="8", memory="32Gi", labels=label)
    ready = time.monotonic()
    # Nothing touches the gang: a node add requeues it.
    wait_until(lambda: placements.placed("big"), 90, message=lambda: describe_pods(c, ns))
    print(
        f"\nkoordinator: gang bound {time.monotonic() - ready:.1f} s after the 4th node was Ready"
    )
    wait_for_condition(c, ns, "big", "Running", operator=operator)
    scheduled = wait_for_condition(c, ns, "big", CONDITION_GANG_SCHEDULED, operator=operator)
    assert condition(scheduled, CONDITION_GANG_SCHEDULED)["status"] == "True"  # type: ignore[index]
    finish_launcher(c, ns, "big")
    wait_for_condition(c, ns, "big", "Succeeded", operator=operator)
    placements.assert_never_half_placed()


def test_min_available_below_the_pod_count_starts_the_mpijob_with_what_fits(
    served: Served,
) -> None:
    """Room for the launcher and two of four 6-cpu workers: exactly minAvailable pods."""
    c, ns, operator = served.cluster, served.namespace, served.operator
    _, label = served.nodes(2)
    job = own_job("elastic", label, 4, "6").scheduling_policy(minAvailable=3)
    create_mpijob(c, ns, job.obj())
    placements = Placements(c, ns, {"elastic": 5})
    wait_until(lambda: placements.bound("elastic") == 3, 90, message=lambda: describe_pods(c, ns))
    wait_for_condition(c, ns, "elastic", CONDITION_GANG_SCHEDULED, operator=operator)
    settle(2)
    pods = pods_of(c, ns, "elastic")
    roles = sorted(p.metadata.labels[LABEL_JOB_ROLE] for p in pods if p.spec.node_name)
    assert roles == ["launcher", "worker", "worker"], describe_pods(c, ns)
    waiting = [p for p in pods if not p.spec.node_name]
    assert len(waiting) == 2 and all(turned_down_pod(p) for p in waiting), describe_pods(c, ns)
    finish_launcher(c, ns, "elastic")
    wait_for_condition(c, ns, "elastic", "Succeeded", operator=operator)


def test_schedule_timeout_is_the_gangs_waiting_time_and_a_turned_down_gang_is_retried(
    served: Served,
) -> None:
    """scheduleTimeoutSeconds becomes the gang's waiting time, as the scheduler logs it.
    koord-scheduler v1.7.0 turns a gang down as soon as each of its pending pods has been
    tried, without waiting that long, and tries it again later: the turned-down gang is
    retried while it still does not fit, and no pod of it ever binds."""
    c, ns = served.cluster, served.namespace
    _, label = served.nodes(1)
    job = own_job("patient", label, 2, "6").scheduling_policy(scheduleTimeoutSeconds=7)
    create_mpijob(c, ns, job.obj())
    placements = Placements(c, ns, {"patient": 3})

    def gang_name() -> str | None:
        pods = pods_of(c, ns, "patient")
        names = {(p.metadata.annotations or {}).get(GANG + "name") for p in pods}
        return names.pop() if len(pods) == 3 and len(names) == 1 else None

    gang = wait_until(gang_name, 60, message=lambda: describe_pods(c, ns))
    assert all(
        p.metadata.annotations[GANG + "waiting-time"] == "7s" for p in pods_of(c, ns, "patient")
    )
    wait_until(
        lambda: "waitTime: 7s," in gang_read_by_scheduler(c, ns, gang),
        30,
        message=lambda: gang_read_by_scheduler(c, ns, gang) or "the scheduler to see the gang",
    )

    def retried() -> bool:
        assert placements.bound("patient") == 0, describe_pods(c, ns)
        # Three pods, each turned down at least twice: the gang was tried again.
        return failed_scheduling(c, ns) >= 6

    wait_until(retried, 120, message=lambda: describe_pods(c, ns))
    # The job's status shows the turned-down gang once a sync has seen the pods' conditions,
    # which may come after the scheduler's retries when the machine is busy.
    state = wait_until(
        lambda: gang_condition(c, ns, "patient"),
        60,
        message=lambda: f"a gang condition on the job; pods:\n{describe_pods(c, ns)}",
    )
    assert not state.scheduled, state
    assert placements.bound("patient") == 0, describe_pods(c, ns)
