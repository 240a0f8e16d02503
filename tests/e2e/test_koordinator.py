"""Koordinator's koord-scheduler in the local cluster: plain pods that name a gang in the
annotations Koordinator reads (apis/extension/coscheduling.go) bind all together or not at
all, and what the scheduler shows of a gang that waits."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from .clusters import E2ECluster, load_cluster_tool, sim_pod_spec, wait_until
from .test_cluster_smoke import all_running, bound, describe_pods, pod_condition

pytestmark = [pytest.mark.e2e, pytest.mark.koordinator]

GANG = "gang.scheduling.koordinator.sh/"


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
    log = load_cluster_tool().cluster_dir(c.name) / "logs" / "koord-scheduler.log"
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
