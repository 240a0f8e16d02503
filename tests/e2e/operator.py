"""The operator under test: the real ``mpi-operator`` process against an e2e cluster.

The CRD is installed from ``crds/``; the process runs with a kubeconfig holding the token of
the shipped ServiceAccount, so it has exactly the shipped install's permissions (the ClusterRole,
the Lease Role in its lock namespace, its gang scheduler's rules), and it is stopped by its pid
with SIGTERM, as a kubelet stops it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

import hack.cluster as localcluster
from mpi_operator.api.constants import MPIJOB_RESOURCE
from mpi_operator.operator.options import Options
from mpi_operator.sdk import WaitTimeoutError, has_condition
from mpi_operator.testing.launch import LOOPBACK, operator_command
from mpi_operator.testing.wrappers import MPIJobWrapper

from .clusters import (
    REPO,
    SIM,
    ClusterProvider,
    E2ECluster,
    wait_until,
)
from .rbac import install_mpijob_crd, load_manifest, service_account_kubeconfig

OPERATOR_NAMESPACE = "mpi-operator"
GROUP, VERSION, PLURAL = MPIJOB_RESOURCE


def ensure_namespace(cluster: E2ECluster, name: str) -> None:
    with contextlib.suppress(ApiException):
        cluster.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))


class OperatorProcess:
    """One ``mpi-operator`` process; ``start`` waits until it reports ready."""

    def __init__(
        self,
        cluster: E2ECluster,
        workdir: Path,
        *,
        gang_scheduling: str | None = None,
        extra_args: Sequence[str] = (),
        name: str = "operator",
        kubeconfig: Path | None = None,
        lock_namespace: str = OPERATOR_NAMESPACE,
    ) -> None:
        """``kubeconfig``: run with these credentials instead of the shipped ServiceAccount's
        (the Lease then lives in ``lock_namespace``)."""
        self.cluster = cluster
        self.workdir = workdir
        self.gang_scheduling = (
            localcluster.RECIPES[cluster.flavour].gang_scheduling
            if gang_scheduling is None
            else gang_scheduling
        )
        self.extra_args = list(extra_args)
        self.name = name
        self.kubeconfig = kubeconfig
        self.lock_namespace = lock_namespace
        self.health_port = localcluster.free_port()
        self.metrics_port = localcluster.free_port()
        self.log_path = workdir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, wait_ready: bool = True) -> OperatorProcess:
        install_mpijob_crd(self.cluster.api)
        kubeconfig = self.kubeconfig
        if kubeconfig is None:
            ensure_namespace(self.cluster, OPERATOR_NAMESPACE)
            ensure_namespace(self.cluster, self.lock_namespace)
            kubeconfig = service_account_kubeconfig(
                self.cluster.kubeconfig,
                OPERATOR_NAMESPACE,
                self.workdir,
                gang_scheduling=self.gang_scheduling,
                lock_namespace=self.lock_namespace,
            )
        options = Options(
            kubeconfig=str(kubeconfig),
            gang_scheduling=self.gang_scheduling,
            lock_namespace=self.lock_namespace,
            health_port=self.health_port,
            monitoring_port=self.metrics_port,
            bind_address=LOOPBACK,
            threadiness=4,
            kube_api_qps=50,
            kube_api_burst=100,
            # The tests read fields of the log lines.
            log_format="json",
        )
        args = operator_command(options, self.extra_args)
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        if self.kubeconfig is None:
            # What the shipped Deployment passes down (the downward API): the operator's account.
            env["POD_NAMESPACE"] = OPERATOR_NAMESPACE
            env["POD_SERVICE_ACCOUNT"] = load_manifest("service-account.yaml")["metadata"]["name"]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO
            )
        if wait_ready:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 60) -> None:
        def ready() -> bool:
            self._check_alive()
            return self.get("/readyz", self.health_port).rstrip().endswith("ok")

        wait_until(ready, timeout, message=f"{self.name} ready (log: {self.log_path})")

    def _check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(
                f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}"
            )

    def get(self, path: str, port: int) -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
                return str(r.read().decode())
        except OSError:
            return ""

    def metrics(self) -> str:
        return self.get("/metrics", self.metrics_port)

    def metric(self, name: str, labels: str = "") -> float | None:
        """One sample's value; ``labels`` as in the exposition, in any order."""
        wanted = set(labels.split(",")) if labels else set()
        for line in self.metrics().splitlines():
            sample, _, value = line.rpartition(" ")
            sample_name, _, sample_labels = sample.partition("{")
            found = set(sample_labels.rstrip("}").split(",")) if sample_labels else set()
            if sample_name == name and found == wanted:
                return float(value)
        return None

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int | None:
        """Signal the process (by pid) and wait for it; returns its exit code."""
        process = self.process
        if process is None:
            return None
        self.process = None
        return stop_process(process, sig, timeout)


