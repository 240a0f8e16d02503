"""The MPIJob settings that decide how mpirun starts, on real pods: when the launcher is
created, where ranks run, who runs them, what the launcher learns of its workers, what a lost
worker does to the job, what a failed launcher leaves in its status, and gang scheduling.

Every test is one real job (20-60 s each), so settings that do not get in each other's way
share a job. The pods ask for the examples' one CPU each; the real-node clusters have two
nodes of two CPUs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.stream import stream

from mpi_operator.quantity import Quantity
from mpi_operator.sdk import JobFailedError

from .clusters import COSCHEDULING, VOLCANO, ClusterProvider, E2ECluster, wait_until
from .operator import (
    CONDITION_GANG_SCHEDULED,
    GROUP,
    PLURAL,
    VERSION,
    OperatorProcess,
    condition,
    create_mpijob,
    get_mpijob,
    get_pod_group,
    pods_of,
    settle,
    wait_for_condition,
)
from .realpods import (
    assert_pi,
    containers,
    example,
    launcher_log,
    pod_log,
    rank_hosts,
    set_image,
    wrap_command,
)

pytestmark = [pytest.mark.e2e, pytest.mark.realnodes]

# Worker 1 holds its sshd back until someone has knocked on port 2222 and been refused (the
# kernel's count of TCP resets sent, per network namespace, moves), then for 3 s more: mpirun
# has certainly tried it before it listens. Nothing else connects (no readiness probe).
LATE_SSHD = r"""
refused() {
    awk '/^Tcp:/ { if (!c) { for (i = 1; i <= NF; i++) if ($i == "OutRsts") c = i }
                   else print $c }' /proc/net/snmp
}
case "$HOSTNAME" in
*-worker-1)
    before=$(refused)
    for _ in $(seq 600); do
        [ "$(refused)" != "$before" ] && break
        sleep 0.2
    done
    if [ "$(refused)" != "$before" ]; then
        echo "refused a connection; sshd starts in 3 s"
    else
        echo "no connection came in 2 minutes"
    fi
    sleep 3
    ;;
esac
exec "$@"
"""
REFUSED_THEN_LATE = "refused a connection; sshd starts in 3 s"

# The launcher prints what discover_hosts.sh says, once it lists both workers: the kubelet
# refreshes a mounted ConfigMap within about a minute of a change.
DISCOVER_THEN_RUN = r"""
for _ in $(seq 120); do
    [ "$(/etc/mpi/discover_hosts.sh | wc -l)" -ge 2 ] && break
    sleep 1
