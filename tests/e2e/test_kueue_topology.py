"""Kueue's Topology Aware Scheduling on the MPIJobs this operator runs: Kueue admits a job
with a topology assignment, the operator creates its pods from the templates Kueue resumed
it with (the `kueue.x-k8s.io/topology` scheduling gate, the pod-set label and workload
annotation), and Kueue ungates each pod onto a node chosen by its replica-index label.

On kwok nodes with two GPUs each, labelled 2 blocks x 2 racks x 4 nodes: a Required rack
lands every worker in one rack, a Preferred rack too small for the job still runs, and a
Required rack too small waits unadmitted until a rack grows. On the node layout of Kueue's
own MPIJob TAS tests (2 blocks x 2 racks x 2 nodes), those tests' scenarios place every
rank on the node they expect under upstream's operator."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mpi_operator.testing.wrappers import MPIJobWrapper, resources_container

from .clusters import E2ECluster, wait_until
from .operator import create_mpijob, get_mpijob, operator_fixture, pods_of, settle, sim_job
from .test_kueue import (
    QUEUE_LABEL,
    SIM_HOLD,
    create_cluster_object,
    create_cluster_queue,
    create_local_queue,
    delete_cluster_object,
    suspended,
    workload_condition_of,
    workload_of,
)
from .test_topology import hostfile_racks_in_order

pytestmark = pytest.mark.e2e

BLOCK = "e2e.example/block"
RACK = "e2e.example/rack"
HOSTNAME = "kubernetes.io/hostname"
# The flavour's node label: only this test's nodes belong to its Topology.
POOL = "e2e.example/tas-pool"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
INDEX_OFFSET = "kueue.x-k8s.io/pod-index-offset"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
GPU = "nvidia.com/gpu"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
ROLE = "training.kubeflow.org/job-role"

operator = operator_fixture("default", kueue=True)


def tas_queue(c: E2ECluster, ns: str, pool: str, cpu: str, gpus: str) -> Callable[[], None]:
    """A LocalQueue ``lq`` in ``ns`` whose flavour selects the ``pool`` nodes and names a
    Topology of block, rack and hostname. Returns what deletes the cluster-wide objects."""
    topology, flavour, cluster_queue = f"tas-{pool}", f"tas-{pool}", f"tas-{pool}"
    levels = [{"nodeLabel": key} for key in (BLOCK, RACK, HOSTNAME)]
    create_cluster_object(
        c,
        "topologies",
        {"kind": "Topology", "metadata": {"name": topology}, "spec": {"levels": levels}},
    )
    create_cluster_object(
        c,
        "resourceflavors",
        {
            "kind": "ResourceFlavor",
            "metadata": {"name": flavour},
            "spec": {"nodeLabels": {POOL: pool}, "topologyName": topology},
        },
    )
    create_cluster_queue(c, cluster_queue, ns, flavour, {"cpu": cpu, GPU: gpus})
    create_local_queue(c, ns, cluster_queue)

    def delete() -> None:
        for plural, name in (
            ("clusterqueues", cluster_queue),
            ("resourceflavors", flavour),
            ("topologies", topology),
        ):
            delete_cluster_object(c, plural, name)

    return delete


def gpu_nodes(
    c: E2ECluster, node_factory: Callable[..., str], pool: str, layout: dict[str, str], gpus: int
) -> dict[str, str]:
    """Nodes (name -> "block/rack") of 8 cpu and ``gpus`` GPUs in ``pool``."""
    for name, domain in layout.items():
        block, rack = domain.split("/")
        labels = {BLOCK: block, RACK: rack, POOL: pool}
        node_factory(c, name, cpu="8", gpu=gpus, labels=labels)
    return layout


@pytest.fixture
def tas_namespace(
    kueue_cluster: E2ECluster,
    namespace_factory: Callable[[E2ECluster], str],
    operator: Any,
) -> str:
    return namespace_factory(kueue_cluster)


@pytest.fixture
def pool() -> str:
    return uuid.uuid4().hex[:6]


@pytest.fixture
def racks(
    kueue_cluster: E2ECluster,
    tas_namespace: str,
    pool: str,
    node_factory: Callable[..., str],
) -> Iterator[dict[str, str]]:
    """2 blocks x 2 racks x 4 two-GPU nodes (name -> "block/rack") under a TAS queue."""
    layout = {
        f"tas-{pool}-{block}-{rack}-{index}": f"{block}/{block}-{rack}"
        for block in ("b0", "b1")
        for rack in ("r0", "r1")
        for index in range(4)
    }
    gpu_nodes(kueue_cluster, node_factory, pool, layout, gpus=2)
    delete = tas_queue(kueue_cluster, tas_namespace, pool, cpu="4", gpus="32")
    yield layout
    delete()


def tas_job(
    name: str, workers: int, worker_gpus: str = "1", launcher_cpu: str = "100m"
) -> MPIJobWrapper:
    """A queued job whose launcher runs until the test ends."""
    job = sim_job(name, workers=workers).metadata_field("labels", {QUEUE_LABEL: "lq"})
    gpu = {GPU: worker_gpus}
    job.containers("Worker", resources_container("worker", requests=gpu, limits=gpu))
    cpu = {"cpu": launcher_cpu}
    job.containers("Launcher", resources_container("launcher", requests=cpu, limits=cpu))
    return job.template_annotation("Launcher", SIM_HOLD, "true")


def placed(c: E2ECluster, ns: str, name: str, count: int) -> dict[str, Any] | None:
    """Pod name -> pod once ``count`` pods of the job (launcher included) have nodes."""
    pods = pods_of(c, ns, name)
    if len(pods) < count or any(not p.spec.node_name for p in pods):
        return None
    return {p.metadata.name: p for p in pods}


def state(c: E2ECluster, ns: str, name: str) -> str:
    """What a wait for placement saw: the Workload's status and each pod's gates and node."""
    workload = workload_of(c, ns, name) or {}
    pods = [
        (p.metadata.name, p.spec.scheduling_gates, p.spec.node_selector, p.spec.node_name)
        for p in pods_of(c, ns, name)
    ]
    return f"placed pods; workload status {workload.get('status')}; pods {pods}"


def worker_assignment(c: E2ECluster, ns: str, name: str) -> dict[str, Any]:
    workload = workload_of(c, ns, name) or {}
    assignments = ((workload.get("status") or {}).get("admission") or {}).get(
        "podSetAssignments"
    ) or []
    return next((a for a in assignments if a["name"] == "worker"), {})


def workers_of(pods: dict[str, Any]) -> list[Any]:
    """The worker pods among a job's (by role: the launcher has an index too when it runs
    as a worker)."""
    return [p for p in pods.values() if p.metadata.labels.get(ROLE) == "worker"]


def check_ungated_by_kueue(pods: dict[str, Any]) -> None:
    """Every pod was created gated and Kueue pinned it to its node when it lifted the gate."""
    for pod in pods.values():
        assert not any(g.name == TOPOLOGY_GATE for g in pod.spec.scheduling_gates or []), pod
        assert (pod.spec.node_selector or {}).get(HOSTNAME) == pod.spec.node_name, pod.spec
        assert pod.metadata.labels.get("kueue.x-k8s.io/podset"), pod.metadata.labels


def worker_racks_in_hostfile_order(
    c: E2ECluster, ns: str, name: str, pods: dict[str, Any], racks: dict[str, str]
) -> list[str]:
    """Each hostfile line's rack, once the hostfile lists every worker in rack order."""
    nodes = {p.metadata.name: p.spec.node_name for p in workers_of(pods)}
    return hostfile_racks_in_order(c, ns, name, nodes, racks)


