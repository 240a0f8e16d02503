"""Koordinator's own network-topology dialect: the ClusterNetworkTopology layer that groups the
nodes by the job's label, the workers' network-topology-spec naming it, and the Warning when no
built layer does."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import pytest
import yaml
from golden import assert_matches_golden

from gang import cluster_layout_of
from gang.koordinator import (
    CLUSTER_NETWORK_TOPOLOGY_RESOURCE,
    NETWORK_TOPOLOGY_SPEC_ANNOTATION,
    REASON_NO_NETWORK_TOPOLOGY_LAYER,
    KoordinatorScheduler,
)
from gang.koordinator.network_topology import Layer, layer_grouping_by
from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts, ClusterLayout
from mpi_operator.desired.workers import new_worker_pod
from mpi_operator.testing.wrappers import MPIJobWrapper

RACK: Final = "example.com/rack"
BLOCK: Final = "example.com/block"
ROW: Final = "example.com/row"
RACK_LAYER: Final = "RackLayer"
BLOCK_LAYER: Final = "BlockLayer"


def nodes() -> dict[str, dict[str, str]]:
    """2 blocks x 2 racks x 2 nodes, plus a node without those labels."""
    labelled = {
        f"b{b}-r{r}-{n}": {BLOCK: f"block-{b}", RACK: f"rack-{b}{r}"}
        for b in range(2)
        for r in range(2)
        for n in range(2)
    }
    return {**labelled, "control": {"kubernetes.io/os": "linux"}}


def layer(name: str, parent: str = "", *keys: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"topologyLayer": name}
    if parent:
        spec["parentTopologyLayer"] = parent
    if keys:
        spec["labelKey"] = list(keys)
    return spec


def topology(
    *layers: dict[str, Any], name: str = "default", built: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """A ClusterNetworkTopology; its status shows the ``built`` layers (every one but the
    nodes' by default) as koord-scheduler's topology manager writes it."""
    names = [
        spec["topologyLayer"] for spec in layers if spec["topologyLayer"] != "NodeTopologyLayer"
    ]
    shown = names if built is None else list(built)
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": name},
        "spec": {"networkTopologySpec": list(layers)},
        "status": {
            "detailStatus": [
                {"topologyInfo": {"topologyLayer": shown_layer, "topologyName": "x"}, "nodeNum": 1}
                for shown_layer in shown
            ]
        },
    }


def racks_in_blocks(**kwargs: Any) -> dict[str, Any]:
    return topology(
        layer(BLOCK_LAYER, "", BLOCK),
        layer(RACK_LAYER, BLOCK_LAYER, RACK),
        layer("NodeTopologyLayer", RACK_LAYER),
        **kwargs,
    )


def racks_only(**kwargs: Any) -> dict[str, Any]:
    return topology(layer(RACK_LAYER, "", RACK), layer("NodeTopologyLayer", RACK_LAYER), **kwargs)


def test_the_rack_layer_groups_by_rack_and_the_block_layer_by_block() -> None:
    assert layer_grouping_by(RACK, [racks_in_blocks()], nodes()) == Layer(RACK_LAYER, True)
    assert layer_grouping_by(BLOCK, [racks_in_blocks()], nodes()) == Layer(BLOCK_LAYER, True)


def test_a_layer_not_in_the_status_is_found_but_not_built() -> None:
    unbuilt = racks_only(built=())
    assert layer_grouping_by(RACK, [unbuilt], nodes()) == Layer(RACK_LAYER, False)


def test_only_the_object_named_default_is_read() -> None:
    assert layer_grouping_by(RACK, [racks_only(name="racks")], nodes()) is None
    assert layer_grouping_by(RACK, [racks_only(name="racks"), racks_in_blocks()], nodes()) == (
        Layer(RACK_LAYER, True)
    )


def test_a_label_no_layer_lists_or_no_node_carries_names_no_layer() -> None:
    assert layer_grouping_by(BLOCK, [racks_only()], nodes()) is None
    assert layer_grouping_by(RACK, [racks_only()], {"control": {}}) is None
    assert layer_grouping_by(RACK, [], nodes()) is None


def test_the_nodes_own_layer_is_never_the_domain() -> None:
    by_host = topology(layer("NodeTopologyLayer", "", "kubernetes.io/hostname"))
    hosts = {"n": {"kubernetes.io/hostname": "n"}}
    assert layer_grouping_by("kubernetes.io/hostname", [by_host], hosts) is None


def test_a_layer_whose_earlier_key_names_some_nodes_domain_does_not_group_by_the_label() -> None:
    # koord-scheduler names a node's domain by the first listed key the node has a value for.
    row_first = topology(layer(RACK_LAYER, "", ROW, RACK), layer("NodeTopologyLayer", RACK_LAYER))
    assert layer_grouping_by(RACK, [row_first], nodes()) == Layer(RACK_LAYER, True)
    with_rows = {**nodes(), "b0-r0-0": {RACK: "rack-00", ROW: "row-0"}}
    assert layer_grouping_by(RACK, [row_first], with_rows) is None


def test_layers_that_do_not_chain_from_the_nodes_name_no_layer() -> None:
    # koord-scheduler builds no topology from these, and turns down every gang naming a layer.
    no_node_layer = topology(layer(RACK_LAYER, "", RACK))
    orphan = topology(
        layer(BLOCK_LAYER, "", BLOCK),
        layer(RACK_LAYER, "", RACK),
        layer("NodeTopologyLayer", RACK_LAYER),
    )
    for broken in (no_node_layer, orphan, topology()):
        assert layer_grouping_by(RACK, [broken], nodes()) is None


def test_hostile_objects_are_read_as_no_layer_not_fatal() -> None:
    hostile: list[Any] = [
        {},
        {"metadata": {"name": "default"}, "spec": {"networkTopologySpec": [None]}},
        {"metadata": {"name": "default"}, "spec": {"networkTopologySpec": [{"labelKey": 3}]}},
        {"metadata": "default", "spec": []},
    ]
    for obj in hostile:
        assert layer_grouping_by(RACK, [obj], nodes()) is None
    odd_status = racks_only()
    odd_status["status"] = {"detailStatus": [None, {"topologyInfo": []}]}
    assert layer_grouping_by(RACK, [odd_status], nodes()) == Layer(RACK_LAYER, False)


def rack_job(mode: str) -> MPIJobWrapper:
    return (
        MPIJobWrapper("pi", "ns")
        .uid("5f1c2a9e-0000-4000-8000-000000000001")
        .launcher(cpu="1")
        .workers(2, cpu="1")
        .scheduling_policy(topology={"key": RACK, "mode": mode})
    )


def facts_with(topologies: list[dict[str, Any]] | None) -> ClusterFacts:
    if topologies is None:
        return ClusterFacts()
    layout = ClusterLayout(nodes(), {CLUSTER_NETWORK_TOPOLOGY_RESOURCE.plural: topologies})
    return ClusterFacts(layout=layout)


def spec_of(pod: Mapping[str, Any]) -> Any:
    value = (pod["metadata"].get("annotations") or {}).get(NETWORK_TOPOLOGY_SPEC_ANNOTATION)
    return json.loads(value) if value is not None else None


@pytest.mark.parametrize("mode", [c.TOPOLOGY_REQUIRED, c.TOPOLOGY_PREFERRED])
def test_each_worker_gathers_in_the_layer_by_must_or_prefer(mode: str) -> None:
    job = rack_job(mode).job()
    facts = facts_with([racks_in_blocks()])
    worker = new_worker_pod(job, 1, facts, KoordinatorScheduler())
    text = yaml.safe_dump(worker, sort_keys=False)
    assert_matches_golden(f"gang/koordinator-network-topology-{mode.lower()}.yaml", text)
    strategy = "MustGather" if mode == c.TOPOLOGY_REQUIRED else "PreferGather"
    assert spec_of(worker) == {"gatherStrategy": [{"layer": RACK_LAYER, "strategy": strategy}]}
    # The affinity stays: it holds the domain under a koord-scheduler that ignores the rule.
    assert worker["spec"]["affinity"]["podAffinity"]


@pytest.mark.parametrize(
    "topologies",
    [[racks_only(built=())], [topology(layer(BLOCK_LAYER, "", BLOCK))], []],
    ids=["not-built", "no-rack-layer", "no-object"],
)
def test_without_a_built_layer_no_spec_and_the_job_is_told(
    topologies: list[dict[str, Any]],
) -> None:
    scheduler = KoordinatorScheduler()
    job = rack_job(c.TOPOLOGY_REQUIRED).job()
    facts = facts_with(topologies)
    worker = new_worker_pod(job, 0, facts, scheduler)
    assert spec_of(worker) is None
    assert worker["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    notice = scheduler.layout_notice(job, facts)
    assert notice is not None and notice.reason == REASON_NO_NETWORK_TOPOLOGY_LAYER
    assert f'"{RACK}"' in notice.message


def test_a_layer_not_yet_built_says_what_builds_it() -> None:
    notice = KoordinatorScheduler().layout_notice(
        rack_job(c.TOPOLOGY_REQUIRED).job(), facts_with([racks_only(built=())])
    )
    assert notice is not None
    assert f'"{RACK_LAYER}"' in notice.message
    assert "--enable-network-topology-manager" in notice.message


def test_an_unknown_layout_or_no_domain_gives_no_spec_and_no_notice() -> None:
    scheduler = KoordinatorScheduler()
    job = rack_job(c.TOPOLOGY_REQUIRED).job()
    assert spec_of(new_worker_pod(job, 0, facts_with(None), scheduler)) is None
    assert scheduler.layout_notice(job, facts_with(None)) is None
    plain = MPIJobWrapper("pi", "ns").workers(2).job()
    facts = facts_with([racks_only()])
    assert spec_of(new_worker_pod(plain, 0, facts, scheduler)) is None
    assert scheduler.layout_notice(plain, facts) is None


def test_the_koordinator_strategy_declares_its_layout() -> None:
    layout = cluster_layout_of(KoordinatorScheduler())
    assert layout is not None
    assert tuple(layout.layout_resources) == (CLUSTER_NETWORK_TOPOLOGY_RESOURCE,)


def test_the_job_is_told_once_when_its_workers_are_created_and_not_after() -> None:
    import dataclasses

    from mpi_operator.controller.plan import plan_sync
    from mpi_operator.testing.view import MemoryView
    from tests.unit.controller.test_plan import context, converge

    wrapper = MPIJobWrapper().workers(3).scheduling_policy(topology={"key": RACK})
    view = MemoryView()
    no_layer = dataclasses.replace(context("koord-scheduler"), facts=facts_with([]))
    created = plan_sync(wrapper.obj(), view, no_layer)
    assert [f"{a.verb} {a.resource}" for a in created.actions].count("create pods") == 3
    [notice] = [e for e in created.events if e.reason == REASON_NO_NETWORK_TOPOLOGY_LAYER]
    assert notice.type == "Warning"
    obj = converge(wrapper.obj(), view, no_layer)
    assert [e for e in plan_sync(obj, view, no_layer).events if e.type == "Warning"] == []


def test_the_layer_is_worked_out_once_per_layout() -> None:
    facts = facts_with([racks_only()])
    job = rack_job(c.TOPOLOGY_REQUIRED).job()
    assert facts.layout is not None
    new_worker_pod(job, 0, facts, KoordinatorScheduler())
    key = (CLUSTER_NETWORK_TOPOLOGY_RESOURCE.plural, RACK)
    assert facts.layout.derived == {key: Layer(RACK_LAYER, True)}
    facts.layout.derived[key] = Layer("Stale", True)
    stale = spec_of(new_worker_pod(job, 0, facts, KoordinatorScheduler()))
    assert stale["gatherStrategy"][0]["layer"] == "Stale"


def test_render_knows_no_layout_and_writes_no_rule() -> None:
    from mpi_operator import sdk

    objects = sdk.render(rack_job(c.TOPOLOGY_REQUIRED).obj(), gang_scheduling="koord-scheduler")
    workers = [o for o in objects if o["kind"] == "Pod"]
    assert len(workers) == 2
    assert [spec_of(pod) for pod in workers] == [None, None]
    assert all(pod["spec"]["affinity"]["podAffinity"] for pod in workers)