done
/etc/mpi/discover_hosts.sh | sed 's/^/discovered /'
exec "$@"
"""
DISCOVERED = re.compile(r"^discovered (\S+)$", re.MULTILINE)

WHO_AND_KEYS = 'echo "user $(id -un), keys: $(ls /home/mpiuser/.ssh | tr "\\n" " ")"; exec "$@"'
# Each rank says it runs, then waits to be killed.
RANK_RUNS = 'echo "rank $OMPI_COMM_WORLD_RANK runs on $HOSTNAME"; exec sleep 600'
RANK_RUNS_LINE = re.compile(r"^rank \d runs on (\S+)$", re.MULTILINE)
# Each rank says it runs and ends 30 s later: long enough to lose a worker in between.
RANK_RUNS_FOR_30S = 'echo "rank $OMPI_COMM_WORLD_RANK runs on $HOSTNAME"; exec sleep 30'
# sshd as a child, so that killing it (not the container's first process, which the kernel
# shields from SIGKILL) ends the container with a failure.
SSHD_UNTIL_KILLED = '"$@" & echo $! > /tmp/sshd.pid; wait; echo "sshd was killed"; exit 1'
# Both lines on one stream: the runtime copies stdout and stderr apart, in no fixed order.
LAUNCHER_ERROR = (
    'echo "loading data" >&2; '
    'echo "error: cannot open /data/train.tfrecord: No such file or directory" >&2; exit 1'
)


def run_to(
    cluster: E2ECluster,
    namespace: str,
    job: dict[str, Any],
    operator: OperatorProcess,
    outcome: str = "Succeeded",
) -> dict[str, Any]:
    create_mpijob(cluster, namespace, job)
    name = job["metadata"]["name"]
    return wait_for_condition(cluster, namespace, name, outcome, timeout=300, operator=operator)


def workers(job: dict[str, Any]) -> list[str]:
    name = job["metadata"]["name"]
    return [
        f"{name}-worker-{i}" for i in range(job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"])
    ]


@pytest.mark.parametrize(
    ("file", "image"),
    [
        pytest.param("pi.yaml", None, id="openmpi4"),
        pytest.param("pi.yaml", "mpioperator/mpi-pi:openmpi5", id="openmpi5"),
        pytest.param("pi-mpich.yaml", None, id="mpich"),
        pytest.param("pi-intel.yaml", None, id="intel"),
    ],
)
def test_at_startup_launcher_waits_out_a_worker_whose_sshd_starts_late(
    real_cluster: E2ECluster,
    namespace_factory: Callable[[E2ECluster], str],
    real_operator: OperatorProcess,
    file: str,
    image: str | None,
) -> None:
    ns = namespace_factory(real_cluster)
    job = example(file)
    if image is not None:
        set_image(job, image)
    job["spec"]["launcherCreationPolicy"] = "AtStartup"
    # Workers stay after the run, for worker 1's log.
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "None"
    for container in containers(job, "Worker"):
        container.pop("readinessProbe", None)
        wrap_command(container, LATE_SSHD, "late-sshd")

    run_to(real_cluster, ns, job, real_operator)

    log = launcher_log(real_cluster, ns, job["metadata"]["name"])
    assert_pi(log)
    assert rank_hosts(log) == workers(job), log
    late = workers(job)[1]
    assert REFUSED_THEN_LATE in pod_log(real_cluster, ns, late)


def test_wait_for_workers_ready_discovers_them_and_runs_two_ranks_on_each(
    real_cluster: E2ECluster,
    namespace_factory: Callable[[E2ECluster], str],
    real_operator: OperatorProcess,
) -> None:
    """Intel MPI with WaitForWorkersReady (the example's policy) and slotsPerWorker: 2; the
    launcher runs discover_hosts.sh before mpirun."""
    ns = namespace_factory(real_cluster)
    job = example("pi-intel.yaml")
    name = job["metadata"]["name"]
    assert job["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"
    job["spec"]["slotsPerWorker"] = 2
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "None"
    launcher = containers(job, "Launcher")[0]
    launcher["args"] = ["mpirun", "-n", "4", "/home/mpiuser/pi"]
    wrap_command(launcher, DISCOVER_THEN_RUN, "discover")

    run_to(real_cluster, ns, job, real_operator)

    log = launcher_log(real_cluster, ns, name)
    assert_pi(log)
    assert rank_hosts(log) == sorted(workers(job) * 2), log
    assert DISCOVERED.findall(log) == [f"{w}.{name}.{ns}.svc" for w in workers(job)], log
    # The launcher pod came only once both workers were Ready (times have 1 s resolution).
    ready_at = max(
        next(c.last_transition_time for c in pod.status.conditions if c.type == "Ready")
        for pod in pods_of(real_cluster, ns, name, "worker")
    )
    (launcher_pod,) = pods_of(real_cluster, ns, name, "launcher")
    assert launcher_pod.metadata.creation_timestamp >= ready_at


def test_launcher_runs_a_rank_too_as_the_non_root_user_of_the_pod_security_context(
    real_cluster: E2ECluster,
    namespace_factory: Callable[[E2ECluster], str],
    real_operator: OperatorProcess,
) -> None:
    """runLauncherAsWorker with one worker: one rank on the launcher, one on the worker. The
    user comes from the pod's securityContext, not the containers', and the job's keys from
    the example's sshAuthMountPath in that user's home."""
    ns = namespace_factory(real_cluster)
    job = example("pi.yaml")
    name = job["metadata"]["name"]
    job["spec"]["runLauncherAsWorker"] = True
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 1
    assert job["spec"]["sshAuthMountPath"] == "/home/mpiuser/.ssh"
    for role in ("Launcher", "Worker"):
        pod = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]
        for container in pod["containers"]:
            del container["securityContext"]
        pod["securityContext"] = {"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True}
    wrap_command(containers(job, "Launcher")[0], WHO_AND_KEYS, "who")

    run_to(real_cluster, ns, job, real_operator)

    log = launcher_log(real_cluster, ns, name)
    assert_pi(log)
    assert rank_hosts(log) == [f"{name}-launcher", f"{name}-worker-0"], log
    assert "user mpiuser, keys: authorized_keys id_rsa id_rsa.pub" in log, log


def test_a_worker_killed_mid_run_fails_the_job_with_the_launchers_reason(
    real_cluster: E2ECluster,
    namespace_factory: Callable[[E2ECluster], str],
    real_operator: OperatorProcess,
) -> None:
    """Open MPI as root with the default sshAuthMountPath (/root/.ssh) and sshd: the ranks
    sleep until worker 1's pod is deleted; the launcher may not retry, so it starts only once
    every worker's sshd listens (Open MPI's launcher does not wait for names to resolve)."""
    ns = namespace_factory(real_cluster)
    job = example("pi.yaml")
    name = job["metadata"]["name"]
    del job["spec"]["sshAuthMountPath"]
    job["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    job["spec"]["runPolicy"]["backoffLimit"] = 0
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] = "Never"
    for role in ("Launcher", "Worker"):
        for container in containers(job, role):
            del container["securityContext"]
    # Open MPI refuses root unless told otherwise.
    launcher_args = ["--allow-run-as-root", "-n", "2", "bash", "-c", RANK_RUNS]
    containers(job, "Launcher")[0]["args"] = launcher_args
    worker = containers(job, "Worker")[0]
    worker["args"] = ["-De"]
    worker["readinessProbe"] = {"tcpSocket": {"port": 2222}, "periodSeconds": 1}
    create_mpijob(real_cluster, ns, job)

    def ranks_running() -> bool:
        if not pods_of(real_cluster, ns, name, "launcher"):
            return False
        log = launcher_log(real_cluster, ns, name)
        failed = condition(get_mpijob(real_cluster, ns, name), "Failed") or {}
        if failed.get("status") == "True":
            pytest.fail(f"the job failed before a worker was killed:\n{log}")
        return len(RANK_RUNS_LINE.findall(log)) == 2

    wait_until(
        ranks_running,
        300,
        interval=2,
        message=lambda: f"both ranks to run: {real_operator.log_tail(20)}",
    )
    real_cluster.core.delete_namespaced_pod(f"{name}-worker-1", ns, grace_period_seconds=0)
    failed = wait_for_condition(
        real_cluster, ns, name, "Failed", timeout=300, operator=real_operator
    )

    reason = condition(failed, "Failed")
    assert reason is not None
    assert reason["reason"].startswith("BackoffLimitExceeded/"), reason
    assert "container mpi-launcher exited with code" in reason["message"], reason
    assert sorted(RANK_RUNS_LINE.findall(launcher_log(real_cluster, ns, name))) == workers(job)


def kill_sshd(cluster: E2ECluster, namespace: str, pod: str) -> None:
    """Kill the worker's sshd (started by SSHD_UNTIL_KILLED), as a crash would."""
    stream(
        cluster.core.connect_get_namespaced_pod_exec,
        pod,
        namespace,
        command=["sh", "-c", "kill -KILL $(cat /tmp/sshd.pid)"],
        stderr=True,
        stdout=True,
        stdin=False,
        tty=False,
    )


