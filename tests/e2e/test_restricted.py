"""What the operator creates for a job that meets the restricted Pod Security Standard meets it
too: the API server's PodSecurity admission, enforcing `restricted` in the namespace, accepts
every worker Pod and the launcher's pod (server-side dry runs), for every pi example and gang
mode. The same jobs without their security contexts are refused, so the check has teeth."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes.dynamic import DynamicClient

from .clusters import REPO, E2ECluster
from .dry_run import dry_run_create, rendered

pytestmark = pytest.mark.e2e

EXAMPLES = [
    "examples/pi/pi.yaml",
    "examples/pi/pi-mpich.yaml",
    "examples/pi/pi-intel.yaml",
    "examples/gang/pi-scheduling-policy.yaml",
]
GANG_FLAGS = [[], ["--gang-scheduling", "volcano"], ["--gang-scheduling", "koord-scheduler"]]


@pytest.fixture
def dynamic(cluster: E2ECluster) -> DynamicClient:
    return DynamicClient(cluster.api)


@pytest.fixture
def restricted_namespace(cluster: E2ECluster, namespace_factory: Callable[..., str]) -> str:
    return namespace_factory(cluster, restricted=True)


def pods_of(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The worker Pods, and the pod the Job controller would make from the launcher Job."""
    pods = [obj for obj in objects if obj["kind"] == "Pod"]
    for job in (obj for obj in objects if obj["kind"] == "Job"):
        template = job["spec"]["template"]
        metadata = {**template.get("metadata", {}), "name": job["metadata"]["name"]}
        pods.append(
            {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
        )
    return pods


def example(path: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((REPO / path).read_text())
    return job


@pytest.mark.parametrize("flags", GANG_FLAGS, ids=lambda f: f[-1] if f else "no-gang")
@pytest.mark.parametrize("path", EXAMPLES)
def test_a_restricted_job_gets_restricted_pods(
    dynamic: DynamicClient, restricted_namespace: str, path: str, flags: list[str]
) -> None:
    pods = pods_of(rendered(example(path), *flags))
    assert len(pods) >= 2
    refused = [
        f"{pod['metadata']['name']}: {refusal[:400]}"
        for pod in pods
        if (refusal := dry_run_create(dynamic, restricted_namespace, pod)) is not None
    ]
    assert refused == []


def test_without_its_security_context_the_job_is_refused(
    dynamic: DynamicClient, restricted_namespace: str
) -> None:
    job = copy.deepcopy(example(EXAMPLES[0]))
    for spec in job["spec"]["mpiReplicaSpecs"].values():
        del spec["template"]["spec"]["containers"][0]["securityContext"]
    for pod in pods_of(rendered(job)):
        refusal = dry_run_create(dynamic, restricted_namespace, pod)
        assert refusal is not None and "violates PodSecurity" in refusal, refusal
