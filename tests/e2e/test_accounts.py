"""No pod of an MPIJob runs under an account whose rights the operator lends, on a real API
server: a template naming a kubeflow.org/v1 launcher's account is refused by the CRD at
admission, and one naming the operator's own account, in the operator's namespace, by the
sync (the operator learns its account from the downward API, as its Deployment passes it)."""

from __future__ import annotations

import contextlib

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from .clusters import E2ECluster, wait_until
from .operator import (
    GROUP,
    OPERATOR_NAMESPACE,
    PLURAL,
    VERSION,
    OperatorProcess,
    create_mpijob,
    ensure_namespace,
    pods_of,
    settle,
    sim_job,
)
from .rbac import load_manifest

pytestmark = pytest.mark.e2e

WORKER_ACCOUNT = "spec.mpiReplicaSpecs[Worker].template.spec.serviceAccountName"


def test_the_api_server_refuses_a_template_naming_a_launchers_account(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    job = sim_job("borrower").pod_spec_field("Worker", "serviceAccountName", "victim-launcher")
    with pytest.raises(ApiException) as refused:
        create_mpijob(cluster, namespace, job.obj())
    assert refused.value.status == 422
    assert "kubeflow.org/v1 launchers" in str(refused.value.body)
    assert not pods_of(cluster, namespace, "borrower")


def validation_messages(cluster: E2ECluster, namespace: str, name: str) -> list[str]:
    events = cluster.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},involvedObject.kind=MPIJob"
    ).items
    return [e.message for e in events if e.reason == "ValidationError"]


def test_the_sync_refuses_a_template_naming_the_operators_account_in_its_namespace(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    account = load_manifest("service-account.yaml")["metadata"]["name"]
    ensure_namespace(cluster, OPERATOR_NAMESPACE)
    borrower = sim_job("borrower").pod_spec_field("Worker", "serviceAccountName", account)
    create_mpijob(cluster, OPERATOR_NAMESPACE, borrower.obj())
    # The same template elsewhere names another namespace's account of that name: it runs.
    create_mpijob(
        cluster,
        namespace,
        sim_job("elsewhere").pod_spec_field("Worker", "serviceAccountName", "default").obj(),
    )
    try:
        messages = wait_until(
            lambda: validation_messages(cluster, OPERATOR_NAMESPACE, "borrower"),
            60,
            message="no ValidationError event",
        )
        assert any(WORKER_ACCOUNT in m and "operator runs as this account" in m for m in messages)
        wait_until(lambda: len(pods_of(cluster, namespace, "elsewhere", "worker")) == 2, 60)
        settle()
        assert not pods_of(cluster, OPERATOR_NAMESPACE, "borrower")
    finally:
        with contextlib.suppress(ApiException):
            cluster.custom.delete_namespaced_custom_object(
                GROUP, VERSION, OPERATOR_NAMESPACE, PLURAL, "borrower", body=k8s.V1DeleteOptions()
            )