def test_a_worker_whose_sshd_dies_mid_run_is_replaced_and_the_job_recovers(
    real_cluster: E2ECluster,
    namespace_factory: Callable[[E2ECluster], str],
    real_operator: OperatorProcess,
) -> None:
    """The ranks run for 30 s; worker 1's sshd is killed while they do. mpirun loses that
    host and the launcher's attempt fails; the worker is replaced, and the launcher's next
    attempt runs both ranks to the end. Two of the three retries are spent."""
    ns = namespace_factory(real_cluster, restricted=True)
    job = example("pi.yaml")
    name = job["metadata"]["name"]
    job["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    job["spec"]["runPolicy"]["backoffLimit"] = 3
    del job["spec"]["runPolicy"]["ttlSecondsAfterFinished"]
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] = "Never"
    containers(job, "Launcher")[0]["args"] = ["-n", "2", "bash", "-c", RANK_RUNS_FOR_30S]
    worker = containers(job, "Worker")[0]
    worker["readinessProbe"] = {"tcpSocket": {"port": 2222}, "periodSeconds": 1}
    wrap_command(worker, SSHD_UNTIL_KILLED, "sshd-until-killed")
    create_mpijob(real_cluster, ns, job)

    def ranks_running() -> bool:
        launchers = pods_of(real_cluster, ns, name, "launcher")
        if len(launchers) != 1:
            return False
        log = pod_log(real_cluster, ns, launchers[0].metadata.name)
        return len(RANK_RUNS_LINE.findall(log)) == 2

    wait_until(ranks_running, 300, interval=2, message="both ranks to run")
    first = real_cluster.core.read_namespaced_pod(f"{name}-worker-1", ns)
    kill_sshd(real_cluster, ns, f"{name}-worker-1")
    done = wait_for_condition(
        real_cluster, ns, name, "Succeeded", timeout=300, operator=real_operator
    )

    second = real_cluster.core.read_namespaced_pod(f"{name}-worker-1", ns)
    assert second.metadata.uid != first.metadata.uid
    replicas = done["status"]["replicaStatuses"]
    assert replicas["Worker"]["failed"] == 1, replicas
    assert replicas["Launcher"]["failed"] >= 1 and replicas["Launcher"]["succeeded"] == 1
    restarting = condition(done, "Restarting")
    assert restarting is None or restarting["status"] == "False", restarting


