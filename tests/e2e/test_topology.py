"""schedulingPolicy.topology with the default scheduler, coscheduling, Volcano, Koordinator and
Kubernetes' own PodGroup: kwok nodes labelled 2 blocks x 2 racks x 4 nodes; a 6-worker job's
workers land in one rack when Required, spread when Preferred cannot keep them together, and
the hostfile lists each rack's workers together. With Volcano's HyperNodes for the racks, the
PodGroup names their tier; with Koordinator's ClusterNetworkTopology layer of racks, the
workers' network-topology-spec names the layer; on Kubernetes' own PodGroup (1.37) a Required
rack is the PodGroup's scheduling constraint."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .clusters import COSCHEDULING, KOORDINATOR, NATIVE, SIM, VOLCANO, E2ECluster, wait_until
from .operator import (
    condition,
    create_mpijob,
    get_mpijob,
    get_pod_group,
    patch_mpijob,
    pods_of,
    settle,
    sim_job,
    simulated_operator,
)

HYPER_NODES = ("topology.volcano.sh", "v1alpha1", "hypernodes")

pytestmark = pytest.mark.e2e

RACK = "e2e.example/rack"
BLOCK = "e2e.example/block"
# Only the labelled nodes take this test's workers.
POOL = "e2e.example/topology-pool"


@pytest.fixture(scope="module", params=["default", COSCHEDULING, VOLCANO, KOORDINATOR, NATIVE])
def cluster(
    request: pytest.FixtureRequest,
    local_cluster: Callable[[str], E2ECluster],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[E2ECluster]:
    """The flavour's cluster, its operator running for the module."""
    flavoured = local_cluster(request.param)
    with simulated_operator(flavoured, tmp_path_factory):
        yield flavoured


@pytest.fixture
def racks(cluster: E2ECluster, node_factory: Callable[..., str]) -> dict[str, str]:
    """Node name -> rack: blocks b0, b1; racks b0-r0 ... b1-r1; four 8-cpu nodes each."""
    pool = uuid.uuid4().hex[:6]
    rack_of: dict[str, str] = {}
    for block in ("b0", "b1"):
        for rack in ("r0", "r1"):
            for index in range(4):
                name = f"topo-{pool}-{block}-{rack}-{index}"
                labels = {BLOCK: block, RACK: f"{block}-{rack}", POOL: pool}
                node_factory(cluster, name, cpu="8", labels=labels)
                rack_of[name] = f"{block}-{rack}"
    return rack_of


def topology_job(name: str, pool: str, mode: str, worker_cpu: str) -> dict[str, Any]:
    job = (
        sim_job(name, workers=6)
        .workers(6, cpu=worker_cpu)
        .pod_spec_field("Worker", "nodeSelector", {POOL: pool})
        .launcher_creation_policy("WaitForWorkersReady")
        .scheduling_policy(topology={"key": RACK, "mode": mode})
    )
    return job.obj()


def placed_workers(cluster: E2ECluster, ns: str, name: str) -> dict[str, str] | None:
    """Worker pod name -> node, once all six run."""
    pods = pods_of(cluster, ns, name, role="worker")
    if len(pods) < 6 or any(p.status.phase != "Running" for p in pods):
        return None
    return {p.metadata.name: p.spec.node_name for p in pods}


def hostfile_workers(cluster: E2ECluster, ns: str, name: str) -> list[str]:
    data = cluster.core.read_namespaced_config_map(f"{name}-config", ns).data or {}
    return [line.split(".")[0] for line in data.get("hostfile", "").splitlines()]


def contiguous(groups: list[str]) -> bool:
    """Each value appears in one run."""
    runs = [value for i, value in enumerate(groups) if i == 0 or groups[i - 1] != value]
    return len(runs) == len(set(runs))


def run_and_read(
    cluster: E2ECluster, ns: str, job: dict[str, Any], racks: dict[str, str]
) -> tuple[list[str], list[str]]:
    """Each worker's rack, and each hostfile line's rack, once the hostfile is ordered."""
    name = job["metadata"]["name"]
    create_mpijob(cluster, ns, job)
    placed = wait_until(lambda: placed_workers(cluster, ns, name), 120, message="six workers")
    worker_racks = [racks[node] for node in placed.values()]
    return worker_racks, hostfile_racks_in_order(cluster, ns, name, placed, racks)