@pytest.mark.parametrize("mode", [REQUIRED, PREFERRED], ids=["required", "preferred"])
def test_a_rack_that_can_hold_the_job_is_assigned_by_kueue_and_holds_every_worker(
    kueue_cluster: E2ECluster, tas_namespace: str, racks: dict[str, str], mode: str
) -> None:
    c, ns = kueue_cluster, tas_namespace
    create_mpijob(c, ns, tas_job("rack", 6).template_annotation("Worker", mode, RACK).obj())
    pods = wait_until(lambda: placed(c, ns, "rack", 7), 120, message=lambda: state(c, ns, "rack"))
    assignment = worker_assignment(c, ns, "rack")
    # A Topology whose lowest level is the hostname is assigned by node alone: Kueue omits
    # the levels above it.
    assert assignment["topologyAssignment"]["levels"] == [HOSTNAME], assignment
    check_ungated_by_kueue(pods)
    workers = workers_of(pods)
    assert len({racks[p.spec.node_name] for p in workers}) == 1, racks
    # Kueue packs the one-GPU workers two to a two-GPU node.
    per_node = Counter(p.spec.node_name for p in workers)
    assert sorted(per_node.values()) == [2, 2, 2], per_node
    hostfile_racks = worker_racks_in_hostfile_order(c, ns, "rack", pods, racks)
    assert len(hostfile_racks) == 6


