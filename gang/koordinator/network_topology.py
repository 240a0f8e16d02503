"""Koordinator's ClusterNetworkTopology (``scheduling.koordinator.sh/v1alpha1``): which of its
layers groups the cluster's nodes by a node label, so that a gang's network-topology-spec can
name that layer.

koord-scheduler reads only the object named ``default``. Its ``spec.networkTopologySpec`` lists
layers, each with a parent layer and the node label keys naming a node's domain in it (the first
key a node carries with a value); the layers must chain from ``NodeTopologyLayer`` up through
their parents, or the scheduler builds no topology at all and turns down every gang that names a
layer. Once it has built one (every 10 seconds, and only when started with
``--enable-network-topology-manager``), it lists the domains of each layer in the object's
``status.detailStatus``: a layer named there is one the scheduler can place a gang in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mpi_operator.api.cluster import NodeLabels

# The one object koord-scheduler v1.7.0 reads (pkg/scheduler/frameworkext/networktopology/
# tree_manager.go, defaultClusterNetworkTopologyName).
TOPOLOGY_NAME: Final = "default"
# Its built-in layer of single nodes, the bottom of every chain.
NODE_LAYER: Final = "NodeTopologyLayer"


@dataclass(frozen=True)
class Layer:
    """A layer grouping the nodes by the label, and whether koord-scheduler's status shows it
    built into the scheduler's topology."""

    name: str
    built: bool


@dataclass(frozen=True)
class _LayerSpec:
    name: str
    parent: str
    label_keys: tuple[str, ...]


def layer_grouping_by(
    key: str, topologies: Sequence[Mapping[str, Any]], nodes: NodeLabels
) -> Layer | None:
    """The layer nearest the nodes whose domains are the values of the label ``key``; None
    when there is none (no ``default`` object, layers that do not chain, a node whose domain in
    the layer is named by another of its keys, no node with the label)."""
    topology = next((t for t in topologies if _name(t) == TOPOLOGY_NAME), None)
    if topology is None:
        return None
    chain = _chain(topology.get("spec"))
    labelled = {name: labels for name, labels in nodes.items() if labels.get(key)}
    if not chain or not labelled:
        return None
    for layer in chain:
        if layer.name != NODE_LAYER and key in layer.label_keys and _named_by(key, layer, labelled):
            return Layer(layer.name, layer.name in _built_layers(topology))
    return None


def _named_by(key: str, layer: _LayerSpec, labelled: NodeLabels) -> bool:
    """Whether every labelled node's domain in ``layer`` is its value of ``key``: no key
    listed before it has a value on the node."""
    earlier = layer.label_keys[: layer.label_keys.index(key)]
    return not any(labels.get(other) for labels in labelled.values() for other in earlier)


def _chain(spec: object) -> list[_LayerSpec] | None:
    """The layers from ``NodeTopologyLayer`` up, as the scheduler orders them; None when they
    do not chain (it then builds no topology)."""
    entries = spec.get("networkTopologySpec") if isinstance(spec, Mapping) else None
    if not isinstance(entries, list) or not entries:
        return None
    layers = [_layer(entry) for entry in entries]
    if any(layer is None for layer in layers):
        return None
    by_name = {layer.name: layer for layer in layers if layer is not None}
    chain: list[_LayerSpec] = []
    current = by_name.get(NODE_LAYER)
    for _ in layers:
        if current is None:
            return None
        chain.append(current)
        current = by_name.get(current.parent)
    return chain


def _layer(entry: object) -> _LayerSpec | None:
    if not isinstance(entry, Mapping):
        return None
    name, parent = entry.get("topologyLayer"), entry.get("parentTopologyLayer", "")
    keys = entry.get("labelKey") or []
    if not isinstance(name, str) or not isinstance(parent, str) or not isinstance(keys, list):
        return None
    if not all(isinstance(k, str) for k in keys):
        return None
    return _LayerSpec(name, parent, tuple(keys))


def _built_layers(topology: Mapping[str, Any]) -> set[str]:
    status = topology.get("status")
    details = status.get("detailStatus") if isinstance(status, Mapping) else None
    built: set[str] = set()
    for detail in details if isinstance(details, list) else []:
        info = detail.get("topologyInfo") if isinstance(detail, Mapping) else None
        layer = info.get("topologyLayer") if isinstance(info, Mapping) else None
        if isinstance(layer, str):
            built.add(layer)
    return built


def _name(obj: Mapping[str, Any]) -> object:
    metadata = obj.get("metadata")
    return metadata.get("name") if isinstance(metadata, Mapping) else None