def stop_process(
    process: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 30
) -> int:
    """Signal a process we started (by its pid), wait for it, kill it if it outlasts
    ``timeout``; returns its exit code."""
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    return process.returncode


@contextlib.contextmanager
def simulated_operator(
    cluster: E2ECluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The operator on a cluster of kwok nodes, named after its flavour, stopped cleanly."""
    cluster.require_simulation()
    workdir = tmp_path_factory.mktemp(f"operator-{cluster.flavour}")
    process = OperatorProcess(cluster, workdir, name=f"operator-{cluster.flavour}").start()
    yield process
    assert process.stop() == 0, process.log_tail()


def operator_fixture(flavour: str, name: str = "operator", **cluster_options: bool) -> Any:
    """A module-scoped fixture called ``name``: the operator on the session's cluster of
    ``flavour`` (``ClusterProvider.get`` options), for a module that needs that cluster."""

    @pytest.fixture(scope="module", name=name)
    def operator(
        cluster_provider: ClusterProvider, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[OperatorProcess]:
        process = OperatorProcess(
            cluster_provider.get(flavour, **cluster_options), tmp_path_factory.mktemp("operator")
        )
        process.start()
        yield process
        assert process.stop() == 0, process.log_tail()

    return operator


def create_mpijob(cluster: E2ECluster, namespace: str, job: dict[str, Any]) -> dict[str, Any]:
    job.setdefault("metadata", {})["namespace"] = namespace
    created: dict[str, Any] = cluster.custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, job
    )
    return created


def get_mpijob(cluster: E2ECluster, namespace: str, name: str) -> dict[str, Any]:
    return cluster.jobs.get(name, namespace=namespace).to_dict()


def patch_mpijob(
    cluster: E2ECluster, namespace: str, name: str, patch: dict[str, Any]
) -> dict[str, Any]:
    job: dict[str, Any] = cluster.custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, patch
    )
    return job


def condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def wait_for_condition(
    cluster: E2ECluster,
    namespace: str,
    name: str,
    kind: str,
    status: str = "True",
    timeout: float = 90,
    operator: OperatorProcess | None = None,
) -> dict[str, Any]:
    """The job once condition ``kind`` has ``status``; fails with the operator's log tail."""
    try:
        job = cluster.jobs.wait(
            name,
            lambda job: has_condition(job, kind, status),
            namespace=namespace,
            timeout=timeout,
            fail_on=(),
        )
    except WaitTimeoutError as timed_out:
        if operator is not None:
            sys.stderr.write(f"--- {operator.name} log ---\n{operator.log_tail()}\n")
        status_seen = timed_out.job.to_dict().get("status")
        sys.stderr.write(f"--- status ---\n{yaml.safe_dump(status_seen)}\n")
        pytest.fail(f"MPIJob {namespace}/{name} {kind}={status}: {timed_out}")
    return job.to_dict()


def run_held(
    cluster: E2ECluster, namespace: str, name: str, operator: OperatorProcess
) -> dict[str, Any]:
    """A ``sim_job`` whose launcher runs until finished by hand, once the job is Running."""
    job = sim_job(name).template_annotation("Launcher", SIM + "hold", "true").obj()
    create_mpijob(cluster, namespace, job)
    return wait_for_condition(cluster, namespace, name, "Running", operator=operator)


def pods_of(cluster: E2ECluster, namespace: str, job_name: str, role: str = "") -> list[Any]:
    selector = f"training.kubeflow.org/job-name={job_name}"
    if role:
        selector += f",training.kubeflow.org/job-role={role}"
    return list(cluster.core.list_namespaced_pod(namespace, label_selector=selector).items)


def event_reasons(cluster: E2ECluster, namespace: str, name: str) -> list[str]:
    events = cluster.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},involvedObject.kind=MPIJob"
    ).items
    return [e.reason for e in events]


