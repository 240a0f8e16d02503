"""A sync of a job whose template names an account the operator must not lend: no writes, and
a ValidationError event naming the field."""

from __future__ import annotations

import dataclasses

import pytest

from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.controller.admission import AdmissionCache
from mpi_operator.controller.plan import SyncContext, plan_sync
from mpi_operator.testing.wrappers import MPIJobWrapper
from tests.unit.controller.test_plan import cluster_view, context, reasons, writes

OPERATOR = ("mpi-operator", "mpi-operator")


def with_operator(account: tuple[str, str] | None = OPERATOR) -> SyncContext:
    return dataclasses.replace(context(), facts=ClusterFacts(operator_account=account))


def naming(
    job: MPIJobWrapper, role: str, account: str, field: str = "serviceAccountName"
) -> MPIJobWrapper:
    return job.pod_spec_field(role, field, account)


@pytest.mark.parametrize(
    ("job", "path"),
    [
        (
            naming(MPIJobWrapper().v1().workers(2), "Worker", "other-launcher"),
            'spec.mpiReplicaSpecs[Worker].template.spec.serviceAccountName: "other-launcher"',
        ),
        (
            naming(MPIJobWrapper().workers(2), "Launcher", "x-launcher", "serviceAccount"),
            'spec.mpiReplicaSpecs[Launcher].template.spec.serviceAccount: "x-launcher"',
        ),
        (
            naming(MPIJobWrapper(namespace="mpi-operator").workers(2), "Worker", "mpi-operator"),
            'spec.mpiReplicaSpecs[Worker].template.spec.serviceAccountName: "mpi-operator"',
        ),
    ],
    ids=["v1 worker, another job's launcher", "v2beta1 launcher", "the operator's account"],
)
def test_a_job_naming_a_reserved_account_gets_a_validation_event_and_no_writes(
    job: MPIJobWrapper, path: str
) -> None:
    plan = plan_sync(job.obj(), cluster_view(), with_operator())
    assert plan.actions == []
    assert reasons(plan) == ["ValidationError"]
    assert plan.events[0].message.startswith(f"Found validation errors: {path} is reserved: ")


@pytest.mark.parametrize(
    ("job", "account"),
    [
        (naming(MPIJobWrapper().workers(2), "Worker", "mpi-operator"), OPERATOR),
        (
            naming(MPIJobWrapper(namespace="mpi-operator").workers(2), "Worker", "mpi-operator"),
            None,
        ),
        (naming(MPIJobWrapper().v1().workers(2), "Launcher", "x-launcher"), OPERATOR),
    ],
    ids=["another namespace", "the operator's account unknown", "v1 launcher, replaced"],
)
def test_other_jobs_are_created(job: MPIJobWrapper, account: tuple[str, str] | None) -> None:
    plan = plan_sync(job.obj(), cluster_view(), with_operator(account))
    assert reasons(plan) == ["MPIJobCreated"]
    [launcher] = [a.body for a in plan.actions if a.resource == "jobs"]
    assert launcher is not None
    expected = "test-launcher" if job.obj()["apiVersion"] == "kubeflow.org/v1" else None
    assert launcher["spec"]["template"]["spec"].get("serviceAccountName") == expected


def test_the_operators_account_learned_later_refuses_a_remembered_job() -> None:
    job = naming(MPIJobWrapper(namespace="mpi-operator").workers(2), "Worker", "mpi-operator")
    cache = AdmissionCache()
    unknown = dataclasses.replace(with_operator(None), admit=cache.admit)
    assert "create pods test-worker-0" in writes(plan_sync(job.obj(), cluster_view(), unknown))
    known = dataclasses.replace(unknown, facts=ClusterFacts(operator_account=OPERATOR))
    plan = plan_sync(job.obj(), cluster_view(), known)
    assert (plan.actions, reasons(plan)) == ([], ["ValidationError"])
