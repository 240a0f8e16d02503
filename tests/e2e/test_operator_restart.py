"""Operators started with their own settings: one killed while it creates a job's pods and
its successor, one with a custom cluster domain, two electing a leader, and one whose Lease
namespace does not exist yet, on a real cluster.

Its own module: no other operator may run meanwhile, or it would act on the jobs too.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from kubernetes.client.exceptions import NotFoundException

from mpi_operator.sdk import NotFoundError

from .clusters import E2ECluster, wait_until
from .operator import (
    OperatorProcess,
    condition,
    create_mpijob,
    ensure_namespace,
    get_mpijob,
    pods_of,
    settle,
    sim_job,
    wait_for_condition,
)
from .test_v1 import create

pytestmark = pytest.mark.e2e


def test_a_restart_in_the_middle_of_creating_a_job_leaves_no_duplicates(
    cluster: E2ECluster, namespace: str, tmp_path: Path
) -> None:
    first = OperatorProcess(cluster, tmp_path, name="first", extra_args=["--leader-elect=false"])
    first.start()
    create_mpijob(cluster, namespace, sim_job("restart", workers=8).obj())
    wait_until(lambda: pods_of(cluster, namespace, "restart"), 60, message="first pods")
    first.stop(signal.SIGKILL)
    second = OperatorProcess(
        cluster, tmp_path, name="second", extra_args=["--leader-elect=false"]
    ).start()
    try:
        wait_for_condition(cluster, namespace, "restart", "Succeeded", operator=second)
        workers = pods_of(cluster, namespace, "restart", "worker")
        assert sorted(p.metadata.name for p in workers) == [f"restart-worker-{i}" for i in range(8)]
        jobs = cluster.batch.list_namespaced_job(namespace).items
        assert [j.metadata.name for j in jobs] == ["restart-launcher"]
    finally:
        assert second.stop() == 0, second.log_tail()


def test_a_custom_cluster_domain_reaches_the_hostfile_and_the_workers_dns(
    cluster: E2ECluster, namespace: str, tmp_path: Path
) -> None:
    flags = ["--leader-elect=false", "--cluster-domain=cluster.example"]
    operator = OperatorProcess(cluster, tmp_path, name="domain", extra_args=flags).start()
    try:
        create_mpijob(cluster, namespace, sim_job("dom").obj())
        wait_for_condition(cluster, namespace, "dom", "Succeeded", operator=operator)
        config = cluster.core.read_namespaced_config_map("dom-config", namespace).data
        assert f"dom-worker-0.dom.{namespace}.svc.cluster.example slots=1" in config["hostfile"]
        worker = cluster.core.read_namespaced_pod("dom-worker-0", namespace)
        assert f"dom.{namespace}.svc.cluster.example" in worker.spec.dns_config.searches
    finally:
        assert operator.stop() == 0, operator.log_tail()


def test_only_the_leader_reconciles_and_a_standby_takes_over_when_it_stops(
    cluster: E2ECluster, namespace: str, tmp_path: Path
) -> None:
    first = OperatorProcess(cluster, tmp_path, name="first").start()
    second = OperatorProcess(cluster, tmp_path, name="second").start()
    try:
        leaders = [p.metric("mpi_operator_is_leader") for p in (first, second)]
        assert sorted(leaders) == [0, 1], leaders  # type: ignore[type-var]
        leader, standby = (first, second) if leaders[0] == 1 else (second, first)
        create_mpijob(cluster, namespace, sim_job("before").obj())
        wait_for_condition(cluster, namespace, "before", "Succeeded", operator=leader)
        assert leader.stop() == 0, leader.log_tail()
        # A clean stop hands the Lease back, so the standby need not wait for it to expire.
        wait_until(lambda: standby.metric("mpi_operator_is_leader") == 1, 30, message="takeover")
        create_mpijob(cluster, namespace, sim_job("after").obj())
        wait_for_condition(cluster, namespace, "after", "Succeeded", operator=standby)
    finally:
        for process in (first, second):
            process.stop()


def test_a_missing_lease_namespace_is_an_error_with_the_fix_and_keeps_the_operator_unready(
    cluster: E2ECluster, namespace: str, tmp_path: Path
) -> None:
    lock_namespace = f"no-lock-{uuid.uuid4().hex[:6]}"
    # The admin's credentials, as in the README's local run: the shipped Lease Role is bound in
    # the lock namespace alone, so with the shipped ServiceAccount a namespace that does not
    # exist (and can hold no binding) answers 403 before it could answer 404.
    operator = OperatorProcess(
        cluster,
        tmp_path,
        kubeconfig=Path(cluster.kubeconfig),
        extra_args=[f"--lock-namespace={lock_namespace}"],
    )
    operator.start(wait_ready=False)
    try:

        def errors() -> list[str]:
            tail = operator.log_tail(400).splitlines()
            lines = [json.loads(line) for line in tail if line.startswith("{")]
            return [line["msg"] for line in lines if line.get("level") == "error"]

        wait_until(lambda: errors(), 60, message=f"an error line (log: {operator.log_path})")
        assert any(
            f"namespace {lock_namespace} does not exist" in msg and "--lock-namespace" in msg
            for msg in errors()
        ), errors()
        url = f"http://127.0.0.1:{operator.health_port}/readyz"

        def readyz() -> tuple[int, str] | None:
            """The probe's answer; None until its server listens, which it does only after
            the first attempt at the Lease, the one that logged the error."""
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    return answer.status, answer.read().decode()
            except urllib.error.HTTPError as answer:
                return answer.code, answer.read().decode()
            except urllib.error.URLError:
                return None

        code, body = wait_until(readyz, 30, message=f"{url} to answer")
        assert code == 500, body
        assert "[-]leaseNamespace failed" in body
        create_mpijob(cluster, namespace, sim_job("waits").obj())

        ensure_namespace(cluster, lock_namespace)
        operator.wait_ready()
        wait_for_condition(cluster, namespace, "waits", "Succeeded", operator=operator)
    finally:
        assert operator.stop() == 0, operator.log_tail()
        # A failure before the namespace was made leaves nothing to delete.
        with contextlib.suppress(NotFoundException):
            cluster.core.delete_namespace(lock_namespace)


def mpijob_gone(cluster: E2ECluster, namespace: str, name: str) -> bool:
    try:
        get_mpijob(cluster, namespace, name)
    except NotFoundError:
        return True
    return False


def launcher_job_gone(cluster: E2ECluster, namespace: str, name: str) -> bool:
    return not cluster.batch.list_namespaced_job(
        namespace, field_selector=f"metadata.name={name}-launcher"
    ).items


@pytest.mark.parametrize("version", ["v1", "v2beta1"])
def test_a_finished_jobs_ttl_means_what_its_api_means_across_a_restart(
    cluster: E2ECluster, namespace: str, tmp_path: Path, version: str
) -> None:
    """kubeflow.org/v1 (training-operator, Flyte): the MPIJob is deleted, its children follow.
    kubeflow.org/v2beta1 (kubeflow/mpi-operator): the MPIJob and its status stay; the Job
    controller deletes the launcher Job. Either way the deadline passes while no operator runs,
    as when a finished job's operator is swapped for this one."""
    ttl = 6
    flags = ["--leader-elect=false"]
    first = OperatorProcess(cluster, tmp_path, name="ttl-first", extra_args=flags).start()
    try:
        job = sim_job("brief").run_policy(ttlSecondsAfterFinished=ttl).obj()
        create(cluster, version, namespace, job)
        wait_for_condition(cluster, namespace, "brief", "Succeeded", operator=first)
    finally:
        first.stop(signal.SIGKILL)
    time.sleep(ttl + 1)
    assert not mpijob_gone(cluster, namespace, "brief")
    second = OperatorProcess(cluster, tmp_path, name="ttl-second", extra_args=flags).start()
    try:
        if version == "v1":
            wait_until(lambda: mpijob_gone(cluster, namespace, "brief"), 60, message="job deleted")
            # The garbage collector follows with the children.
            wait_until(lambda: not pods_of(cluster, namespace, "brief"), 60, message="pods gone")
        else:
            wait_until(
                lambda: launcher_job_gone(cluster, namespace, "brief"),
                60,
                message="launcher Job deleted by the Job controller",
            )
            settle()
            kept = get_mpijob(cluster, namespace, "brief")
            assert condition(kept, "Succeeded") is not None
            assert kept["status"]["completionTime"]
    finally:
        assert second.stop() == 0, second.log_tail()