def test_a_preferred_rack_too_small_for_the_job_still_runs_in_one_block(
    kueue_cluster: E2ECluster, tas_namespace: str, racks: dict[str, str]
) -> None:
    c, ns = kueue_cluster, tas_namespace
    # One two-GPU worker per node: six workers need six nodes, a rack has four.
    job = tas_job("spread", 6, worker_gpus="2").template_annotation("Worker", PREFERRED, RACK).obj()
    create_mpijob(c, ns, job)
    pods = wait_until(
        lambda: placed(c, ns, "spread", 7), 120, message=lambda: state(c, ns, "spread")
    )
    check_ungated_by_kueue(pods)
    workers = workers_of(pods)
    worker_racks = [racks[p.spec.node_name] for p in workers]
    # Kueue goes up a level, to a block of eight nodes.
    assert len(set(worker_racks)) == 2, worker_racks
    assert len({rack.split("/")[0] for rack in worker_racks}) == 1, worker_racks
    worker_racks_in_hostfile_order(c, ns, "spread", pods, racks)


def test_a_required_rack_too_small_waits_unadmitted_until_a_rack_grows(
    kueue_cluster: E2ECluster,
    tas_namespace: str,
    pool: str,
    racks: dict[str, str],
    node_factory: Callable[..., str],
) -> None:
    c, ns = kueue_cluster, tas_namespace
    job = tas_job("too-big", 6, worker_gpus="2").template_annotation("Worker", REQUIRED, RACK).obj()
    create_mpijob(c, ns, job)
    wait_until(lambda: workload_of(c, ns, "too-big"), 30, message="the job's Workload")
    settle(10)
    reserved = workload_condition_of(c, ns, "too-big", "QuotaReserved") or {}
    assert reserved.get("status") == "False", reserved
    # Kueue's own words for why it waits: one node per worker, a rack has four.
    assert "allows to fit only 4 out of 6" in reserved.get("message", ""), reserved
    assert suspended(get_mpijob(c, ns, "too-big"))
    assert pods_of(c, ns, "too-big") == []

    grown = "b1/b1-r0"
    grown_nodes = {f"tas-{pool}-b1-r0-{index}": grown for index in (4, 5)}
    racks.update(gpu_nodes(c, node_factory, pool, grown_nodes, gpus=2))
    pods = wait_until(
        lambda: placed(c, ns, "too-big", 7), 180, message=lambda: state(c, ns, "too-big")
    )
    check_ungated_by_kueue(pods)
    workers = workers_of(pods)
    assert {racks[p.spec.node_name] for p in workers} == {grown}


