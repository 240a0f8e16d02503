"""Pod templates checked against Kubernetes' own schema, and the API server's rules beyond it.

Every case of ``mpi_operator.testing.pod_rules`` is refused (or accepted) here by field path;
``tests/e2e/test_pod_rules.py`` shows a real API server gives the same verdict on each.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mpi_operator.api.errors import InvalidMPIJobError
from mpi_operator.desired.validation import load_valid_mpijob
from mpi_operator.field_errors import MAX_PROBLEMS, FieldError
from mpi_operator.pod_rules.schema import kubernetes_version, template_schema_errors
from mpi_operator.testing.pod_rules import ACCEPTED, REFUSED, PodRuleCase
from mpi_operator.testing.wrappers import MPIJobWrapper

ROOT = Path(__file__).resolve().parents[2]
WORKER_SPEC = "spec.mpiReplicaSpecs[Worker].template.spec"
LAUNCHER_TEMPLATE = "spec.mpiReplicaSpecs[Launcher].template"
CREATED = "t.metadata.creationTimestamp"
TIME_RULE = "must be a time such as 2006-01-02T15:04:05Z"


def job_with(case: PodRuleCase) -> dict[str, Any]:
    job = MPIJobWrapper().workers(2).obj()
    case.applied(job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"])
    return job


def problems(obj: dict[str, Any]) -> list[FieldError]:
    try:
        load_valid_mpijob(obj)
    except InvalidMPIJobError as error:
        return error.errors
    return []


@pytest.mark.parametrize("case", REFUSED, ids=lambda case: case.name)
def test_a_broken_pod_spec_is_refused_at_its_field(case: PodRuleCase) -> None:
    found = problems(job_with(case))
    assert f"{WORKER_SPEC}.{case.path}" in [error.path for error in found], found
    # Nothing else of the valid job is blamed.
    assert all(error.path.startswith(WORKER_SPEC) for error in found), found


@pytest.mark.parametrize("case", ACCEPTED, ids=lambda case: case.name)
def test_a_valid_pod_spec_is_accepted(case: PodRuleCase) -> None:
    assert problems(job_with(case)) == []


def test_one_problem_is_reported_once() -> None:
    """The schema's refusal of a field silences the hand-written rules about it."""
    job = MPIJobWrapper().workers(1).container_field("Worker", "name", 5).obj()
    assert [str(e) for e in problems(job)] == [
        f"{WORKER_SPEC}.containers[0].name: must be a string"
    ]


def schema_problems(template: object) -> list[str]:
    if isinstance(template, dict):
        # A pod spec needs containers; the cases are about the other fields.
        spec = template.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("containers", [{"name": "c"}])
    return [str(error) for error in template_schema_errors("t", template)]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        pytest.param(
            {"spec": {"containers": [{"name": "c", "image": None}]}}, [], id="null is absent"
        ),
        pytest.param(
            {"spec": {"containers": None}},
            ["t.spec.containers: is required"],
            id="null required list",
        ),
        pytest.param({"spec": {"containers": []}}, [], id="present"),
        pytest.param({"spec": {"priority": 1}}, [], id="an integer"),
        pytest.param(
            {"spec": {"containers": [None]}},
            ["t.spec.containers[0].name: is required"],
            id="null item",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": None}]}},
            ["t.spec.containers[0].name: is required"],
            id="null required",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "c", "args": [None]}]}}, [], id="null string item"
        ),
        pytest.param(
            {"spec": {"priority": 1.0}},
            ["t.spec.priority: must be an integer"],
            id="1.0 is no integer",
        ),
        pytest.param(
            {"spec": {"priority": True}},
            ["t.spec.priority: must be an integer"],
            id="a boolean is no integer",
        ),
        pytest.param({"spec": {"priority": 2**31 - 1}}, [], id="int32 top"),
        pytest.param(
            {"spec": {"priority": -(2**31) - 1}},
            ["t.spec.priority: must be between -2147483648 and 2147483647"],
            id="int32 overflow",
        ),
        pytest.param({"spec": {"activeDeadlineSeconds": 2**63 - 1}}, [], id="int64 top"),
        pytest.param(
            {"spec": {"hostNetwork": 1}}, ["t.spec.hostNetwork: must be true or false"], id="bool"
        ),
        pytest.param({"spec": {"overhead": {"cpu": 1.5, "memory": "1Gi"}}}, [], id="quantities"),
        pytest.param(
            {"spec": {"overhead": {"cpu": [1]}}},
            ["t.spec.overhead[cpu]: must be a string or a number"],
            id="quantity a list",
        ),
        pytest.param(
            {
                "spec": {
                    "containers": [{"name": "c", "livenessProbe": {"tcpSocket": {"port": 1.5}}}]
                }
            },
            ["t.spec.containers[0].livenessProbe.tcpSocket.port: must be an integer or a string"],
            id="int-or-string",
        ),
        pytest.param(
            {"metadata": {"creationTimestamp": "2024-02-29T23:59:59.5+01:00"}}, [], id="a time"
        ),
        pytest.param(
            {"metadata": {"creationTimestamp": "2023-02-29T00:00:00Z"}},
            [f'{CREATED}: invalid value "2023-02-29T00:00:00Z": {TIME_RULE}'],
            id="no such day",
        ),
        pytest.param(
            {"metadata": {"creationTimestamp": "yesterday"}},
            [f'{CREATED}: invalid value "yesterday": {TIME_RULE}'],
            id="not a time",
        ),
        pytest.param(
            {"spec": {"futureField": [1, {"x": None}], "containers": [{"name": "c", "Name": 1}]}},
            [
                "t.spec.futureField: unknown field",
                't.spec.containers[0].Name: unknown field; did you mean "name"?',
            ],
            id="unknown fields are named",
        ),
        pytest.param(
            {"metadata": {"labels": {"a": 1}}},
            ["t.metadata.labels[a]: must be a string"],
            id="map values",
        ),
        pytest.param("pod", ["t: must be an object"], id="not an object"),
    ],
)
def test_the_schema_is_read_as_the_api_server_decodes(
    template: object, expected: list[str]
) -> None:
    assert schema_problems(template) == expected


def test_a_template_gets_at_most_max_problems_schema_errors() -> None:
    job = MPIJobWrapper().workers(1).container_field("Worker", "args", list(range(1000))).obj()
    found = problems(job)
    assert len(found) == MAX_PROBLEMS
    assert found[-1].path == f"{WORKER_SPEC}.containers[0].args[{MAX_PROBLEMS - 1}]"


def test_the_issue_examples_name_their_fields() -> None:
    def launcher_env(env: object) -> list[str]:
        job = MPIJobWrapper().workers(1).container_field("Launcher", "env", env).obj()
        return [str(error) for error in problems(job)]

    env = f"{LAUNCHER_TEMPLATE}.spec.containers[0].env[0]"
    assert launcher_env([{"name": 1}]) == [f"{env}.name: must be a string"]
    assert launcher_env([1]) == [f"{env}: must be an object"]
    assert launcher_env([{"value": "x"}]) == [f"{env}.name: is required"]
    assert launcher_env([{"name": "A", "value": 5}]) == [f"{env}.value: must be a string"]


def test_the_schema_comes_from_the_clusters_kubernetes() -> None:
    versions = (ROOT / "hack" / "cluster" / "versions.env").read_text()
    assert f"K8S_VERSION={kubernetes_version()}\n" in versions


def test_the_committed_schema_is_what_make_generate_writes() -> None:
    """Regenerated from the pinned k8s.io/kubernetes module; fails while the file is stale."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "pod_template_schema.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
