"""What one pod asks the scheduler for, by Kubernetes' own rule, and arithmetic on such amounts.

A gang is admitted on the resources its pods will really request, so the rule here is the
one kube-scheduler applies to a pod (``PodRequests`` in k8s.io/component-helpers): per
resource, the larger of the app containers' sum and the peak of the init phase, then the
pod overhead on top. Restartable init containers (sidecars) keep running beside the app
containers and beside every init container that starts after them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mpi_operator.quantity import InvalidQuantityError, Quantity

Amounts = dict[str, Quantity]

# Resources a pod may request as a whole (the PodLevelResources feature); for these, a
# pod-level request replaces the containers' aggregate.
_POD_LEVEL_RESOURCES: Final = frozenset({"cpu", "memory"})
_POD_LEVEL_PREFIXES: Final = ("hugepages-",)
_SIDECAR_RESTART_POLICY: Final = "Always"


def pod_requests(pod_spec: Mapping[str, Any]) -> Amounts:
    """The effective requests of one pod of this spec, as the scheduler accounts them."""
    running: Amounts = {}
    for container in _items(pod_spec.get("containers")):
        running = add(running, container_requests(container))
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for container in _items(pod_spec.get("initContainers")):
        own = container_requests(container)
        if container.get("restartPolicy") == _SIDECAR_RESTART_POLICY:
            running = add(running, own)
            sidecars = add(sidecars, own)
            in_use = sidecars
        else:
            in_use = add(own, sidecars)
        init_peak = maximum(init_peak, in_use)
    requests = maximum(running, init_peak)
    requests = _apply_pod_level(requests, pod_spec.get("resources"))
    return add(requests, _amounts(pod_spec.get("overhead")))


def container_requests(container: Mapping[str, Any]) -> Amounts:
    """Per resource, the container's request, else its limit (the API server's defaulting)."""
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return {}
    return {**_amounts(resources.get("limits")), **_amounts(resources.get("requests"))}


def add(left: Mapping[str, Quantity], right: Mapping[str, Quantity]) -> Amounts:
    total = dict(left)
    for name, amount in right.items():
        existing = total.get(name)
        # A zero takes the other side's format, so 0 + 1Gi prints as 1Gi (as in Go).
        if existing is None or existing.value == 0:
            total[name] = amount
        else:
            total[name] = existing + amount
    return total


def scaled(amounts: Mapping[str, Quantity], factor: int) -> Amounts:
    return {name: amount.times(factor) for name, amount in amounts.items()}


def maximum(left: Mapping[str, Quantity], right: Mapping[str, Quantity]) -> Amounts:
    """Per resource, the larger amount; on a tie the left one (and its format) stays."""
    result = dict(left)
    for name, amount in right.items():
        if name not in result or amount.value > result[name].value:
            result[name] = amount
    return result


def _apply_pod_level(requests: Amounts, pod_resources: object) -> Amounts:
    if not isinstance(pod_resources, Mapping):
        return requests
    pod_level = {
        name: amount
        for name, amount in _amounts(pod_resources.get("requests")).items()
        if _is_pod_level(name)
    }
    # A pod-level limit without a request becomes the request only when no container
    # requests that resource; otherwise the API server defaults it to the containers' sum.
    for name, amount in _amounts(pod_resources.get("limits")).items():
        if _is_pod_level(name) and name not in pod_level and name not in requests:
            pod_level[name] = amount
    return {**requests, **pod_level}


def _is_pod_level(name: str) -> bool:
    return name in _POD_LEVEL_RESOURCES or name.startswith(_POD_LEVEL_PREFIXES)


def _amounts(resources: object) -> Amounts:
    if not isinstance(resources, Mapping):
        return {}
    amounts: Amounts = {}
    for name, raw in resources.items():
        try:
            amounts[str(name)] = Quantity.parse(raw)
        except InvalidQuantityError:
            # Validation reports malformed container quantities; anything else the API
            # server rejects when the pod is created, which names the field. The gang's
            # size must not fail first with a less helpful error.
            continue
    return amounts


def _items(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]