def hostfile_racks_in_order(
    cluster: E2ECluster, ns: str, name: str, worker_nodes: dict[str, str], racks: dict[str, str]
) -> list[str]:
    """Each hostfile line's rack, once the hostfile lists every worker (pod name -> node)
    with each rack's workers together."""

    def ordered() -> list[str] | None:
        hosts = hostfile_workers(cluster, ns, name)
        in_racks = [racks[worker_nodes[host]] for host in hosts if host in worker_nodes]
        return in_racks if len(in_racks) == len(worker_nodes) and contiguous(in_racks) else None

    return wait_until(ordered, 60, message="the hostfile in rack order")


@pytest.mark.parametrize("mode", ["Required", "Preferred"])
def test_a_rack_that_can_hold_the_job_lands_every_worker_in_it(
    cluster: E2ECluster, namespace: str, racks: dict[str, str], mode: str
) -> None:
    pool = next(iter(racks)).split("-")[1]
    job = topology_job(f"fits-{mode.lower()}", pool, mode, worker_cpu="1")
    worker_racks, hostfile_racks = run_and_read(cluster, namespace, job, racks)
    assert len(set(worker_racks)) == 1, worker_racks
    assert sorted(hostfile_racks) == sorted(worker_racks)


def test_preferred_rack_that_cannot_hold_the_job_still_runs_rack_by_rack(
    cluster: E2ECluster, namespace: str, racks: dict[str, str]
) -> None:
    pool = next(iter(racks)).split("-")[1]
    # One 5-cpu worker per 8-cpu node: six workers need six nodes, a rack has four.
    job = topology_job("rack-preferred", pool, "Preferred", worker_cpu="5")
    worker_racks, hostfile_racks = run_and_read(cluster, namespace, job, racks)
    assert len(set(worker_racks)) > 1, worker_racks
    assert contiguous(hostfile_racks), hostfile_racks


def test_a_gang_too_big_for_any_rack_waits_whole_and_runs_when_a_rack_grows(
    cluster: E2ECluster,
    namespace: str,
    racks: dict[str, str],
    node_factory: Callable[..., str],
) -> None:
    if cluster.flavour == "default":
        pytest.skip("without a gang scheduler the workers a rack holds run while the rest wait")
    some_node = next(iter(racks))
    pool = some_node.split("-")[1]
    job = topology_job("rack-too-big", pool, "Required", worker_cpu="5")
    create_mpijob(cluster, namespace, job)

    def waits_whole() -> bool:
        pods = pods_of(cluster, namespace, "rack-too-big", role="worker")
        assert all(not p.spec.node_name for p in pods), [p.spec.node_name for p in pods]
        return len(pods) == 6

    wait_until(waits_whole, 60, message="six unplaced workers")
    # The scheduler has turned the gang down by now, whole: no worker holds a node.
    settle(10)
    assert waits_whole()
    grown = racks[some_node]
    block = grown.split("-")[0]
    # The first worker chooses the rack. Two roomier nodes make the grown rack the one a
    # least-allocated score picks, so the retry the new nodes trigger places the gang; an
    # unlucky choice among equal racks would wait for the scheduler's next event or flush.
    for index in (4, 5):
        name = f"topo-{pool}-{grown}-{index}"
        node_factory(cluster, name, cpu="16", labels={BLOCK: block, RACK: grown, POOL: pool})
        racks[name] = grown
    placed = wait_until(
        lambda: placed_workers(cluster, namespace, "rack-too-big"), 120, message="six workers"
    )
    assert {racks[node] for node in placed.values()} == {grown}


@pytest.fixture
def rack_hyper_nodes(cluster: E2ECluster, racks: dict[str, str]) -> Iterator[list[str]]:
    """Volcano HyperNodes of tier 1, one per rack (its nodes by label), deleted after the
    test."""
    if cluster.flavour != "volcano":
        pytest.skip("HyperNodes are Volcano's")
    names = []
    for rack in sorted(set(racks.values())):
        name = f"rack-{rack}"
        body = {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {
                "tier": 1,
                "members": [
                    {"type": "Node", "selector": {"labelMatch": {"matchLabels": {RACK: rack}}}}
                ],
            },
        }
        cluster.custom.create_cluster_custom_object(*HYPER_NODES, body)
        names.append(name)
    yield names
    for name in names:
        cluster.custom.delete_cluster_custom_object(*HYPER_NODES, name)


def network_topology(cluster: E2ECluster, ns: str, name: str) -> Any:
    pod_group = cluster.get_custom("scheduling.volcano.sh", "v1beta1", ns, "podgroups", name)
    return pod_group["spec"].get("networkTopology")