# Kueue's own MPIJob TAS tests run on a kind cluster of eight workers; its nodes here.
KIND_LAYOUT = {
    "worker": "b1/r1",
    "worker2": "b1/r1",
    "worker3": "b1/r2",
    "worker4": "b1/r2",
    "worker5": "b2/r1",
    "worker6": "b2/r1",
    "worker7": "b2/r2",
    "worker8": "b2/r2",
}


@pytest.fixture
def kind_nodes(
    kueue_cluster: E2ECluster,
    tas_namespace: str,
    pool: str,
    node_factory: Callable[..., str],
) -> Iterator[str]:
    """The layout of Kueue's TAS test cluster, its nodes named ``<prefix>-worker...`` in the
    same order, under a queue of Kueue's test's quota. Yields the prefix."""
    prefix = f"tas-{pool}"
    layout = {f"{prefix}-{name}": domain for name, domain in KIND_LAYOUT.items()}
    gpu_nodes(kueue_cluster, node_factory, pool, layout, gpus=1)
    delete = tas_queue(kueue_cluster, tas_namespace, pool, cpu="1", gpus="8")
    yield prefix
    delete()


def kueue_test_job(name: str, launcher_as_worker: bool, annotations: dict[str, Any]) -> Any:
    job = tas_job(name, 3, launcher_cpu="200m").run_launcher_as_worker(launcher_as_worker)
    for role in ("Launcher", "Worker"):
        for key, value in annotations[role].items():
            job.template_annotation(role, key, value)
    return job


RANKS = {"Launcher": {PREFERRED: RACK}, "Worker": {PREFERRED: BLOCK}}
SAME_GROUP = {role: {REQUIRED: BLOCK, GROUP_NAME: "same-group"} for role in RANKS}


@pytest.mark.parametrize(
    ("launcher_as_worker", "annotations", "with_launcher", "expected"),
    [
        pytest.param(
            False,
            RANKS,
            False,
            {"worker/0": "worker", "worker/1": "worker2", "worker/2": "worker3"},
            id="ranks",
        ),
        pytest.param(
            True,
            RANKS,
            False,
            {"worker/1": "worker", "worker/2": "worker2", "worker/3": "worker3"},
            id="launcher-as-worker",
        ),
        pytest.param(
            True,
            SAME_GROUP,
            True,
            {
                "launcher/0": "worker",
                "worker/1": "worker",
                "worker/2": "worker2",
                "worker/3": "worker3",
            },
            id="launcher-and-workers-grouped",
        ),
    ],
)
def test_kueues_own_mpijob_scenarios_place_each_rank_where_upstream_would(
    kueue_cluster: E2ECluster,
    tas_namespace: str,
    kind_nodes: str,
    launcher_as_worker: bool,
    annotations: dict[str, Any],
    with_launcher: bool,
    expected: dict[str, str],
) -> None:
    c, ns = kueue_cluster, tas_namespace
    create_mpijob(c, ns, kueue_test_job("ranks", launcher_as_worker, annotations).obj())
    if launcher_as_worker and GROUP_NAME not in annotations["Launcher"]:
        # Kueue's webhook shifts the workers' ranks past the launcher's; in one pod-set group
        # its ungater does, from the two pod sets' counts.
        wait_until(
            lambda: (
                get_mpijob(c, ns, "ranks")["spec"]["mpiReplicaSpecs"]["Worker"]["template"][
                    "metadata"
                ]["annotations"].get(INDEX_OFFSET)
                == "1"
            ),
            30,
            message="the pod-index-offset annotation",
        )
    pods = wait_until(lambda: placed(c, ns, "ranks", 4), 120, message=lambda: state(c, ns, "ranks"))
    assignment = {}
    for pod in pods.values():
        labels = pod.metadata.labels
        role = labels[ROLE]
        if role == "worker" or with_launcher:
            node = pod.spec.node_name.removeprefix(f"{kind_nodes}-")
            assignment[f"{role}/{labels.get(REPLICA_INDEX)}"] = node
    assert assignment == expected
