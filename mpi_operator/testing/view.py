"""An in-memory cache view for sync-plan tests: objects in, the same lookups as the operator."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from gang import cluster_inputs_of, every_strategy, gang_resources_of
from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.controller.domain_room import REQUESTS, NodeLoad, node_loads, requests_of
from mpi_operator.controller.plan import Action
from mpi_operator.desired.kinds import CHILD_KINDS, POD


def _plurals_by_kind() -> dict[str, str]:
    """The plural of every kind a sync reads: the children's and each gang strategy's own
    objects and cluster inputs."""
    plurals = {kind.kind: kind.plural for kind in CHILD_KINDS}
    for strategy in every_strategy():
        plurals.update((r.kind, r.plural) for r in gang_resources_of(strategy))
        inputs = cluster_inputs_of(strategy)
        watched = inputs.watched_resources if inputs is not None else ()
        plurals.update((r.kind, r.plural) for r in watched)
    return plurals


_PLURALS = _plurals_by_kind()


class MemoryView:
    """Objects by (resource, namespace, name); ``apply`` plays the API server for a plan."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        for obj in objects:
            self.add(obj)

    def add(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.objects[(_PLURALS[obj["kind"]], meta.get("namespace", ""), meta["name"])] = obj

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((resource, namespace, name))

    def worker_pods(self, job: MPIJob) -> Sequence[dict[str, Any]]:
        selector = {
            c.LABEL_OPERATOR_NAME: c.OPERATOR_NAME,
            c.LABEL_JOB_NAME: job.name,
            c.LABEL_JOB_ROLE: c.ROLE_WORKER,
        }
        return [
            obj
            for (resource, namespace, _), obj in sorted(self.objects.items())
            if resource == POD.plural
            and namespace == job.namespace
            and selector.items() <= ((obj["metadata"].get("labels") or {}).items())
        ]

    def node_labels(self, name: str) -> Mapping[str, str] | None:
        node = self.objects.get(("nodes", "", name))
        return (node["metadata"].get("labels") or {}) if node is not None else None

    def node_loads(self) -> Sequence[NodeLoad] | None:
        """The nodes added, and the pods bound to them that have not finished, as the
        operator keeps them; None without any node."""
        nodes = [obj for (resource, _, _), obj in self.objects.items() if resource == "nodes"]
        if not nodes:
            return None
        bound = [
            {"spec": {"nodeName": spec["nodeName"]}, REQUESTS: requests_of(spec)}
            for (resource, _, _), obj in self.objects.items()
            if resource == POD.plural
            and (spec := obj.get("spec") or {}).get("nodeName")
            and (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        return node_loads(nodes, bound)

    def launcher_pods(self, launcher: dict[str, Any]) -> Sequence[dict[str, Any]]:
        uid = launcher["metadata"].get("uid")
        return [
            obj
            for (resource, _, _), obj in sorted(self.objects.items())
            if resource == POD.plural
            and uid
            and any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])
        ]

    def apply(self, actions: Sequence[Action]) -> None:
        """Apply writes as the API server would (status writes are ignored here)."""
        for action in actions:
            key = (action.resource, action.namespace, action.name)
            if action.verb == "delete":
                self.objects.pop(key, None)
            elif action.verb in ("create", "update") and action.body is not None:
                self.objects[key] = copy.deepcopy(action.body)