def test_volcano_pod_group_names_the_rack_tier_of_its_hyper_nodes(
    cluster: E2ECluster, namespace: str, racks: dict[str, str], rack_hyper_nodes: list[str]
) -> None:
    pool = next(iter(racks)).split("-")[1]
    job = topology_job("rack-tier", pool, "Required", worker_cpu="1")
    worker_racks, _ = run_and_read(cluster, namespace, job, racks)
    assert len(set(worker_racks)) == 1, worker_racks
    expected = {"mode": "hard", "highestTierAllowed": 1}
    wait_until(
        lambda: network_topology(cluster, namespace, "rack-tier") == expected,
        30,
        message=f"the PodGroup's networkTopology {expected}",
    )


def test_volcano_without_a_tier_for_the_label_says_so_and_keeps_the_affinity(
    cluster: E2ECluster, namespace: str, racks: dict[str, str], rack_hyper_nodes: list[str]
) -> None:
    # The rack HyperNodes split every block in two: no tier groups the nodes by block.
    warned_and_held_in_a_block(cluster, namespace, racks, "block-no-tier", "NoHyperNodeTier")
    assert network_topology(cluster, namespace, "block-no-tier") is None


def warned_and_held_in_a_block(
    cluster: E2ECluster, ns: str, racks: dict[str, str], name: str, reason: str
) -> None:
    """A Required block job the scheduler's own layout cannot name: a Warning ``reason``
    naming the label, and the workers' affinity alone holding all six in one block."""
    pool = next(iter(racks)).split("-")[1]
    job = topology_job(name, pool, "Required", worker_cpu="1")
    job["spec"]["runPolicy"]["schedulingPolicy"]["topology"]["key"] = BLOCK
    create_mpijob(cluster, ns, job)

    def warned() -> dict[str, Any] | None:
        return next((e for e in cluster.events_for(ns, name) if e["reason"] == reason), None)

    event = wait_until(warned, 60, message=f"the {reason} event")
    assert event["type"] == "Warning" and f'"{BLOCK}"' in event["message"]
    placed = wait_until(lambda: placed_workers(cluster, ns, name), 120, message="six workers")
    assert len({racks[node].split("-")[0] for node in placed.values()}) == 1, placed


@pytest.fixture
def native_pool(cluster: E2ECluster, racks: dict[str, str]) -> str:
    """The labelled nodes' pool, on Kubernetes' own PodGroup only."""
    if cluster.flavour != "native":
        pytest.skip("schedulingConstraints are Kubernetes' own PodGroup's")
    return next(iter(racks)).split("-")[1]


def native_constraints(cluster: E2ECluster, ns: str, name: str) -> Any:
    pod_group = get_pod_group(cluster, ns, name)
    return None if pod_group is None else pod_group["spec"].get("schedulingConstraints")


def test_native_pod_group_holds_a_required_gang_launcher_included_in_one_rack(
    cluster: E2ECluster, namespace: str, racks: dict[str, str], native_pool: str
) -> None:
    # The launcher is created with the workers, so it is in the gang and in the rack; held
    # running, so the job's later change meets a PodGroup in use.
    job = (
        sim_job("rack-constraint", workers=6)
        .workers(6, cpu="1")
        .pod_spec_field("Worker", "nodeSelector", {POOL: native_pool})
        .pod_spec_field("Launcher", "nodeSelector", {POOL: native_pool})
        .template_annotation("Launcher", SIM + "hold", "true")
        .scheduling_policy(topology={"key": RACK, "mode": "Required"})
    )
    create_mpijob(cluster, namespace, job.obj())
    rack_constraint = {"topology": [{"key": RACK}]}
    constraints = wait_until(
        lambda: native_constraints(cluster, namespace, "rack-constraint"),
        30,
        message="the PodGroup's schedulingConstraints",
    )
    assert constraints == rack_constraint

    def placed_pods() -> list[str] | None:
        pods = pods_of(cluster, namespace, "rack-constraint")
        nodes = [p.spec.node_name for p in pods]
        return nodes if len(nodes) == 7 and all(nodes) else None

    nodes = wait_until(placed_pods, 120, message="six workers and the launcher placed")
    assert len({racks[node] for node in nodes}) == 1, nodes

    # The constraint is immutable: a new domain leaves it as it was, while minCount, which
    # may change, is updated in the same PodGroup and the condition says what it keeps.
    patch_mpijob(
        cluster,
        namespace,
        "rack-constraint",
        {
            "spec": {
                "runPolicy": {"schedulingPolicy": {"minAvailable": 6, "topology": {"key": BLOCK}}}
            }
        },
    )
    pod_group = wait_until(
        lambda: (
            (found := get_pod_group(cluster, namespace, "rack-constraint"))
            and found["spec"]["schedulingPolicy"]["gang"]["minCount"] == 6
            and found
        ),
        30,
        message="the PodGroup's minCount updated to 6",
    )
    assert pod_group["spec"]["schedulingConstraints"] == rack_constraint

    def gang_message() -> str | None:
        stored = get_mpijob(cluster, namespace, "rack-constraint")
        gang = condition(stored, "GangScheduled") or {}
        message = str(gang.get("message", ""))
        return message if "keeps the spec.schedulingConstraints" in message else None

    message = wait_until(gang_message, 30, message="the GangScheduled condition's note")
    assert f'created with ("{RACK}")' in message, message


