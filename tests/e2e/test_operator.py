"""The operator on a real API server, Job controller and scheduler, with simulated nodes.

Scenarios of upstream's integration and e2e suites that need no real container, plus restart
and deletion races. One operator process serves the module; tests that stop it start their own.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from .clusters import REPO, SIM, E2ECluster, wait_until
from .operator import (
    GROUP,
    PLURAL,
    VERSION,
    OperatorProcess,
    condition,
    create_mpijob,
    event_reasons,
    get_mpijob,
    patch_mpijob,
    pods_of,
    run_held,
    settle,
    sim_job,
    wait_for_condition,
)

pytestmark = pytest.mark.e2e

TO_RUNNING = "mpi_operator_jobs_creation_to_running_seconds_count"
DURATION = "mpi_operator_jobs_duration_seconds_count"
SUCCEEDED = 'outcome="succeeded"'


def test_pi_example_goes_created_running_succeeded(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    job = yaml.safe_load((REPO / "examples" / "pi" / "pi.yaml").read_text())
    # Keep the launcher alive long enough to observe Running.
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    launcher.setdefault("metadata", {})["annotations"] = {SIM + "run-for": "4s"}
    created_before = operator.metric("mpi_operator_jobs_created_total") or 0
    started_before = operator.metric(TO_RUNNING) or 0
    succeeded_before = operator.metric(DURATION, SUCCEEDED) or 0
    create_mpijob(cluster, namespace, job)
    running = wait_for_condition(cluster, namespace, "pi", "Running", operator=operator)
    assert condition(running, "Created") is not None
    assert running["status"]["replicaStatuses"]["Worker"].get("active") == 2
    done = wait_for_condition(cluster, namespace, "pi", "Succeeded", operator=operator)
    assert done["status"]["startTime"] and done["status"]["completionTime"]
    assert condition(done, "Running")["status"] == "False"  # type: ignore[index]
    # cleanPodPolicy Running: workers go once the launcher has finished.
    wait_until(
        lambda: not pods_of(cluster, namespace, "pi", "worker"), 60, message="workers removed"
    )
    reasons = event_reasons(cluster, namespace, "pi")
    assert {"MPIJobCreated", "MPIJobRunning", "MPIJobSucceeded"} <= set(reasons)
    assert reasons.count("MPIJobRunning") == 1
    assert (operator.metric("mpi_operator_jobs_created_total") or 0) >= created_before + 1
    assert (
        operator.metric("mpi_operator_job_info", f'launcher="pi-launcher",namespace="{namespace}"')
        == 1
    )
    # Observed when the operator's status write returns, maybe just after the condition shows.
    wait_until(
        lambda: (operator.metric(DURATION, SUCCEEDED) or 0) >= succeeded_before + 1,
        10,
        message="the job's duration observed",
    )
    assert (operator.metric(TO_RUNNING) or 0) >= started_before + 1
    # Beyond upstream: reconcile duration, queue depth and API requests by verb and resource.
    reconciles = operator.metric(
        "controller_runtime_reconcile_time_seconds_count", 'controller="mpijob"'
    )
    assert reconciles is not None and reconciles > 0
    assert operator.metric("workqueue_depth", 'name="mpijob"') is not None
    created_pods = 'verb="create",resource="pods",code="201"'
    assert (operator.metric("mpi_operator_api_requests_total", created_pods) or 0) >= 2


def test_launcher_failures_up_to_backoff_limit_fail_the_job(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    job = (
        sim_job("fails")
        .template_annotation("Launcher", SIM + "exit-code", "3")
        .restart_policy("Launcher", "Never")
        .run_policy(backoffLimit=1)
        .obj()
    )
    create_mpijob(cluster, namespace, job)
    failed = wait_for_condition(cluster, namespace, "fails", "Failed", operator=operator)
    assert condition(failed, "Failed")["reason"] == "BackoffLimitExceeded/Error"  # type: ignore[index]
    launchers = pods_of(cluster, namespace, "fails", "launcher")
    assert len(launchers) == 2  # the first try and one retry
    # Upstream names the event after the failure: the condition reason.
    assert "BackoffLimitExceeded/Error" in event_reasons(cluster, namespace, "fails")


def test_a_job_created_suspended_creates_no_pods_until_resumed(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    create_mpijob(cluster, namespace, sim_job("later").suspend().obj())
    suspended = wait_for_condition(cluster, namespace, "later", "Suspended", operator=operator)
    assert not suspended["status"].get("startTime")
    settle()
    assert pods_of(cluster, namespace, "later") == []
    launcher = cluster.batch.read_namespaced_job("later-launcher", namespace)
    assert launcher.spec.suspend is True
    patch_mpijob(cluster, namespace, "later", {"spec": {"runPolicy": {"suspend": False}}})
    resumed = wait_for_condition(cluster, namespace, "later", "Succeeded", operator=operator)
    assert condition(resumed, "Suspended")["status"] == "False"  # type: ignore[index]
    assert resumed["status"]["startTime"]


def test_suspending_a_running_job_deletes_workers_and_suspends_the_launcher(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    run_held(cluster, namespace, "pause", operator)
    patch_mpijob(cluster, namespace, "pause", {"spec": {"runPolicy": {"suspend": True}}})
    wait_for_condition(cluster, namespace, "pause", "Suspended", operator=operator)
    wait_until(
        lambda: not pods_of(cluster, namespace, "pause", "worker"), 60, message="workers gone"
    )
    assert cluster.batch.read_namespaced_job("pause-launcher", namespace).spec.suspend is True
    # The Service, ConfigMap and Secret stay for the resume.
    assert cluster.core.read_namespaced_config_map("pause-config", namespace)


def test_a_job_managed_by_another_controller_is_left_alone(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    job = sim_job("elsewhere").run_policy(managedBy="kueue.x-k8s.io/multikueue").obj()
    create_mpijob(cluster, namespace, job)
    settle(3)
    assert pods_of(cluster, namespace, "elsewhere") == []
    assert not (get_mpijob(cluster, namespace, "elsewhere").get("status") or {}).get("conditions")


def test_wait_for_workers_ready_creates_the_launcher_after_the_workers(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    job = sim_job("ordered").launcher_creation_policy("WaitForWorkersReady").obj()
    create_mpijob(cluster, namespace, job)
    wait_for_condition(cluster, namespace, "ordered", "Succeeded", operator=operator)
    launcher = cluster.batch.read_namespaced_job("ordered-launcher", namespace)
    workers = pods_of(cluster, namespace, "ordered", "worker")
    assert workers, "cleanPodPolicy defaults to None: workers stay"
    ready_times = [
        c.last_transition_time
        for pod in workers
        for c in pod.status.conditions or []
        if c.type == "Ready" and c.status == "True"
    ]
    assert len(ready_times) == 2
    assert launcher.metadata.creation_timestamp >= max(ready_times)


@pytest.mark.parametrize(
    ("implementation", "worker_line"),
    [
        ("OpenMPI", "impl-worker-0.impl.{ns}.svc slots=1"),
        ("Intel", "impl-worker-0.impl.{ns}.svc:1"),
        ("MPICH", "impl-worker-0.impl.{ns}.svc:1"),
    ],
)
def test_each_mpi_implementation_gets_its_hostfile_and_succeeds(
    cluster: E2ECluster,
    namespace: str,
    operator: OperatorProcess,
    implementation: str,
    worker_line: str,
) -> None:
    create_mpijob(cluster, namespace, sim_job("impl").implementation(implementation).obj())
    wait_for_condition(cluster, namespace, "impl", "Succeeded", operator=operator)
    hostfile = cluster.core.read_namespaced_config_map("impl-config", namespace).data["hostfile"]
    assert worker_line.format(ns=namespace) in hostfile.splitlines()


def test_run_launcher_as_worker_lists_the_launcher_first_in_the_hostfile(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    create_mpijob(cluster, namespace, sim_job("both").run_launcher_as_worker().obj())
    wait_for_condition(cluster, namespace, "both", "Succeeded", operator=operator)
    hostfile = cluster.core.read_namespaced_config_map("both-config", namespace).data["hostfile"]
    assert hostfile.splitlines()[0] == f"both-launcher.both.{namespace}.svc slots=1"
    indexes = sorted(
        p.metadata.labels["training.kubeflow.org/replica-index"]
        for p in pods_of(cluster, namespace, "both", "worker")
    )
    assert indexes == ["1", "2"]


def test_an_object_of_the_same_name_that_is_not_ours_is_reported_and_kept(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    squatter = k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="taken-config"), data={"mine": "yes"})
    cluster.core.create_namespaced_config_map(namespace, squatter)
    create_mpijob(cluster, namespace, sim_job("taken").obj())
    wait_until(
        lambda: "ErrResourceExists" in event_reasons(cluster, namespace, "taken"),
        60,
        message="ErrResourceExists event",
    )
    assert cluster.core.read_namespaced_config_map("taken-config", namespace).data == {
        "mine": "yes"
    }
    assert pods_of(cluster, namespace, "taken") == []

    # A reconcile error, retried with backoff: the same outcome as when the cache shows it.
    def error_lines() -> list[dict[str, Any]]:
        lines = [json.loads(x) for x in operator.log_tail(2000).splitlines() if x.startswith("{")]
        return [
            line
            for line in lines
            if line.get("level") == "error" and line.get("mpijob") == f"{namespace}/taken"
        ]

    wait_until(error_lines, 30, message="a reconcile error logged for the job")
    assert "already exists and is not managed by MPIJob" in error_lines()[0]["msg"]


def test_a_job_deleted_while_it_is_reconciled_leaves_the_operator_healthy(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    create_mpijob(cluster, namespace, sim_job("gone", workers=6).obj())
    cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "gone")
    wait_until(lambda: not pods_of(cluster, namespace, "gone"), 90, message="children collected")
    create_mpijob(cluster, namespace, sim_job("after").obj())
    wait_for_condition(cluster, namespace, "after", "Succeeded", operator=operator)
    assert operator.get("/healthz", operator.health_port).rstrip().endswith("ok")


def test_active_deadline_fails_a_launcher_that_runs_too_long(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    job = (
        sim_job("slow")
        .template_annotation("Launcher", SIM + "hold", "true")
        .run_policy(activeDeadlineSeconds=3)
        .obj()
    )
    create_mpijob(cluster, namespace, job)
    failed = wait_for_condition(cluster, namespace, "slow", "Failed", operator=operator)
    assert condition(failed, "Failed")["reason"].startswith("DeadlineExceeded")  # type: ignore[index]


def test_discover_hosts_lists_the_running_workers_for_elastic_horovod(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    job = sim_job("elastic", workers=3).template_annotation("Launcher", SIM + "hold", "true")
    create_mpijob(cluster, namespace, job.obj())
    wait_for_condition(cluster, namespace, "elastic", "Running", operator=operator)

    def hosts() -> list[str]:
        data = cluster.core.read_namespaced_config_map("elastic-config", namespace).data
        return [line for line in data["discover_hosts.sh"].splitlines() if "worker" in line]

    wait_until(lambda: len(hosts()) == 3, 60, message="three workers in discover_hosts.sh")
    cluster.core.delete_namespaced_pod("elastic-worker-2", namespace, grace_period_seconds=0)
    patch_mpijob(
        cluster,
        namespace,
        "elastic",
        {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 2}}}},
    )
    wait_until(lambda: len(hosts()) == 2, 60, message="two workers in discover_hosts.sh")
    assert all("elastic-worker-2" not in line for line in hosts())


def test_launcher_template_edits_made_while_suspended_reach_the_launcher_on_resume(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    create_mpijob(cluster, namespace, sim_job("edited").suspend().obj())
    wait_for_condition(cluster, namespace, "edited", "Suspended", operator=operator)
    launcher_template = {
        "metadata": {"labels": {"team": "a"}},
        "spec": {"nodeSelector": {"type": "kwok"}},
    }
    patch_mpijob(
        cluster,
        namespace,
        "edited",
        {
            "spec": {
                "runPolicy": {"suspend": False},
                "mpiReplicaSpecs": {"Launcher": {"template": launcher_template}},
            }
        },
    )
    wait_for_condition(cluster, namespace, "edited", "Succeeded", operator=operator)
    template = cluster.batch.read_namespaced_job("edited-launcher", namespace).spec.template
    assert template.metadata.labels["team"] == "a"
    assert template.spec.node_selector == {"type": "kwok"}
    assert "MPIJobResumed" in event_reasons(cluster, namespace, "edited")