def test_the_launchers_own_error_stays_in_the_failed_condition_after_its_pods_are_gone(
    real_cluster: E2ECluster,
    namespace_factory: Callable[[E2ECluster], str],
    real_operator: OperatorProcess,
) -> None:
    ns = namespace_factory(real_cluster, restricted=True)
    job = example("pi.yaml")
    name = job["metadata"]["name"]
    job["spec"]["runPolicy"] = {"cleanPodPolicy": "All", "backoffLimit": 0}
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] = "Never"
    launcher = containers(job, "Launcher")[0]
    launcher["command"] = ["bash", "-c"]
    launcher["args"] = [LAUNCHER_ERROR]
    create_mpijob(real_cluster, ns, job)
    with pytest.raises(JobFailedError) as failure:
        real_cluster.jobs.wait(name, "Succeeded", namespace=ns, timeout=300)
    assert "cannot open /data/train.tfrecord: No such file" in str(failure.value)

    wait_until(lambda: not pods_of(real_cluster, ns, name, "worker"), 120, message="cleanup")
    for pod in pods_of(real_cluster, ns, name, "launcher"):
        real_cluster.core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)
    wait_until(lambda: not pods_of(real_cluster, ns, name), 120, message="every pod gone")
    failed = condition(get_mpijob(real_cluster, ns, name), "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded/Error", failed
    assert failed["message"].endswith(
        "container mpi-launcher exited with code 1: "
        "loading data\\nerror: cannot open /data/train.tfrecord: No such file or directory"
    ), failed


def _cpus(cluster: E2ECluster) -> int:
    """The CPUs the cluster's nodes offer pods."""
    nodes = [cluster.to_dict(n) for n in cluster.core.list_node().items]
    return int(sum(Quantity.parse(n["status"]["allocatable"]["cpu"]).value for n in nodes))


@pytest.mark.parametrize("flavour", [VOLCANO, COSCHEDULING])
def test_gang_on_real_nodes_binds_all_or_nothing_then_computes_pi(
    cluster_provider: ClusterProvider,
    namespace_factory: Callable[[E2ECluster], str],
    tmp_path_factory: pytest.TempPathFactory,
    flavour: str,
) -> None:
    """A gang one CPU larger than the real nodes gets no pod bound; the example then runs."""
    cluster = cluster_provider.get(flavour, real_nodes=True)
    operator = OperatorProcess(
        cluster, tmp_path_factory.mktemp(f"operator-{flavour}"), name=f"operator-{flavour}"
    ).start()
    try:
        ns = namespace_factory(cluster)
        too_big = example("pi.yaml")
        too_big["metadata"]["name"] = "too-big"
        # Workers and launcher ask for one CPU each.
        too_big["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = _cpus(cluster)
        create_mpijob(cluster, ns, too_big)
        wait_until(lambda: get_pod_group(cluster, ns, "too-big"), 60, message="too-big's PodGroup")
        wait_until(
            lambda: len(pods_of(cluster, ns, "too-big")) == _cpus(cluster) + 1,
            60,
            message="too-big's pods",
        )
        # Volcano decides every second; Coscheduling lets a partial gang wait 10 s at Permit.
        settle(15)
        bound = [p.metadata.name for p in pods_of(cluster, ns, "too-big") if p.spec.node_name]
        assert bound == []
        cluster.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "too-big")
        wait_until(lambda: not pods_of(cluster, ns, "too-big"), 120, message="too-big's pods gone")

        job = example("pi.yaml")
        name = job["metadata"]["name"]
        run_to(cluster, ns, job, operator)

        # A launcher this short may finish before the scheduler reports the gang placed.
        wait_for_condition(cluster, ns, name, CONDITION_GANG_SCHEDULED, timeout=60)
        log = launcher_log(cluster, ns, name)
        assert_pi(log)
        assert rank_hosts(log) == workers(job), log
        (launcher_pod,) = pods_of(cluster, ns, name, "launcher")
        assert launcher_pod.spec.scheduler_name == cluster.scheduler_name
    finally:
        assert operator.stop() == 0, operator.log_tail()
