"""One pod's effective requests (Kubernetes' rule) and the arithmetic behind minResources,
including kubeflow/mpi-operator's TestAddResources cases."""

from __future__ import annotations

from typing import Any

import pytest

from gang.pod_requests import add, container_requests, maximum, pod_requests, scaled
from mpi_operator.quantity import Quantity, format_resources
from mpi_operator.testing.wrappers import container, resources_container


def sidecar(name: str, **requests: str) -> dict[str, Any]:
    return resources_container(name, requests=requests, restart_policy="Always")


def amounts(**values: str) -> dict[str, Quantity]:
    return {name: Quantity.parse(raw) for name, raw in values.items()}


@pytest.mark.parametrize(
    ("pod_spec", "expected"),
    [
        ({"containers": [container()]}, {}),
        ({}, {}),
        (
            {"containers": [container("a", cpu="1", memory="1Gi"), container("b", cpu="2")]},
            {"cpu": "3", "memory": "1Gi"},
        ),
        (
            {
                "containers": [
                    resources_container(
                        requests={"cpu": "10", "memory": "16Gi"},
                        limits={"example.com/gpu": "8", "cpu": "20", "memory": "32Gi"},
                    )
                ]
            },
            {"cpu": "10", "example.com/gpu": "8", "memory": "16Gi"},
        ),
        (
            {
                "containers": [container(cpu="10", memory="20Gi")],
                "initContainers": [container("setup", cpu="100")],
            },
            {"cpu": "100", "memory": "20Gi"},
        ),
        (
            {
                "containers": [container(cpu="10", memory="20Gi")],
                "initContainers": [container("setup", cpu="1", memory="1Gi")],
            },
            {"cpu": "10", "memory": "20Gi"},
        ),
        (
            {
                "containers": [container(cpu="10")],
                "initContainers": [container("fetch", memory="8Gi"), container("warm", cpu="4")],
            },
            {"cpu": "10", "memory": "8Gi"},
        ),
        (
            {
                "containers": [container(cpu="2")],
                "initContainers": [sidecar("proxy", cpu="1", memory="1Gi")],
            },
            {"cpu": "3", "memory": "1Gi"},
        ),
        (
            {
                "containers": [container(cpu="2")],
                "initContainers": [sidecar("proxy", cpu="1"), container("setup", cpu="5")],
            },
            {"cpu": "6"},
        ),
        (
            {
                "containers": [container(cpu="2")],
                "initContainers": [container("setup", cpu="5"), sidecar("proxy", cpu="1")],
            },
            {"cpu": "5"},
        ),
        (
            {"containers": [container(cpu="1", memory="1Gi")], "overhead": {"cpu": "250m"}},
            {"cpu": "1250m", "memory": "1Gi"},
        ),
        (
            {
                "containers": [container(cpu="1", memory="1Gi", gpu="1")],
                "resources": {"requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"}},
            },
            {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"},
        ),
        (
            {
                "containers": [container(cpu="1")],
                "resources": {"limits": {"cpu": "4", "memory": "8Gi"}},
            },
            {"cpu": "1", "memory": "8Gi"},
        ),
        (
            {
                "containers": [container(cpu="1")],
                "resources": {"requests": {"hugepages-2Mi": "1Gi"}},
            },
            {"cpu": "1", "hugepages-2Mi": "1Gi"},
        ),
        (
            {"containers": [container(cpu="1")], "resources": {"requests": {"memory": "lots"}}},
            {"cpu": "1"},
        ),
    ],
    ids=[
        "a container without resources requests nothing",
        "an empty pod spec requests nothing",
        "app containers add up",
        "requests win and limits fill the gaps",
        "a larger init container dominates",
        "a smaller init container changes nothing",
        "the init phase peak is taken per resource",
        "a sidecar runs beside the app containers",
        "a sidecar also runs beside init containers that start after it",
        "an init container before a sidecar runs alone",
        "pod overhead is added",
        "pod-level requests replace cpu and memory, not extended resources",
        "a pod-level limit stands in only where no container asks",
        "pod-level hugepages are a pod-level resource",
        "a malformed pod-level quantity is left to the API server",
    ],
)
def test_pod_requests(pod_spec: dict[str, Any], expected: dict[str, str]) -> None:
    assert format_resources(pod_requests(pod_spec)) == expected


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (None, {}),
        ({}, {}),
        ({"requests": {"cpu": "1"}}, {"cpu": "1"}),
        ({"limits": {"cpu": "2"}}, {"cpu": "2"}),
        (
            {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}},
            {"cpu": "1", "memory": "1Gi"},
        ),
    ],
    ids=[
        "no resources field",
        "zero-value resources",
        "requests only",
        "limits only",
        "limits fill names without a request",
    ],
)
def test_container_requests(resources: dict[str, Any] | None, expected: dict[str, str]) -> None:
    spec: dict[str, Any] = {"name": "main"}
    if resources is not None:
        spec["resources"] = resources
    assert format_resources(container_requests(spec)) == expected


@pytest.mark.parametrize(
    ("total", "extra", "expected"),
    [
        ({}, {}, {}),
        ({}, amounts(cpu="20"), {"cpu": "20"}),
        (amounts(memory="20Gi"), amounts(memory="10Gi"), {"memory": "30Gi"}),
        (amounts(memory="1Gi"), amounts(memory="512Mi"), {"memory": "1536Mi"}),
        (amounts(cpu="0"), amounts(memory="1Gi", cpu="500m"), {"cpu": "500m", "memory": "1Gi"}),
    ],
    ids=[
        "nothing plus nothing stays empty",
        "adding a new name",
        "incrementing an existing name",
        "binary units add exactly",
        "a zero takes the added amount's format",
    ],
)
def test_add(
    total: dict[str, Quantity], extra: dict[str, Quantity], expected: dict[str, str]
) -> None:
    before = dict(total)
    assert format_resources(add(total, extra)) == expected
    assert total == before


def test_scaled_multiplies_every_amount() -> None:
    assert format_resources(scaled(amounts(cpu="500m", memory="1Gi"), 2)) == {
        "cpu": "1",
        "memory": "2Gi",
    }


def test_maximum_keeps_the_left_amount_on_a_tie() -> None:
    left, right = amounts(memory="1Gi"), amounts(memory="1073741824")
    assert maximum(left, right)["memory"] is left["memory"]
    assert format_resources(maximum(left, amounts(memory="2G"))) == {"memory": "2G"}
