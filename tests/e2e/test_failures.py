"""Jobs whose pods fail, on a real API server and Job controller with simulated nodes: failed
workers are replaced while the job has retries, the failure that spends them ends the job with
its own cause. (A finished job's TTL is tested in test_operator_restart.py, which needs an
operator of its own.)

Failing a worker: its pod is annotated to exit 1 (``restartPolicy: Never``, so it turns Failed);
the replacement, made from the template, has no such annotation and runs.
"""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from mpi_operator.testing.wrappers import MPIJobWrapper

from .clusters import SIM, E2ECluster, wait_until
from .operator import (
    OperatorProcess,
    condition,
    create_mpijob,
    event_reasons,
    finish_launcher,
    finish_pod,
    pods_of,
    run_held,
    sim_job,
    wait_for_condition,
)

pytestmark = pytest.mark.e2e


def pod_uid(cluster: E2ECluster, namespace: str, name: str) -> str:
    return str(cluster.core.read_namespaced_pod(name, namespace).metadata.uid)


def replaced(cluster: E2ECluster, namespace: str, name: str, old_uid: str) -> bool:
    """Whether pod ``name`` is a new pod, running."""
    try:
        pod = cluster.core.read_namespaced_pod(name, namespace)
    except ApiException:
        return False
    return bool(pod.metadata.uid != old_uid and pod.status.phase == "Running")


def waiting_for_workers(name: str) -> MPIJobWrapper:
    return sim_job(name).launcher_creation_policy("WaitForWorkersReady")


def worker_failures(job: dict[str, object]) -> object:
    status = job.get("status") or {}
    assert isinstance(status, dict)
    return ((status.get("replicaStatuses") or {}).get("Worker") or {}).get("failed")


def test_wait_for_workers_ready_recovers_from_a_worker_that_fails_before_the_launcher(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    # Held, so that the job cannot finish before the replacement runs, should the launcher
    # have been created in the moment both workers were Ready.
    job = waiting_for_workers("recovers").template_annotation("Launcher", SIM + "hold", "true")
    create_mpijob(cluster, namespace, job.obj())
    old = wait_until(
        lambda: pod_uid(cluster, namespace, "recovers-worker-1"), 60, message="worker 1"
    )
    # Failed at once, as a kubelet fails a pod it cannot start (the workers' sync waits for
    # a quiet second, so it sees this before both workers are Ready).
    failed = {"status": {"phase": "Failed", "reason": "UnexpectedAdmissionError"}}
    cluster.core.patch_namespaced_pod_status("recovers-worker-1", namespace, failed)
    wait_until(lambda: replaced(cluster, namespace, "recovers-worker-1", old), 60, message="new")
    wait_until(
        lambda: pods_of(cluster, namespace, "recovers", "launcher"), 60, message="the launcher"
    )
    finish_launcher(cluster, namespace, "recovers")
    done = wait_for_condition(cluster, namespace, "recovers", "Succeeded", operator=operator)
    assert worker_failures(done) == 1
    assert "MPIJobRestarting" in event_reasons(cluster, namespace, "recovers")


def test_with_no_retries_a_failed_worker_fails_the_job_and_no_launcher_starts(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    job = (
        waiting_for_workers("spent")
        # Held: a launcher created in the moment the workers were Ready must be stopped.
        .template_annotation("Launcher", SIM + "hold", "true")
        .template_annotation("Worker", SIM + "exit-code", "7")
        .template_annotation("Worker", SIM + "run-for", "1ms")
        .run_policy(backoffLimit=0)
        .obj()
    )
    create_mpijob(cluster, namespace, job)
    failed = wait_for_condition(cluster, namespace, "spent", "Failed", operator=operator)
    cause = condition(failed, "Failed")
    assert cause is not None and cause["reason"] == "WorkerFailed/Error"
    assert "failed and the job's retries are spent (backoffLimit 0" in cause["message"]
    assert "exited with code 7" in cause["message"]
    assert failed["status"]["completionTime"]
    # The workers are Ready for a moment before they fail: a launcher created in that moment
    # is stopped by the sync after the one that failed the job.
    wait_until(
        lambda: (
            all(j.spec.suspend for j in cluster.batch.list_namespaced_job(namespace).items)
            and not pods_of(cluster, namespace, "spent", "launcher")
        ),
        60,
        message="no launcher running",
    )


def test_a_worker_failing_while_the_launcher_runs_is_replaced_and_the_job_runs_again(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    run_held(cluster, namespace, "again", operator)
    old = pod_uid(cluster, namespace, "again-worker-0")
    finish_pod(cluster, namespace, "again-worker-0", exit_code=1)
    restarting = wait_for_condition(cluster, namespace, "again", "Restarting", operator=operator)
    assert condition(restarting, "Running") is None  # Restarting takes Running's place
    # The State column (the last condition's type, test_v1.py) says so.
    assert restarting["status"]["conditions"][-1]["type"] == "Restarting"
    assert "again-worker-0 failed and is created again (1 of 6" in str(
        condition(restarting, "Restarting")
    )
    wait_until(lambda: replaced(cluster, namespace, "again-worker-0", old), 60, message="new")
    running = wait_for_condition(cluster, namespace, "again", "Running", operator=operator)
    assert condition(running, "Restarting") is None
    finish_launcher(cluster, namespace, "again")
    done = wait_for_condition(cluster, namespace, "again", "Succeeded", operator=operator)
    assert worker_failures(done) == 1
    assert done["status"]["conditions"][-1]["type"] == "Succeeded"


@pytest.mark.parametrize("policy", ["None", "Running"])
def test_an_evicted_worker_that_spends_the_retries_fails_the_job_and_stops_its_launcher(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess, policy: str
) -> None:
    job = (
        sim_job("evicted")
        .template_annotation("Launcher", SIM + "hold", "true")
        .clean_pod_policy(policy)
        .run_policy(backoffLimit=0)
        .obj()
    )
    create_mpijob(cluster, namespace, job)
    wait_for_condition(cluster, namespace, "evicted", "Running", operator=operator)
    # What a kubelet writes when it evicts a pod under node pressure.
    eviction = {"status": {"phase": "Failed", "reason": "Evicted", "message": "low on memory"}}
    cluster.core.patch_namespaced_pod_status("evicted-worker-1", namespace, eviction)
    failed = wait_for_condition(cluster, namespace, "evicted", "Failed", operator=operator)
    cause = condition(failed, "Failed")
    assert cause is not None and cause["reason"] == "MPIJobEvicted"
    assert cause["message"].endswith(": low on memory")
    assert failed["status"]["completionTime"]

    def launcher_stopped() -> bool:
        launcher = cluster.batch.read_namespaced_job("evicted-launcher", namespace)
        return bool(launcher.spec.suspend) and not pods_of(
            cluster, namespace, "evicted", "launcher"
        )

    wait_until(launcher_stopped, 60, message="launcher Job suspended and its pod gone")
    # cleanPodPolicy still decides what happens to the workers: Running keeps finished ones.
    kept = {"evicted-worker-0", "evicted-worker-1"} if policy == "None" else {"evicted-worker-1"}

    def workers() -> set[str]:
        return {p.metadata.name for p in pods_of(cluster, namespace, "evicted", "worker")}

    wait_until(lambda: workers() == kept, 60, message=lambda: f"workers {kept}, not {workers()}")
