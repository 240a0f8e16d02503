"""Volcano's HyperNodes (``topology.volcano.sh/v1alpha1``): which tier of them groups the
cluster's nodes by a node label, so that a PodGroup can name that tier.

A HyperNode of tier 1 usually holds nodes (members of type Node, chosen by exact name, by a
regular expression on the name or by labels); one of a higher tier holds HyperNodes (by exact
name, the only selector vc-scheduler follows for them). A tier groups nodes by a label when its
HyperNodes split the nodes carrying the label exactly by the label's value: each HyperNode's
nodes share one value, no value is spread over two HyperNodes, and no node with the label is
left out. Anything less would make vc-scheduler's placement differ from the domain the job
asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

MEMBER_NODE: Final = "Node"
MEMBER_HYPER_NODE: Final = "HyperNode"

NodeLabels = Mapping[str, Mapping[str, str]]
"""Node name -> its labels."""


@dataclass(frozen=True)
class _HyperNode:
    name: str
    tier: int
    nodes: frozenset[str]
    children: tuple[str, ...]


def tier_grouping_by(
    key: str, hyper_nodes: Iterable[Mapping[str, Any]], nodes: NodeLabels
) -> int | None:
    """The lowest tier whose HyperNodes group ``nodes`` by the label ``key``; None when no
    tier does (no HyperNodes, a tier mixing values or splitting one, no node with the label)."""
    parsed = {hn.name: hn for hn in (_parse(obj, nodes) for obj in hyper_nodes) if hn}
    labelled = {name: labels[key] for name, labels in nodes.items() if key in labels}
    if not labelled:
        return None
    held = {name: _nodes_under(name, parsed, frozenset()) for name in parsed}
    for tier in sorted({hn.tier for hn in parsed.values()}):
        in_tier = [held[name] for name, hn in parsed.items() if hn.tier == tier]
        if _groups(in_tier, labelled, nodes.keys()):
            return tier
    return None


def _groups(
    hyper_nodes: Sequence[frozenset[str]], labelled: Mapping[str, str], known: Iterable[str]
) -> bool:
    """Whether these HyperNodes' node sets split the labelled nodes exactly by value."""
    seen_values: set[str] = set()
    covered: set[str] = set()
    known_nodes = set(known)
    for held in hyper_nodes:
        present = held & known_nodes
        if not present:
            continue
        values = {labelled.get(node) for node in present}
        if len(values) != 1:
            return False
        (value,) = values
        if value is None or value in seen_values:
            return False
        seen_values.add(value)
        covered |= present
    return covered == labelled.keys()


def _nodes_under(
    name: str, hyper_nodes: Mapping[str, _HyperNode], above: frozenset[str]
) -> frozenset[str]:
    """Every node a HyperNode holds, through its member HyperNodes (a cycle holds nothing
    more)."""
    hn = hyper_nodes.get(name)
    if hn is None or name in above:
        return frozenset()
    held = set(hn.nodes)
    for child in hn.children:
        held |= _nodes_under(child, hyper_nodes, above | {name})
    return frozenset(held)


def _parse(obj: Mapping[str, Any], nodes: NodeLabels) -> _HyperNode | None:
    metadata = obj.get("metadata")
    spec = obj.get("spec")
    if not isinstance(metadata, Mapping) or not isinstance(spec, Mapping):
        return None
    name, tier = metadata.get("name"), spec.get("tier")
    if not isinstance(name, str) or not isinstance(tier, int) or isinstance(tier, bool):
        return None
    held: set[str] = set()
    children: list[str] = []
    for member in spec.get("members") or []:
        if not isinstance(member, Mapping):
            continue
        selector = member.get("selector")
        if not isinstance(selector, Mapping):
            continue
        if member.get("type") == MEMBER_NODE:
            held |= _selected_nodes(selector, nodes)
        elif member.get("type") == MEMBER_HYPER_NODE:
            child = _exact_name(selector)
            if child:
                children.append(child)
    return _HyperNode(name, tier, frozenset(held), tuple(children))


def _selected_nodes(selector: Mapping[str, Any], nodes: NodeLabels) -> set[str]:
    """The nodes a Node member's selector picks, as vc-scheduler picks them."""
    exact = _exact_name(selector)
    if exact:
        return {exact}
    regex = selector.get("regexMatch")
    if isinstance(regex, Mapping):
        return _matching_names(regex.get("pattern"), nodes)
    label_match = selector.get("labelMatch")
    if isinstance(label_match, Mapping):
        return {name for name, labels in nodes.items() if _selects(label_match, labels)}
    return set()


def _exact_name(selector: Mapping[str, Any]) -> str:
    exact = selector.get("exactMatch")
    name = exact.get("name") if isinstance(exact, Mapping) else None
    return name if isinstance(name, str) else ""


def _matching_names(pattern: object, nodes: NodeLabels) -> set[str]:
    # Go's regexp.MatchString: a match anywhere in the name. A pattern that does not compile
    # selects nothing, as there. RE2 is the engine Go's regexp implements: the same syntax, and
    # time linear in the name, where Python's re can backtrack for ever on a pattern such as
    # (a+)+$. Imported here: only a regexMatch member needs it.
    import re2

    if not isinstance(pattern, str):
        return set()
    options = re2.Options()
    options.log_errors = False  # a bad pattern is an answer here, not a line on stderr
    try:
        compiled = re2.compile(pattern, options)
    except re2.error:
        return set()
    return {name for name in nodes if compiled.search(name)}


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector on a node's labels; an empty one selects nothing (as
    vc-scheduler reads a labelMatch)."""
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        return False
    if not match_labels and not expressions:
        return False
    if any(labels.get(key) != value for key, value in match_labels.items()):
        return False
    return all(_expression_holds(expression, labels) for expression in expressions)


def _expression_holds(expression: object, labels: Mapping[str, str]) -> bool:
    if not isinstance(expression, Mapping):
        return False
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        return False
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False
