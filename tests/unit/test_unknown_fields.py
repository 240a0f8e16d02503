"""A field nothing declares is refused by field path, with the nearest known name, by `render`,
the SDK, the operator's admission and the CRD (strict field validation) alike: the API server
would otherwise drop it, and the job would run without it."""

from __future__ import annotations

import copy
import io
import sys
from typing import Any

import pytest
import yaml

from mpi_operator import sdk
from mpi_operator.api import crd
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.cli import main
from mpi_operator.controller.admission import admit
from mpi_operator.testing.wrappers import MPIJobWrapper
from tests.unit.test_crd import admission_errors

LAUNCHER = "spec.mpiReplicaSpecs[Launcher]"
WORKER = "spec.mpiReplicaSpecs[Worker]"
LAUNCHER_POD = f"{LAUNCHER}.template.spec"
WORKER_POD = f"{WORKER}.template.spec"

# (where the field goes, its name, its value, the suggestion or None)
CASES: list[tuple[str, str, Any, str | None]] = [
    ("spec", "slotPerWorker", 1, "slotsPerWorker"),
    ("spec", "slots_per_worker", 1, "slotsPerWorker"),
    ("spec", "mpiImplementaton", "MPICH", "mpiImplementation"),
    ("spec.runPolicy", "ttlSecondAfterFinished", 60, "ttlSecondsAfterFinished"),
    ("spec.runPolicy.schedulingPolicy", "minAvaliable", 1, "minAvailable"),
    (WORKER, "replica", 2, "replicas"),
    (f"{LAUNCHER_POD}.containers[0]", "comand", ["mpirun"], "command"),
    (f"{WORKER_POD}.containers[0]", "resource", {"limits": {"nvidia.com/gpu": 8}}, "resources"),
    (f"{WORKER_POD}.containers[0].resources", "limit", {"cpu": 1}, "limits"),
    (f"{WORKER_POD}", "nodeSelecter", {"disk": "ssd"}, "nodeSelector"),
    (f"{WORKER}.template.metadata", "label", {"team": "a"}, "labels"),
    (f"{WORKER}.template", "specs", {}, "spec"),
    (f"{WORKER_POD}.volumes[0]", "emptydir", {}, "emptyDir"),
    (f"{WORKER_POD}.containers[0].livenessProbe.exec", "comand", ["true"], "command"),
    (f"{WORKER_POD}.securityContext", "runAsUsr", 1000, "runAsUser"),
    ("spec", "frobnicate", True, None),
]


def job(api_version: str) -> dict[str, Any]:
    wrapper = MPIJobWrapper("typo").workers(2)
    if api_version == "v1":
        wrapper = wrapper.v1()
    obj = wrapper.obj()
    spec = obj["spec"]
    spec["runPolicy"] = {"schedulingPolicy": {}}
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]
    worker["metadata"] = {}
    pod = worker["spec"]
    pod["securityContext"] = {}
    pod["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    pod["containers"][0]["resources"] = {}
    pod["containers"][0]["livenessProbe"] = {"exec": {"command": ["true"]}}
    return obj


def with_field(api_version: str, where: str, name: str, value: Any) -> dict[str, Any]:
    obj = job(api_version)
    target: Any = obj
    for part in where.replace("[", ".").replace("]", "").split("."):
        target = target[int(part)] if part.isdigit() else target[part]
    target[name] = copy.deepcopy(value)
    return obj


def refusal(where: str, name: str, suggestion: str | None) -> str:
    hint = f'; did you mean "{suggestion}"?' if suggestion else ""
    return f"{where}.{name}: unknown field{hint}"


PARAMS = [
    pytest.param(version, *case, id=f"{version}-{case[0].rsplit('.', 1)[-1]}.{case[1]}")
    for version in ("v2beta1", "v1")
    for case in CASES
]


@pytest.mark.parametrize(("version", "where", "name", "value", "suggestion"), PARAMS)
def test_render_refuses_with_a_suggestion(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    version: str,
    where: str,
    name: str,
    value: Any,
    suggestion: str | None,
) -> None:
    text = yaml.safe_dump(with_field(version, where, name, value))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert main(["render", "-f", "-"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", refusal(where, name, suggestion) + "\n")


@pytest.mark.parametrize(("version", "where", "name", "value", "suggestion"), PARAMS)
def test_the_sdk_refuses_with_a_suggestion(
    version: str, where: str, name: str, value: Any, suggestion: str | None
) -> None:
    errors = sdk.validate(with_field(version, where, name, value))
    assert [str(error) for error in errors] == [refusal(where, name, suggestion)]


@pytest.mark.parametrize(("version", "where", "name", "value", "suggestion"), PARAMS)
def test_the_operator_refuses_with_a_suggestion(
    version: str, where: str, name: str, value: Any, suggestion: str | None
) -> None:
    obj = with_field(version, where, name, value)
    obj["metadata"].update(namespace="default", uid="u", resourceVersion="1")
    admission = admit(obj, ClusterFacts(), None)
    assert admission.job is None
    assert [str(error) for error in admission.errors] == [refusal(where, name, suggestion)]


@pytest.mark.parametrize(("version", "where", "name", "value", "suggestion"), PARAMS)
def test_the_crd_refuses_naming_the_field(
    version: str, where: str, name: str, value: Any, suggestion: str | None
) -> None:
    obj = with_field(version, where, name, value)
    assert admission_errors(crd.openapi_schema(version), obj) == [f'unknown field "{where}.{name}"']


@pytest.mark.parametrize("version", ["v2beta1", "v1"])
def test_the_job_without_typos_passes_everywhere(version: str) -> None:
    obj = job(version)
    assert sdk.validate(obj) == []
    assert admission_errors(crd.openapi_schema(version), obj) == []
