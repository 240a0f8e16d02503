"""Every pod-template rule of the operator against a real API server (server-side dry runs).

Each refused case of ``mpi_operator.testing.pod_rules`` is refused by ``render`` at its field,
and the API server refuses the pi example's worker Pod changed the same way (at the same field
when it validates rather than fails to decode). Each accepted case renders, and the API server
accepts every object rendered, so "accepted" means created.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest
from kubernetes.dynamic import DynamicClient

from mpi_operator.cli import main
from mpi_operator.testing.pod_rules import ACCEPTED, REFUSED, PodRuleCase

from .clusters import E2ECluster
from .dry_run import dry_run_create, pi_job, rendered, stdin

pytestmark = pytest.mark.e2e

ROLES = ("Launcher", "Worker")


@pytest.fixture
def dynamic(cluster: E2ECluster) -> DynamicClient:
    return DynamicClient(cluster.api)


def render_problems(job: dict[str, Any]) -> list[str]:
    err = io.StringIO()
    out = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out), stdin(json.dumps(job)):
        code = main(["render", "-f", "-"])
    assert code == 2, "render must refuse the job"
    return err.getvalue().splitlines()


def refused_fields(refusal: str) -> list[str]:
    """The fields a 422 names; empty for a refusal without causes (a decode error)."""
    body = json.loads(refusal.partition(": ")[2])
    return [cause.get("field", "") for cause in body.get("details", {}).get("causes", [])]


@pytest.mark.parametrize("case", REFUSED, ids=lambda case: case.name)
def test_what_render_refuses_the_api_server_refuses(
    dynamic: DynamicClient, namespace: str, case: PodRuleCase
) -> None:
    job = pi_job()
    case.applied(job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"])
    in_job = f"spec.mpiReplicaSpecs[Worker].template.spec.{case.path}: "
    assert any(line.startswith(in_job) for line in render_problems(job))

    pod = next(obj for obj in rendered() if obj["kind"] == "Pod")
    case.applied(pod["spec"])
    refusal = dry_run_create(dynamic, namespace, pod)
    assert refusal is not None, "the API server accepted it"
    assert refusal.startswith(("400", "422")), refusal
    if refusal.startswith("422"):
        # The same field, or (where Kubernetes names a list rather than its entry) one that
        # holds it.
        ours = f"spec.{case.path}"
        assert any(
            ours == field or ours.startswith((f"{field}.", f"{field}["))
            for field in refused_fields(refusal)
        ), refusal


@pytest.mark.parametrize("case", ACCEPTED, ids=lambda case: case.name)
def test_what_render_accepts_the_api_server_creates(
    dynamic: DynamicClient, namespace: str, case: PodRuleCase
) -> None:
    job = pi_job()
    for role in ROLES:
        case.applied(job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"])
    refused = [
        f"{obj['kind']} {obj['metadata']['name']}: {refusal[:600]}"
        for obj in rendered(job)
        if (refusal := dry_run_create(dynamic, namespace, obj)) is not None
    ]
    assert refused == []