def settle(seconds: float = 2.0) -> None:
    """Give the operator time to (wrongly) act before asserting that it did not."""
    time.sleep(seconds)


def sim_job(name: str, workers: int = 2) -> MPIJobWrapper:
    """A small job; simulated pods: workers keep running, the launcher succeeds after 1 s."""
    job = MPIJobWrapper(name).workers(workers, cpu="100m").launcher(cpu="100m")
    for role in ("Launcher", "Worker"):
        job.pod_spec_field(role, "terminationGracePeriodSeconds", 0)
    return job


# --- gang scheduling ----------------------------------------------------------------------

CONDITION_GANG_SCHEDULED = "GangScheduled"
# (group, version) of the PodGroup each gang flavour's operator writes.
POD_GROUP_APIS = {
    "volcano": ("scheduling.volcano.sh", "v1beta1"),
    "scheduler-plugins": ("scheduling.x-k8s.io", "v1alpha1"),
    "native": ("scheduling.k8s.io", "v1beta1"),
}


def get_pod_group(cluster: E2ECluster, namespace: str, name: str) -> dict[str, Any] | None:
    """The PodGroup of this flavour's scheduler, or None when there is none."""
    group, version = POD_GROUP_APIS[cluster.flavour]
    try:
        return cluster.get_custom(group, version, namespace, "podgroups", name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def gang_min_count(pod_group: dict[str, Any]) -> int:
    """How many pods the PodGroup waits for: `minMember`, or Kubernetes' own
    `schedulingPolicy.gang.minCount`."""
    spec = pod_group["spec"]
    if "minMember" in spec:
        return int(spec["minMember"])
    return int(spec["schedulingPolicy"]["gang"]["minCount"])


def retry_gang(cluster: E2ECluster, namespace: str, name: str) -> None:
    """Have the scheduler look at a waiting gang again once room has been made for it.

    Coscheduling requeues a gang it turned down only on a Pod add or a PodGroup add/update,
    not on a Node add or a Pod delete, so without a touch the gang waits for the scheduler's
    periodic flush (up to 5 minutes). Even a PodGroup update can be lost: the plugin reads
    PodGroups through a cache of its own, which may not have the update yet when the
    scheduler's event retries the gang. Volcano looks at every gang each second.
    """
    if cluster.flavour != "scheduler-plugins":
        return
    group, version = POD_GROUP_APIS[cluster.flavour]
    stamp = {"metadata": {"annotations": {"e2e.mpi-operator.dev/retry": str(time.time())}}}
    cluster.custom.patch_namespaced_custom_object(
        group, version, namespace, "podgroups", name, stamp
    )


def finish_pod(cluster: E2ECluster, namespace: str, name: str, exit_code: int = 0) -> None:
    """End a simulated pod held with ``sim.mpi-operator.dev/hold``."""
    patch = {"metadata": {"annotations": {"sim.mpi-operator.dev/exit-code": str(exit_code)}}}
    cluster.core.patch_namespaced_pod(name, namespace, patch)


def finish_launcher(cluster: E2ECluster, namespace: str, job_name: str, exit_code: int = 0) -> None:
    """End the held launcher pod(s) of an MPIJob."""
    launchers = pods_of(cluster, namespace, job_name, "launcher")
    assert launchers, f"no launcher pod of {namespace}/{job_name}"
    for pod in launchers:
        finish_pod(cluster, namespace, pod.metadata.name, exit_code)


def run_pi_example(
    cluster: E2ECluster, namespace: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """examples/sdk/pi.py against ``cluster``, as a user runs it; ``timeout``: the job's."""
    return subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "sdk" / "pi.py"),
            f"--kubeconfig={cluster.kubeconfig}",
            f"--namespace={namespace}",
            f"--timeout={timeout:g}",
        ],
        capture_output=True,
        text=True,
        timeout=timeout + 60,
        check=False,
        cwd=REPO,
    )