def test_native_pod_group_of_a_preferred_rack_has_no_constraint(
    cluster: E2ECluster, namespace: str, native_pool: str
) -> None:
    job = topology_job("rack-no-constraint", native_pool, "Preferred", worker_cpu="1")
    create_mpijob(cluster, namespace, job)
    pod_group = wait_until(
        lambda: get_pod_group(cluster, namespace, "rack-no-constraint"), 30, message="PodGroup"
    )
    assert "schedulingConstraints" not in pod_group["spec"]
    placed = wait_until(
        lambda: placed_workers(cluster, namespace, "rack-no-constraint"), 120, message="six"
    )
    assert len(placed) == 6


# -- Koordinator's ClusterNetworkTopology --------------------------------------------------------

CLUSTER_NETWORK_TOPOLOGIES = ("scheduling.koordinator.sh", "v1alpha1", "clusternetworktopologies")
RACK_LAYER = "RackLayer"
SPEC_ANNOTATION = "gang.scheduling.koordinator.sh/network-topology-spec"


def rack_layer_built(cluster: E2ECluster, racks: dict[str, str]) -> bool:
    """Whether koord-scheduler's status of the topology counts every node of each rack as the
    API server lists them now: its tree (rebuilt every 10 seconds) holds this test's nodes."""
    topology: dict[str, Any] = cluster.custom.get_cluster_custom_object(  # type: ignore[assignment]
        *CLUSTER_NETWORK_TOPOLOGIES, "default"
    )
    details = (topology.get("status") or {}).get("detailStatus") or []
    counted = {
        d["topologyInfo"]["topologyName"]: d.get("nodeNum", 0)
        for d in details
        if d["topologyInfo"]["topologyLayer"] == RACK_LAYER
    }
    for rack in set(racks.values()):
        listed = cluster.core.list_node(label_selector=f"{RACK}={rack}").items
        if counted.get(rack) != len(listed):
            return False
    return True


@pytest.fixture
def rack_layer(cluster: E2ECluster, racks: dict[str, str]) -> Iterator[str]:
    """Koordinator's ClusterNetworkTopology ``default``: a layer of racks above the nodes,
    deleted after the test; yielded once koord-scheduler has built it with this test's
    nodes."""
    if cluster.flavour != "koordinator":
        pytest.skip("the ClusterNetworkTopology is Koordinator's")
    body = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default"},
        "spec": {
            "networkTopologySpec": [
                {"topologyLayer": RACK_LAYER, "labelKey": [RACK]},
                {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": RACK_LAYER},
            ]
        },
    }
    cluster.custom.create_cluster_custom_object(*CLUSTER_NETWORK_TOPOLOGIES, body)
    try:
        wait_until(lambda: rack_layer_built(cluster, racks), 60, message="the rack layer built")
        # The operator's cache of the object catches up with the status just read.
        settle(2)
        yield RACK_LAYER
    finally:
        cluster.custom.delete_cluster_custom_object(*CLUSTER_NETWORK_TOPOLOGIES, "default")


def gather_rules(cluster: E2ECluster, ns: str, name: str) -> list[Any]:
    """Each worker's network-topology-spec, decoded; None where it has none."""
    pods = pods_of(cluster, ns, name, role="worker")
    specs = [(p.metadata.annotations or {}).get(SPEC_ANNOTATION) for p in pods]
    return [json.loads(spec) if spec is not None else None for spec in specs]


