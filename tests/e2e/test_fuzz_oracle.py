"""The fuzz suite's offline oracle against a real API server (server-side dry-run creates).

Both directions: objects the oracle passes, rendered from a fixed-seed sample of fuzz
examples, must all be accepted; objects it flags (valid ones with one known defect each) must
all be refused. A disagreement means ``make fuzz`` counts wrongly.
"""

from __future__ import annotations

import contextlib
import copy
import io
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from fuzz.harness import VALID, run_example
from fuzz.jobs import Example, examples
from fuzz.oracle import problems
from hypothesis import HealthCheck, given, settings
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from mpi_operator.cli import main

from .clusters import E2ECluster
from .dry_run import dry_run_create, rendered, stdin

pytestmark = pytest.mark.e2e

SAMPLE = 40
# Examples drawn for the sample: about half are refused or mutated out of validity.
DRAWN = 2 * SAMPLE
# The PodGroup kinds are not installed on the default cluster; the oracle's PodGroup rules
# are integer ranges and quantities, which the other kinds exercise too.
KINDS = ("Service", "ConfigMap", "Secret", "Pod", "Job")
PRIORITY_CLASSES = ("high", "low")


@pytest.fixture
def dynamic(cluster: E2ECluster) -> DynamicClient:
    return DynamicClient(cluster.api)


@pytest.fixture
def priority_classes(cluster: E2ECluster) -> Iterator[None]:
    """The classes the fuzz jobs name: without them admission, not validation, refuses."""
    scheduling = k8s.SchedulingV1Api(cluster.api)
    for name in PRIORITY_CLASSES:
        with contextlib.suppress(ApiException):
            scheduling.create_priority_class(
                k8s.V1PriorityClass(metadata=k8s.V1ObjectMeta(name=name), value=1)
            )
    yield
    for name in PRIORITY_CLASSES:
        with contextlib.suppress(ApiException):
            scheduling.delete_priority_class(name)


def rendered_sample() -> list[list[dict[str, Any]]]:
    """The objects of every example in a fixed-seed sample that render and pass the oracle."""
    renders: list[list[dict[str, Any]]] = []

    @settings(
        max_examples=DRAWN,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(examples())
    def collect(example: Example) -> None:
        if run_example(example, 30)[0].category != VALID:
            return
        out = io.StringIO()
        with contextlib.redirect_stdout(out), stdin(example.text):
            assert main(["render", "-f", "-", *example.flags()]) == 0
        renders.append([obj for obj in yaml.safe_load_all(out.getvalue()) if obj])

    collect()
    return renders


def test_what_the_oracle_passes_the_api_server_accepts(
    dynamic: DynamicClient, namespace: str, priority_classes: None
) -> None:
    renders = rendered_sample()
    assert len(renders) >= SAMPLE // 10, "the sample should hold valid jobs"
    refused = []
    for objects in renders:
        for obj in objects:
            if obj["kind"] not in KINDS:
                continue
            assert problems(obj) == []
            refusal = dry_run_create(dynamic, namespace, obj)
            if refusal is not None:
                refused.append(f"{obj['kind']} {obj['metadata']['name']}: {refusal[:600]}")
    assert refused == []


def _of_kind(kind: str) -> dict[str, Any]:
    return copy.deepcopy(next(obj for obj in rendered() if obj["kind"] == kind))


def _worker(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    pod = _of_kind("Pod")
    change(pod)
    return pod


def _container(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda pod: pod["spec"]["containers"][0].update(fields)


def _launcher(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    job = _of_kind("Job")
    change(job)
    return job


BROKEN: dict[str, Callable[[], dict[str, Any]]] = {
    "container name not a DNS label": lambda: _worker(_container(name="Main")),
    "empty image": lambda: _worker(_container(image="")),
    "request above limit": lambda: _worker(
        _container(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})
    ),
    "negative request": lambda: _worker(_container(resources={"requests": {"memory": "-1"}})),
    "malformed quantity": lambda: _worker(_container(resources={"requests": {"cpu": "lots"}})),
    "duplicate volume": lambda: _worker(
        lambda pod: pod["spec"]["volumes"].append(dict(pod["spec"]["volumes"][0]))
    ),
    "mount of a missing volume": lambda: _worker(
        lambda pod: pod["spec"]["containers"][0]["volumeMounts"].append(
            {"name": "nowhere", "mountPath": "/x"}
        )
    ),
    "duplicate mount path": lambda: _worker(
        lambda pod: pod["spec"]["containers"][0]["volumeMounts"].append(
            dict(pod["spec"]["containers"][0]["volumeMounts"][0])
        )
    ),
    "hostname not a DNS label": lambda: _worker(lambda pod: pod["spec"].update(hostname="a_b")),
    "label value with a space": lambda: _worker(
        lambda pod: pod["metadata"]["labels"].update(team="a b")
    ),
    "overhead without a RuntimeClass": lambda: _worker(
        lambda pod: pod["spec"].update(overhead={"cpu": "10m"})
    ),
    "33 DNS searches": lambda: _worker(
        lambda pod: pod["spec"]["dnsConfig"].update(searches=[f"s{i}.x" for i in range(33)])
    ),
    # On the Job: for a Pod, admission looks the class up (403) before validation runs.
    "priority class name with a space": lambda: _launcher(
        lambda job: job["spec"]["template"]["spec"].update(priorityClassName="my class")
    ),
    "backoffLimit beyond int32": lambda: _launcher(
        lambda job: job["spec"].update(backoffLimit=2**31)
    ),
    "Job pods restarting Always": lambda: _launcher(
        lambda job: job["spec"]["template"]["spec"].update(restartPolicy="Always")
    ),
    "Service name ending in a dash": lambda: _service_named("pi-"),
    "ConfigMap over 1 MiB": lambda: _big_config_map(),
}


REFUSED_BY_ADMISSION = {"overhead without a RuntimeClass"}


def _service_named(name: str) -> dict[str, Any]:
    service = _of_kind("Service")
    service["metadata"]["name"] = name
    return service


def _big_config_map() -> dict[str, Any]:
    config_map = _of_kind("ConfigMap")
    config_map["data"]["hostfile"] = "x" * (1024 * 1024 + 1)
    return config_map


@pytest.mark.parametrize("defect", list(BROKEN))
def test_what_the_oracle_flags_the_api_server_refuses(
    dynamic: DynamicClient, namespace: str, defect: str
) -> None:
    obj = BROKEN[defect]()
    assert problems(obj), "the oracle must flag it"
    refusal = dry_run_create(dynamic, namespace, obj)
    # Validation answers 422 or 400; an admission plugin's refusal is a 403.
    expected = ("403",) if defect in REFUSED_BY_ADMISSION else ("422", "400")
    assert refusal is not None and refusal.startswith(expected), refusal


def test_the_unbroken_objects_are_accepted(dynamic: DynamicClient, namespace: str) -> None:
    for obj in rendered():
        assert problems(obj) == []
        assert dry_run_create(dynamic, namespace, obj) is None
