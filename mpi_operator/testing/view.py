"""An in-memory cache view for sync-plan tests: objects in, the same lookups as the operator."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from mpi_operator.api import constants as c
from mpi_operator.api.v2beta1 import MPIJob
from mpi_operator.controller.plan import Action

_RESOURCES = {
    "Service": "services",
    "ConfigMap": "configmaps",
    "Secret": "secrets",
    "ServiceAccount": "serviceaccounts",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "Pod": "pods",
    "Job": "jobs",
    "PodGroup": "podgroups",
    "Queue": "queues",
}


class MemoryView:
    """Objects by (resource, namespace, name); ``apply`` plays the API server for a plan."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        for obj in objects:
            self.add(obj)

    def add(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.objects[(_RESOURCES[obj["kind"]], meta.get("namespace", ""), meta["name"])] = obj

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
            if resource == "pods"
            and namespace == job.namespace
            and selector.items() <= ((obj["metadata"].get("labels") or {}).items())
        ]

    def launcher_pods(self, launcher: dict[str, Any]) -> Sequence[dict[str, Any]]:
        uid = launcher["metadata"].get("uid")
        return [
            obj
            for (resource, _, _), obj in sorted(self.objects.items())
            if resource == "pods"
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