def gather(layer: str, strategy: str) -> dict[str, Any]:
    return {"gatherStrategy": [{"layer": layer, "strategy": strategy}]}


@pytest.mark.parametrize(
    ("mode", "worker_cpu", "strategy"),
    # Preferred: one 5-cpu worker per 8-cpu node, six workers need six nodes, a rack has four.
    [("Required", "1", "MustGather"), ("Preferred", "5", "PreferGather")],
)
def test_koordinator_workers_carry_the_rack_layers_gather_rule(
    cluster: E2ECluster,
    namespace: str,
    racks: dict[str, str],
    rack_layer: str,
    mode: str,
    worker_cpu: str,
    strategy: str,
) -> None:
    name = f"rack-layer-{mode.lower()}"
    job = topology_job(name, next(iter(racks)).split("-")[1], mode, worker_cpu=worker_cpu)
    worker_racks, hostfile_racks = run_and_read(cluster, namespace, job, racks)
    events = cluster.events_for(namespace, name)
    assert [e["message"] for e in events if e["reason"] == "NoNetworkTopologyLayer"] == []
    assert gather_rules(cluster, namespace, name) == [gather(rack_layer, strategy)] * 6
    if mode == "Preferred":
        assert len(set(worker_racks)) > 1 and contiguous(hostfile_racks), hostfile_racks
        return
    assert len(set(worker_racks)) == 1, worker_racks
    # The rule, not the affinity alone, placed them: koord-scheduler plans a gang with a rule
    # into the smallest domain that holds it, and one 8-cpu node holds six 1-cpu workers.
    placed = placed_workers(cluster, namespace, name)
    assert placed is not None and len(set(placed.values())) == 1, placed


def test_koordinator_without_a_layer_for_the_label_says_so_and_keeps_the_affinity(
    cluster: E2ECluster, namespace: str, racks: dict[str, str], rack_layer: str
) -> None:
    # The topology has a layer of racks only: none groups the nodes by block.
    warned_and_held_in_a_block(
        cluster, namespace, racks, "block-no-layer", "NoNetworkTopologyLayer"
    )
    assert gather_rules(cluster, namespace, "block-no-layer") == [None] * 6


def topology_fits(cluster: E2ECluster, ns: str, name: str) -> dict[str, Any] | None:
    return condition(get_mpijob(cluster, ns, name), "TopologyFits")


def test_a_job_no_rack_has_room_for_says_so_and_runs_when_a_rack_grows(
    cluster: E2ECluster,
    namespace: str,
    racks: dict[str, str],
    node_factory: Callable[..., str],
) -> None:
    some_node = next(iter(racks))
    pool = some_node.split("-")[1]
    # One 5-cpu worker per 8-cpu node: a rack of four nodes has room for four of the six.
    job = topology_job("no-rack-fits", pool, "Required", worker_cpu="5")
    create_mpijob(cluster, namespace, job)

    def waiting() -> dict[str, Any] | None:
        condition = topology_fits(cluster, namespace, "no-rack-fits")
        return condition if condition and condition.get("status") == "False" else None

    condition = wait_until(waiting, 60, message="TopologyFits False")
    assert condition["reason"] == "NoDomainFits"
    assert condition["message"] == (
        f'needs 6 workers in one "{RACK}"; the most any has room for is 4 (rack "b0-r0")'
    ), condition
    grown = racks[some_node]
    if cluster.flavour == "default":
        # Without a gang scheduler the first worker chooses a rack and three join it.
        def four_bound() -> list[str] | None:
            workers = pods_of(cluster, namespace, "no-rack-fits", role="worker")
            bound = [p.spec.node_name for p in workers if p.spec.node_name]
            return bound if len(bound) == 4 else None

        grown = racks[wait_until(four_bound, 60, message="four workers in one rack")[0]]
    block = grown.split("-")[0]
    for index in (4, 5):
        name = f"topo-{pool}-{grown}-{index}"
        node_factory(cluster, name, cpu="16", labels={BLOCK: block, RACK: grown, POOL: pool})
        racks[name] = grown
    placed = wait_until(
        lambda: placed_workers(cluster, namespace, "no-rack-fits"), 120, message="six workers"
    )
    assert {racks[node] for node in placed.values()} == {grown}
    turned = wait_until(
        lambda: (
            (c := topology_fits(cluster, namespace, "no-rack-fits")) and c["status"] == "True" and c
        ),
        60,
        message="TopologyFits True",
    )
    assert turned["reason"] in ("DomainFits", "WorkersPlaced"), turned
