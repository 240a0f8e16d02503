"""The Python SDK against a real API server with the operator running: what a user's script
sees when it submits, watches, suspends and deletes jobs, and the shipped SDK example."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mpi_operator import sdk

from .clusters import SIM, E2ECluster, wait_until
from .operator import OperatorProcess, pods_of, run_pi_example

pytestmark = pytest.mark.e2e


@pytest.fixture
def jobs(cluster: E2ECluster, namespace: str) -> Iterator[sdk.MPIJobClient]:
    with sdk.MPIJobClient(cluster.kubeconfig, namespace=namespace) as client:
        yield client


def small_job(name: str) -> sdk.JobBuilder:
    """Simulated pods (kwok): workers keep running, the launcher succeeds after a second."""
    return (
        sdk.JobBuilder(name)
        .image("mpioperator/mpi-pi:openmpi")
        .launcher(command=["mpirun", "true"], cpu="100m")
        .workers(2, command=["/usr/sbin/sshd", "-De"], cpu="100m")
        .pod_spec("Launcher", terminationGracePeriodSeconds=0)
        .pod_spec("Worker", terminationGracePeriodSeconds=0)
    )


def test_the_sdk_example_runs_pi_to_success(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    done = run_pi_example(cluster, namespace)
    assert done.returncode == 0, done.stdout + done.stderr + operator.log_tail()
    assert f"MPIJob {namespace}/pi: Succeeded" in done.stdout
    job = cluster.jobs.get("pi", namespace=namespace)
    assert sdk.phase(job) == "Succeeded"
    if cluster.fake_nodes:
        # kwok nodes run no containers, so there is no log to print; the example says so.
        assert "no launcher log: the log of launcher pod" in done.stderr, done.stderr


def test_submit_get_list_wait_and_delete_return_typed_jobs(
    cluster: E2ECluster, jobs: sdk.MPIJobClient, namespace: str, operator: OperatorProcess
) -> None:
    submitted = jobs.submit(small_job("typed").label("team", "a"))
    assert isinstance(submitted, sdk.MPIJob)
    assert (submitted.namespace, submitted.name) == (namespace, "typed")
    assert submitted.uid, "the job as stored, with its server-assigned uid"
    jobs.submit(small_job("other"))

    done = jobs.wait("typed", "Succeeded", timeout=120)
    assert sdk.phase(done) == "Succeeded"
    assert sdk.is_finished(done)
    assert done.status is not None and done.status.completion_time
    # Without gang scheduling the operator sets no GangScheduled condition.
    assert sdk.gang_state(done) is None
    assert jobs.get("typed").uid == submitted.uid

    assert sorted(j.name for j in jobs.list()) == ["other", "typed"]
    assert [j.name for j in jobs.list(label_selector="team=a")] == ["typed"]
    assert namespace in {j.namespace for j in jobs.list(all_namespaces=True)}

    jobs.delete("typed", wait=True)
    with pytest.raises(sdk.NotFoundError) as missing:
        jobs.get("typed")
    assert missing.value.status == 404
    assert '"typed" not found' in missing.value.message


def test_an_invalid_job_is_refused_before_anything_is_sent(
    jobs: sdk.MPIJobClient, operator: OperatorProcess
) -> None:
    with pytest.raises(sdk.InvalidJobError) as refused:
        jobs.submit(small_job("bad").slots_per_worker(-1))
    assert [str(e) for e in refused.value.errors] == [
        "spec.slotsPerWorker: must be greater than or equal to 0"
    ]
    assert jobs.list() == []


def test_the_api_servers_refusals_carry_its_message_and_field_paths(
    jobs: sdk.MPIJobClient, operator: OperatorProcess
) -> None:
    jobs.submit(small_job("twice"))
    with pytest.raises(sdk.AlreadyExistsError) as again:
        jobs.submit(small_job("twice"))
    assert again.value.status == 409
    assert '"twice" already exists' in again.value.message
    # Finalizers are the API server's business, not the operator's rules.
    finalized = small_job("finalized").to_dict()
    finalized["metadata"]["finalizers"] = ["not a valid finalizer!"]
    assert sdk.validate(finalized) == []
    with pytest.raises(sdk.ApiServerError) as invalid:
        jobs.submit(finalized)
    assert invalid.value.status == 422
    assert any(cause.path.startswith("metadata.finalizers") for cause in invalid.value.causes), (
        invalid.value.causes
    )


def test_suspend_and_resume(
    cluster: E2ECluster, jobs: sdk.MPIJobClient, namespace: str, operator: OperatorProcess
) -> None:
    jobs.submit(small_job("pausable").suspend())
    suspended = jobs.wait("pausable", "Suspended", timeout=60)
    assert sdk.phase(suspended) == "Suspended"
    assert pods_of(cluster, namespace, "pausable") == []
    # A suspended job has no launcher pod, so there is no log to read yet.
    with pytest.raises(sdk.LogsUnavailableError, match="has no launcher pod"):
        jobs.logs("pausable")
    resumed = jobs.resume("pausable")
    assert resumed.spec is not None and resumed.spec.run_policy is not None
    assert resumed.spec.run_policy.suspend is False
    assert sdk.phase(jobs.wait("pausable", "Succeeded", timeout=120)) == "Succeeded"


def test_suspending_a_running_job_stops_its_workers(
    cluster: E2ECluster, jobs: sdk.MPIJobClient, namespace: str, operator: OperatorProcess
) -> None:
    jobs.submit(small_job("held").pod_annotation("Launcher", SIM + "hold", "true"))
    jobs.wait("held", "Running", timeout=60)
    assert jobs.suspend("held").spec.run_policy.suspend is True  # type: ignore[union-attr]
    jobs.wait("held", "Suspended", timeout=60)
    wait_until(
        lambda: not pods_of(cluster, namespace, "held", "worker"), 60, message="workers gone"
    )


def test_wait_stops_at_failure_and_at_its_timeout(
    jobs: sdk.MPIJobClient, operator: OperatorProcess
) -> None:
    failing = (
        small_job("fails")
        .pod_annotation("Launcher", SIM + "exit-code", "3")
        .restart_policy("Launcher", "Never")
        .backoff_limit(0)
    )
    jobs.submit(failing)
    with pytest.raises(sdk.JobFailedError) as failed:
        jobs.wait("fails", "Succeeded", timeout=120)
    assert failed.value.condition.type == "Failed"
    assert sdk.phase(failed.value.job) == "Failed"

    jobs.submit(small_job("forever").pod_annotation("Launcher", SIM + "hold", "true"))
    with pytest.raises(sdk.WaitTimeoutError) as timed_out:
        jobs.wait("forever", "Succeeded", timeout=2)
    assert timed_out.value.job.name == "forever"
    assert "did not reach Succeeded=True" in str(timed_out.value)


def test_logs_on_a_node_that_serves_none_raise_a_clear_error(
    cluster: E2ECluster, jobs: sdk.MPIJobClient, namespace: str, operator: OperatorProcess
) -> None:
    if not cluster.fake_nodes:
        pytest.skip("this cluster's nodes run containers; the pi example reads a real log")
    jobs.submit(small_job("silent").pod_annotation("Launcher", SIM + "hold", "true"))
    jobs.wait("silent", "Running", timeout=60)
    with pytest.raises(sdk.LogsUnavailableError) as unavailable:
        jobs.logs("silent", follow=True)
    launcher = pods_of(cluster, namespace, "silent", "launcher")[0].metadata.name
    assert f"the log of launcher pod {namespace}/{launcher} is not available" in str(
        unavailable.value
    )
