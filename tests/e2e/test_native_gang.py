"""Kubernetes' own gang scheduling end to end: the operator's scheduling.k8s.io PodGroups
under the 1.37 profile's kube-scheduler (GangScheduling plugin), with simulated nodes and no
other scheduler installed.

The tests size their gangs against the local cluster's two 8-cpu nodes, as tests/e2e/test_gang.py
does, and reuse its helpers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from . import operator as harness
from . import test_gang
from .clusters import SIM, E2ECluster, wait_until
from .operator import CONDITION_GANG_SCHEDULED, OperatorProcess
from .test_gang import NODE_CPU, Gang, Placements, describe, gang_condition, new_node_name

pytestmark = [pytest.mark.e2e, pytest.mark.native]

FLAVOUR = "native"
POD_GROUP_API = "scheduling.k8s.io/v1beta1"
API_MISSING = "podgroups.scheduling.k8s.io is not served by the API server: turn on"

# test_gang's fixture and its flavour-neutral test, here on the 1.37 cluster with this
# module's ``gang``.
ns = test_gang.ns
test_of_two_gangs_with_room_for_one_one_runs_whole_and_the_other_waits_whole = (
    test_gang.test_of_two_gangs_with_room_for_one_one_runs_whole_and_the_other_waits_whole
)


@pytest.fixture(scope="module")
def gang(
    local_cluster: Callable[[str], E2ECluster], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gang]:
    """The 1.37 cluster and the operator serving it, for this module's and test_gang's tests."""
    cluster = local_cluster(FLAVOUR)
    cluster.require_simulation()
    process = OperatorProcess(cluster, tmp_path_factory.mktemp("operator-native")).start()
    yield Gang(cluster, process)
    assert process.stop() == 0, process.log_tail()


@pytest.fixture
def c(gang: Gang) -> E2ECluster:
    return gang.cluster


@pytest.fixture
def operator(gang: Gang) -> OperatorProcess:
    return gang.operator


def pod_spec(c: E2ECluster, namespace: str, name: str) -> dict[str, Any]:
    """A pod's spec as the API server stores it (the Python client drops fields it predates,
    schedulingGroup among them)."""
    raw = c.core.read_namespaced_pod(name, namespace, _preload_content=False)
    spec: dict[str, Any] = json.loads(raw.data)["spec"]
    return spec


def test_a_gang_too_big_for_the_cluster_waits_whole_and_binds_once_two_nodes_are_added(
    c: E2ECluster, operator: OperatorProcess, ns: str, node_factory: Callable[..., str]
) -> None:
    # 4 x 4.5 cpu workers and a launcher: one worker per 8-cpu node, so four nodes; two exist.
    harness.create_mpijob(c, ns, harness.sim_job("big", workers=4).workers(4, cpu="4500m").obj())
    placements = Placements(c, ns, {"big": 5})

    def turned_down_whole() -> Any:
        assert placements.bound("big") == 0, describe(c, ns)
        pods = harness.pods_of(c, ns, "big")
        state = gang_condition(c, ns, "big")
        if len(pods) < 5 or not all(test_gang.turned_down_pod(p) for p in pods):
            return None
        return state if state and not state.scheduled and state.reason == "Unschedulable" else None

    state = wait_until(turned_down_whole, 90, message=lambda: describe(c, ns))
    assert state.message, state
    wait_until(
        lambda: "Unschedulable" in harness.event_reasons(c, ns, "big"), 30, message="the event"
    )
    pod_group = harness.get_pod_group(c, ns, "big")
    assert pod_group is not None
    assert pod_group["apiVersion"] == POD_GROUP_API
    assert pod_group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 5}}
    for pod in harness.pods_of(c, ns, "big"):
        spec = pod_spec(c, ns, pod.metadata.name)
        assert spec["schedulingGroup"] == {"podGroupName": "big"}, pod.metadata.name
        assert spec["schedulerName"] == "default-scheduler"
    harness.settle(2)
    assert [p.spec.node_name for p in harness.pods_of(c, ns, "big")] == [None] * 5

    for _ in range(2):
        node_factory(c, new_node_name(), cpu=str(NODE_CPU), memory="32Gi")
    ready = time.monotonic()
    # Nobody touches the PodGroup: kube-scheduler retries the gang on the node events.
    wait_until(lambda: placements.placed("big"), 30, message=lambda: describe(c, ns))
    print(f"\nnative: gang bound {time.monotonic() - ready:.1f} s after the second node")
    after = harness.get_pod_group(c, ns, "big")
    assert after is not None
    assert after["spec"] == pod_group["spec"]
    assert not after["metadata"].get("annotations"), after["metadata"]
    # The spec is the operator's alone (its create); only the scheduler wrote, on the status.
    writers = {
        (entry["manager"], entry.get("subresource", ""))
        for entry in after["metadata"]["managedFields"]
    }
    assert {writer for writer in writers if writer[1] != "status"} == {("mpi-operator", "")}, (
        writers
    )
    done = harness.wait_for_condition(c, ns, "big", CONDITION_GANG_SCHEDULED, operator=operator)
    assert harness.condition(done, CONDITION_GANG_SCHEDULED)["reason"] == "PodGroupScheduled"  # type: ignore[index]
    harness.wait_for_condition(c, ns, "big", "Succeeded", operator=operator)
    placements.assert_never_half_placed()


def test_wait_for_workers_ready_runs_a_gang_of_the_workers_and_the_launcher_alone(
    c: E2ECluster, operator: OperatorProcess, ns: str
) -> None:
    job = harness.sim_job("wait", workers=2).launcher_creation_policy("WaitForWorkersReady")
    harness.create_mpijob(c, ns, job.obj())
    harness.wait_for_condition(c, ns, "wait", "Succeeded", timeout=120, operator=operator)
    pod_group = harness.get_pod_group(c, ns, "wait")
    assert pod_group is not None
    assert pod_group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    [launcher] = harness.pods_of(c, ns, "wait", "launcher")
    assert "schedulingGroup" not in pod_spec(c, ns, launcher.metadata.name)
    for worker in harness.pods_of(c, ns, "wait", "worker"):
        spec = pod_spec(c, ns, worker.metadata.name)
        assert spec["schedulingGroup"] == {"podGroupName": "wait"}


def test_a_suspended_job_holds_no_pod_group_and_no_pods_until_resumed(
    c: E2ECluster, operator: OperatorProcess, ns: str
) -> None:
    job = harness.sim_job("held", workers=2).template_annotation("Launcher", SIM + "hold", "true")
    harness.create_mpijob(c, ns, job.suspend().obj())
    harness.wait_for_condition(c, ns, "held", "Suspended", operator=operator)
    harness.settle(2)
    assert harness.get_pod_group(c, ns, "held") is None
    assert harness.pods_of(c, ns, "held") == []

    harness.patch_mpijob(c, ns, "held", {"spec": {"runPolicy": {"suspend": False}}})
    harness.wait_for_condition(c, ns, "held", CONDITION_GANG_SCHEDULED, operator=operator)
    assert harness.get_pod_group(c, ns, "held") is not None
    harness.wait_for_condition(c, ns, "held", "Running", operator=operator)

    harness.patch_mpijob(c, ns, "held", {"spec": {"runPolicy": {"suspend": True}}})
    wait_until(
        lambda: harness.get_pod_group(c, ns, "held") is None and not harness.pods_of(c, ns, "held"),
        60,
        message=lambda: describe(c, ns),
    )
    suspended = harness.get_mpijob(c, ns, "held")
    assert harness.condition(suspended, "Suspended")["status"] == "True"  # type: ignore[index]

    harness.patch_mpijob(c, ns, "held", {"spec": {"runPolicy": {"suspend": False}}})
    wait_until(
        lambda: (
            harness.get_pod_group(c, ns, "held") is not None
            and len(harness.pods_of(c, ns, "held")) == 3
        ),
        60,
        message=lambda: describe(c, ns),
    )
    harness.wait_for_condition(c, ns, "held", "Running", operator=operator)
    harness.finish_launcher(c, ns, "held")
    harness.wait_for_condition(c, ns, "held", "Succeeded", operator=operator)


def test_on_a_cluster_without_the_api_gang_jobs_wait_saying_how_to_serve_it(
    local_cluster: Callable[[str], E2ECluster],
    namespace_factory: Callable[[E2ECluster], str],
    tmp_path: Path,
) -> None:
    # The default profile is Kubernetes 1.34: scheduling.k8s.io serves no PodGroups there.
    cluster = local_cluster("default")
    namespace = namespace_factory(cluster)
    operator = OperatorProcess(
        cluster, tmp_path, gang_scheduling="scheduling.k8s.io/podgroup", name="no-podgroups"
    ).start()
    try:
        assert operator.log_path.read_text().count(API_MISSING) == 1, operator.log_tail()
        harness.create_mpijob(cluster, namespace, harness.sim_job("pi").obj())
        job = harness.wait_for_condition(
            cluster, namespace, "pi", CONDITION_GANG_SCHEDULED, "False", operator=operator
        )
        waiting = harness.condition(job, CONDITION_GANG_SCHEDULED)
        assert waiting is not None and waiting["reason"] == "PodGroupAPIMissing", waiting
        assert waiting["message"].startswith(API_MISSING), waiting
        assert "GenericWorkload" in waiting["message"]
        harness.settle(2)
        assert harness.pods_of(cluster, namespace, "pi") == []
        assert "reconcile failed" not in operator.log_path.read_text(), operator.log_tail()
    finally:
        assert operator.stop() == 0, operator.log_tail()
