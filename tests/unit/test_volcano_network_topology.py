"""Volcano's own network-topology dialect: the HyperNode tier that groups the nodes by the job's
label, the PodGroup's spec.networkTopology naming it, and the Warning when no tier does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import pytest
import yaml
from golden import assert_matches_golden

from gang import cluster_layout_of
from gang.volcano import HYPER_NODE_RESOURCE, REASON_NO_HYPER_NODE_TIER, VolcanoScheduler
from gang.volcano.hypernodes import tier_grouping_by
from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts, ClusterLayout
from mpi_operator.testing.wrappers import MPIJobWrapper

RACK: Final = "example.com/rack"
BLOCK: Final = "example.com/block"


def nodes() -> dict[str, dict[str, str]]:
    """2 blocks x 2 racks x 2 nodes, named block-rack-n, plus a node without those labels."""
    labelled = {
        f"b{b}-r{r}-{n}": {BLOCK: f"block-{b}", RACK: f"rack-{b}{r}", "nic": f"{n}"}
        for b in range(2)
        for r in range(2)
        for n in range(2)
    }
    return {**labelled, "control": {"kubernetes.io/os": "linux"}}


def hyper_node(name: str, tier: int, *members: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": list(members)},
    }


def node_member(**selector: Any) -> dict[str, Any]:
    return {"type": "Node", "selector": selector}


def hyper_node_member(name: str) -> dict[str, Any]:
    return {"type": "HyperNode", "selector": {"exactMatch": {"name": name}}}


def racks_by_exact_name() -> list[dict[str, Any]]:
    return [
        hyper_node(
            f"rack-{b}{r}", 1, *(node_member(exactMatch={"name": f"b{b}-r{r}-{n}"}) for n in (0, 1))
        )
        for b in range(2)
        for r in range(2)
    ]


def racks_by_regex() -> list[dict[str, Any]]:
    return [
        hyper_node(f"rack-{b}{r}", 1, node_member(regexMatch={"pattern": f"^b{b}-r{r}-"}))
        for b in range(2)
        for r in range(2)
    ]


def racks_by_label() -> list[dict[str, Any]]:
    return [
        hyper_node(
            f"rack-{b}{r}", 1, node_member(labelMatch={"matchLabels": {RACK: f"rack-{b}{r}"}})
        )
        for b in range(2)
        for r in range(2)
    ]


def blocks_over(racks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        hyper_node(f"block-{b}", 2, *(hyper_node_member(f"rack-{b}{r}") for r in range(2)))
        for b in range(2)
    ]


@pytest.mark.parametrize(
    "racks", [racks_by_exact_name, racks_by_regex, racks_by_label], ids=["exact", "regex", "label"]
)
def test_the_rack_tier_groups_by_rack_and_the_block_tier_by_block(racks: Any) -> None:
    hyper_nodes = racks() + blocks_over(racks())
    assert tier_grouping_by(RACK, hyper_nodes, nodes()) == 1
    assert tier_grouping_by(BLOCK, hyper_nodes, nodes()) == 2


def test_a_label_selector_with_expressions_selects_as_kubernetes_does() -> None:
    racks = [
        hyper_node(
            f"rack-{b}{r}",
            1,
            node_member(
                labelMatch={
                    "matchExpressions": [
                        {"key": RACK, "operator": "In", "values": [f"rack-{b}{r}"]},
                        {"key": "nic", "operator": "Exists"},
                    ]
                }
            ),
        )
        for b in range(2)
        for r in range(2)
    ]
    assert tier_grouping_by(RACK, racks, nodes()) == 1


def test_a_tier_mixing_two_values_groups_nothing() -> None:
    # One HyperNode per position in the rack: each holds a node of every rack.
    by_position = [
        hyper_node(f"nic-{n}", 1, node_member(regexMatch={"pattern": f"-{n}$"})) for n in (0, 1)
    ]
    assert tier_grouping_by(RACK, by_position, nodes()) is None


def test_a_tier_splitting_one_value_does_not_group_by_it() -> None:
    # Racks group by rack, so they split every block over two HyperNodes.
    assert tier_grouping_by(BLOCK, racks_by_label(), nodes()) is None


def test_a_tier_leaving_labelled_nodes_out_does_not_group_by_it() -> None:
    assert tier_grouping_by(RACK, racks_by_label()[:3], nodes()) is None


def test_no_hyper_nodes_no_nodes_or_no_label_group_nothing() -> None:
    assert tier_grouping_by(RACK, [], nodes()) is None
    assert tier_grouping_by(RACK, racks_by_exact_name(), {}) is None
    assert tier_grouping_by("example.com/row", racks_by_label(), nodes()) is None


def test_hostile_hyper_nodes_are_skipped_not_fatal() -> None:
    hostile: list[Any] = [
        {},
        {"metadata": {"name": "x"}, "spec": {"tier": "1", "members": [None]}},
        hyper_node("bad-regex", 1, node_member(regexMatch={"pattern": "("})),
        hyper_node("empty-label", 1, node_member(labelMatch={})),
        hyper_node("cycle-a", 3, hyper_node_member("cycle-b")),
        hyper_node("cycle-b", 3, hyper_node_member("cycle-a")),
    ]
    assert tier_grouping_by(RACK, hostile + racks_by_label(), nodes()) == 1


def test_a_regex_member_is_read_as_go_reads_it_in_time_linear_in_the_name() -> None:
    # Go's regexp (RE2) has no lookahead: vc-scheduler cannot compile this pattern, so it
    # selects no node, although Python's re would select both of rack 00's.
    lookahead = [hyper_node("r", 1, node_member(regexMatch={"pattern": "^b0-(?=r0)"}))]
    assert tier_grouping_by(RACK, lookahead, nodes()) is None
    # A pattern that makes a backtracking engine take 2^40 steps on this name, answered at once.
    long_name = {"a" * 40 + "!": {RACK: "rack-x"}}
    nested = [hyper_node("x", 1, node_member(regexMatch={"pattern": "^(a+)+$"}))]
    assert tier_grouping_by(RACK, nested, long_name) is None
    spelled = [hyper_node("x", 1, node_member(regexMatch={"pattern": "^(a+)+!$"}))]
    assert tier_grouping_by(RACK, spelled, long_name) == 1


def rack_job(mode: str) -> MPIJobWrapper:
    return (
        MPIJobWrapper("pi", "ns")
        .launcher(cpu="1")
        .workers(2, cpu="1")
        .scheduling_policy(topology={"key": RACK, "mode": mode})
    )


def facts_with(hyper_nodes: list[dict[str, Any]] | None) -> ClusterFacts:
    if hyper_nodes is None:
        return ClusterFacts()
    layout = ClusterLayout(nodes(), {HYPER_NODE_RESOURCE.plural: hyper_nodes})
    return ClusterFacts(layout=layout)


def network_topology(pod_group: Mapping[str, Any]) -> Any:
    return pod_group["spec"].get("networkTopology")


@pytest.mark.parametrize("mode", [c.TOPOLOGY_REQUIRED, c.TOPOLOGY_PREFERRED])
def test_the_pod_group_names_the_tier_hard_or_soft(mode: str) -> None:
    pod_group = VolcanoScheduler().pod_group(rack_job(mode).job(), facts_with(racks_by_label()))
    text = yaml.safe_dump(pod_group, sort_keys=False)
    assert_matches_golden(f"gang/volcano-network-topology-{mode.lower()}.yaml", text)
    expected = "hard" if mode == c.TOPOLOGY_REQUIRED else "soft"
    assert network_topology(pod_group) == {"mode": expected, "highestTierAllowed": 1}


def test_without_a_tier_the_pod_group_has_no_network_topology_and_the_job_is_told() -> None:
    scheduler = VolcanoScheduler()
    job = rack_job(c.TOPOLOGY_REQUIRED).job()
    facts = facts_with(racks_by_label()[:3])
    assert network_topology(scheduler.pod_group(job, facts)) is None
    notice = scheduler.layout_notice(job, facts)
    assert notice is not None and notice.reason == REASON_NO_HYPER_NODE_TIER
    assert f'"{RACK}"' in notice.message


def test_an_unknown_layout_gives_no_network_topology_and_no_notice() -> None:
    # The HyperNode CRD not served, or an operator watching one namespace: nothing to say.
    scheduler = VolcanoScheduler()
    job = rack_job(c.TOPOLOGY_REQUIRED).job()
    assert network_topology(scheduler.pod_group(job, facts_with(None))) is None
    assert scheduler.layout_notice(job, facts_with(None)) is None


def test_a_job_without_a_domain_gets_neither() -> None:
    scheduler = VolcanoScheduler()
    job = MPIJobWrapper("pi", "ns").workers(2).job()
    facts = facts_with(racks_by_label())
    assert network_topology(scheduler.pod_group(job, facts)) is None
    assert scheduler.layout_notice(job, facts) is None


def test_the_volcano_strategy_declares_its_layout_and_others_do_not() -> None:
    from gang.coscheduling import CoschedulingScheduler

    layout = cluster_layout_of(VolcanoScheduler())
    assert layout is not None and tuple(layout.layout_resources) == (HYPER_NODE_RESOURCE,)
    assert cluster_layout_of(CoschedulingScheduler("scheduler-plugins-scheduler")) is None


def test_a_network_topology_change_updates_the_pod_group() -> None:
    scheduler = VolcanoScheduler()
    job = rack_job(c.TOPOLOGY_REQUIRED).job()
    without = scheduler.pod_group(job, facts_with([]))
    with_tier = scheduler.pod_group(job, facts_with(racks_by_label()))
    assert scheduler.needs_update(without, with_tier)
    assert not scheduler.needs_update(
        with_tier, scheduler.pod_group(job, facts_with(racks_by_regex()))
    )


def test_the_job_is_told_with_each_write_of_its_pod_group_and_not_in_between() -> None:
    import dataclasses

    from mpi_operator.controller.plan import plan_sync
    from mpi_operator.testing.view import MemoryView
    from tests.unit.controller.test_plan import context, converge

    wrapper = MPIJobWrapper().workers(2).scheduling_policy(topology={"key": RACK})
    view = MemoryView()
    no_tier = dataclasses.replace(context("volcano"), facts=facts_with(racks_by_label()[:3]))
    created = plan_sync(wrapper.obj(), view, no_tier)
    assert "create podgroups" in [f"{a.verb} {a.resource}" for a in created.actions]
    [notice] = [e for e in created.events if e.reason == REASON_NO_HYPER_NODE_TIER]
    assert notice.type == "Warning"
    obj = converge(wrapper.obj(), view, no_tier)
    assert [e for e in plan_sync(obj, view, no_tier).events if e.type == "Warning"] == []
    with_tier = dataclasses.replace(no_tier, facts=facts_with(racks_by_label()))
    updated = plan_sync(obj, view, with_tier)
    [update] = [a for a in updated.actions if a.resource == "podgroups"]
    assert update.verb == "update" and update.body is not None
    assert network_topology(update.body) == {"mode": "hard", "highestTierAllowed": 1}
    assert REASON_NO_HYPER_NODE_TIER not in [e.reason for e in updated.events]


def test_the_tier_is_worked_out_once_per_layout() -> None:
    facts = facts_with(racks_by_label())
    job = rack_job(c.TOPOLOGY_REQUIRED).job()
    assert facts.layout is not None
    VolcanoScheduler().pod_group(job, facts)
    assert facts.layout.derived == {("hypernodes", RACK): 1}
    # A stale answer kept with the layout is what the next sync reads, until the layout changes.
    facts.layout.derived[("hypernodes", RACK)] = 7
    assert network_topology(VolcanoScheduler().pod_group(job, facts))["highestTierAllowed"] == 7
