"""The nodes' labels, for the hostfile's topology order: a worker's domain is its node's value
of the job's topology label (``schedulingPolicy.topology.key``)."""

from __future__ import annotations

import logging
from typing import Final

from mpi_operator.runtime.client import NODES, Client
from mpi_operator.runtime.informer import Informer
from mpi_operator.runtime.objects import Object

log = logging.getLogger(__name__)

INFORMER_NAME: Final = "topology-nodes"


def node_labels_only(node: Object) -> Object:
    """A node as the topology order reads it: its name and labels (and the version the cache
    keeps it by)."""
    metadata = node.get("metadata") or {}
    kept = {key: metadata[key] for key in ("name", "resourceVersion") if key in metadata}
    return {"metadata": {**kept, "labels": metadata.get("labels") or {}}}


def node_labels_informer(client: Client) -> Informer:
    """The nodes' labels. When RBAC refuses them it says so once and stops: workers are then
    listed by index, as without a domain."""
    return Informer.optional_for_resource(
        client,
        NODES,
        lost="the hostfile lists workers by index, not by network domain",
        name=INFORMER_NAME,
        transform=node_labels_only,
    )
