"""The accounts a job's pods may not name: any job's v1 launcher account, the operator's own."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.validation import parse_mpijob
from mpi_operator.desired.validation import render_errors, validate
from mpi_operator.testing.wrappers import MPIJobWrapper

LAUNCHER_REASON = (
    "is reserved: accounts named <job>-launcher belong to kubeflow.org/v1 launchers and carry "
    "their exec rights"
)
OPERATOR_REASON = (
    "is reserved: the operator runs as this account, and its rights are not its jobs' to use"
)
TEMPLATE = "spec.mpiReplicaSpecs[{}].template.spec.{}"
OPERATOR = ("mpi-operator", "mpi-operator")


def errors_of(job: MPIJobWrapper) -> list[str]:
    return [str(error) for error in validate(parse_mpijob(job.obj()))]


def named(job: MPIJobWrapper, role: str, account: str, field: str) -> MPIJobWrapper:
    return job.pod_spec_field(role, field, account)


def v1(namespace: str = "ns") -> MPIJobWrapper:
    return MPIJobWrapper(namespace=namespace).workers(2).v1()


def v2(namespace: str = "ns") -> MPIJobWrapper:
    return MPIJobWrapper(namespace=namespace).workers(2)


Version = Callable[..., MPIJobWrapper]


REFUSED, ACCEPTED = True, False
ACCOUNT_FIELDS = ["serviceAccountName", "serviceAccount"]
LAUNCHER_ACCOUNT_CASES = [
    pytest.param(v1, "Worker", "other-launcher", REFUSED, id="v1 worker, another's launcher"),
    pytest.param(v1, "Worker", "test-launcher", REFUSED, id="v1 worker, its own launcher"),
    pytest.param(v2, "Launcher", "x-launcher", REFUSED, id="v2beta1 launcher"),
    pytest.param(v2, "Worker", "x-launcher", REFUSED, id="v2beta1 worker"),
    pytest.param(v2, "Launcher", "test-launcher", REFUSED, id="v2beta1, its name's launcher"),
    pytest.param(v1, "Launcher", "x-launcher", ACCEPTED, id="v1 launcher: replaced, ignored"),
    pytest.param(v1, "Launcher", "test-launcher", ACCEPTED, id="v1 launcher, its own"),
    pytest.param(v1, "Worker", "default", ACCEPTED, id="v1 worker default"),
    pytest.param(v1, "Launcher", "default", ACCEPTED, id="v1 launcher default"),
    pytest.param(v1, "Launcher", "flyte-exec", ACCEPTED, id="v1 launcher, Flyte's account"),
    pytest.param(v1, "Worker", "flyte-exec", ACCEPTED, id="v1 worker, Flyte's account"),
    pytest.param(v2, "Worker", "launcher", ACCEPTED, id="launcher without a job name"),
    pytest.param(v2, "Launcher", "launcher-bot", ACCEPTED, id="launcher as a prefix"),
    pytest.param(v2, "Launcher", "mpi-operator", ACCEPTED, id="operator's, unknown here"),
]
"""(job, role, account, refused): the CRD's rules refuse the same (test_crd.py)."""


@pytest.mark.parametrize("field", ACCOUNT_FIELDS)
@pytest.mark.parametrize(("job", "role", "account", "refused"), LAUNCHER_ACCOUNT_CASES)
def test_a_template_naming_a_launcher_account_is_refused_at_its_field(
    job: Version, role: str, account: str, refused: bool, field: str
) -> None:
    path = TEMPLATE.format(role, field)
    expected = [f'{path}: "{account}" {LAUNCHER_REASON}'] if refused else []
    assert errors_of(named(job(), role, account, field)) == expected


def test_both_account_fields_are_reported_each() -> None:
    job = (
        v2()
        .pod_spec_field("Worker", "serviceAccountName", "a-launcher")
        .pod_spec_field("Worker", "serviceAccount", "b-launcher")
    )
    assert [error.split(":")[0] for error in errors_of(job)] == [
        TEMPLATE.format("Worker", "serviceAccountName"),
        TEMPLATE.format("Worker", "serviceAccount"),
    ]


def operator_errors(job: MPIJobWrapper, account: tuple[str, str] | None) -> list[str]:
    facts = ClusterFacts(operator_account=account)
    return [str(error) for error in render_errors(job.defaulted(), facts, None)]


@pytest.mark.parametrize("field", ["serviceAccountName", "serviceAccount"])
@pytest.mark.parametrize(
    ("version", "role"),
    [(v2, "Launcher"), (v2, "Worker"), (v1, "Worker")],
    ids=["v2beta1 launcher", "v2beta1 worker", "v1 worker"],
)
def test_the_operators_account_is_refused_in_its_namespace(
    version: Version, role: str, field: str
) -> None:
    job = version("mpi-operator").pod_spec_field(role, field, "mpi-operator")
    path = TEMPLATE.format(role, field)
    assert operator_errors(job, OPERATOR) == [f'{path}: "mpi-operator" {OPERATOR_REASON}']


@pytest.mark.parametrize(
    ("job", "account"),
    [
        (v2("team-a"), OPERATOR),
        (v2("mpi-operator"), None),
        (v2("mpi-operator"), ("mpi-operator", "other")),
        (v1("mpi-operator"), OPERATOR),
    ],
    ids=[
        "another namespace: an account of the same name is another account",
        "the operator's account unknown",
        "another account of the operator's namespace",
        "v1 launcher: replaced by the operator, so ignored",
    ],
)
def test_the_operators_account_name_is_accepted_elsewhere(
    job: MPIJobWrapper, account: tuple[str, str] | None
) -> None:
    job.pod_spec_field("Launcher", "serviceAccountName", "mpi-operator")
    assert operator_errors(job, account) == []


def test_a_job_without_a_namespace_is_in_default() -> None:
    job = MPIJobWrapper().workers(1).metadata_field("namespace", None)
    job.pod_spec_field("Worker", "serviceAccountName", "runner")
    assert operator_errors(job, ("default", "runner")) == [
        f'{TEMPLATE.format("Worker", "serviceAccountName")}: "runner" {OPERATOR_REASON}'
    ]
