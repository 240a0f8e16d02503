"""Taking over from kubeflow/mpi-operator v0.8.2 while its jobs are in flight.

Upstream's own operator (bench/build-upstream.sh builds it from its source) runs against
upstream's own CRD, read from its Go module (`manifests/base/kubeflow.org_mpijobs.yaml`) and
applied under a field manager of its own; it runs jobs to every state: one running, one
succeeded and one failed, both with `ttlSecondsAfterFinished: 60` and their finish dated two
hours back through the status subresource, and one suspended. Then, as docs/migrating.md says:
upstream stops, this project's CRD replaces upstream's with `kubectl apply --server-side
--force-conflicts`, this operator starts. Every MPIJob is still there, the running job keeps its
pods and launcher Job and then finishes under this operator, and the finished and suspended
jobs keep their status.

The same for training-operator v1.8.1: its CRD replaced under its v1 jobs, and its own
operator (hack/cluster/build-training-operator.sh) beside this one with its MPIJob controller
off. And `helm install` over upstream's CRD, which Helm leaves in place.

Its own module: no other operator may run meanwhile, or it would act on the jobs too.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

import hack.cluster as localcluster
from tests.tools import run_helm

from .clusters import REPO, SIM, E2ECluster, go_module_dir, wait_until
from .installs import kubectl, run_kubectl
from .operator import (
    GROUP,
    OPERATOR_NAMESPACE,
    PLURAL,
    VERSION,
    OperatorProcess,
    condition,
    create_mpijob,
    ensure_namespace,
    finish_launcher,
    finish_pod,
    get_mpijob,
    pods_of,
    settle,
    sim_job,
    stop_process,
    wait_for_condition,
)
from .rbac import CRD_FILE, MPIJOB_CRD
from .test_v1 import create, v1_job

pytestmark = pytest.mark.e2e

BUILD_UPSTREAM = REPO / "bench" / "build-upstream.sh"
CHART = REPO / "charts" / "mpi-operator"
UPSTREAM_MODULE = "github.com/kubeflow/mpi-operator@v0.8.2"
UPSTREAM_CRD = Path("manifests") / "base" / "kubeflow.org_mpijobs.yaml"
TRAINING_OPERATOR_MODULE = "github.com/kubeflow/training-operator@v1.8.1"
TRAINING_OPERATOR_CRD = Path("manifests") / "base" / "crds" / "kubeflow.org_mpijobs.yaml"
# How upstream's install applied its CRD: a field manager other than the one replacing it.
UPSTREAM_FIELD_MANAGER = "mpi-operator-v0.8"
TRAINING_OPERATOR_FIELD_MANAGER = "training-operator-v1.8"
TRAINING_OPERATOR_TFJOB_CRD = Path("manifests") / "base" / "crds" / "kubeflow.org_tfjobs.yaml"
# The webhook configuration and certificate Secret training-operator's install provides.
TRAINING_OPERATOR_WEBHOOKS = "validator.training-operator.kubeflow.org"
CERT_SECRET = "training-operator-webhook-cert"
# Where training-operator's cert rotator waits for that Secret's files (not configurable).
TRAINING_OPERATOR_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
BUILD_TRAINING_OPERATOR = REPO / "hack" / "cluster" / "build-training-operator.sh"
# Upstream's health server listens on this port of every interface; no flag moves it.
UPSTREAM_HEALTH_PORT = 8080
TTL = 60
FINISHED_AGO = timedelta(hours=2)
RECONCILES = "controller_runtime_reconcile_total"
SUCCESSES = 'controller="mpijob",result="success"'


def port_taken(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def upstream_binary() -> Path:
    """Upstream's operator, built and cached by version when missing (minutes, cold)."""
    built = subprocess.run(
        ["bash", str(BUILD_UPSTREAM)], check=True, stdout=subprocess.PIPE, text=True
    )
    return Path(built.stdout.strip())


def module_file(module: str, path: Path) -> Path:
    """A file of a Go module (downloaded through the module proxy when not cached)."""
    return go_module_dir(module) / path


def upstream_crd() -> Path:
    return module_file(UPSTREAM_MODULE, UPSTREAM_CRD)


class ForeignOperator:
    """Another project's operator as a process of ours, its output in ``log_path``."""

    def __init__(self, label: str, command: list[str], env: dict[str, str], log_path: Path) -> None:
        self.label = label
        self.log_path = log_path
        environment = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | env
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=REPO
            )

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise AssertionError(
                f"{self.label} exited with {self.process.returncode}: {self.log()}"
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.process)


def mount_certificates(cluster: E2ECluster, namespace: str) -> None:
    """What the kubelet does for training-operator's pod: its webhook certificate's Secret,
    once its cert rotator has written it, as files in the directory the rotator waits on."""

    def written() -> dict[str, str] | None:
        secret = cluster.core.read_namespaced_secret(CERT_SECRET, namespace)
        data: dict[str, str] = secret.data or {}
        return data if "tls.crt" in data and "tls.key" in data else None

    data = wait_until(written, 60, message="training-operator's certificate")
    TRAINING_OPERATOR_CERT_DIR.mkdir(parents=True, exist_ok=True)
    for name, value in data.items():
        (TRAINING_OPERATOR_CERT_DIR / name).write_bytes(base64.b64decode(value))


def start_upstream(cluster: E2ECluster, namespace: str, log_path: Path) -> ForeignOperator:
    """Upstream's operator with the admin's credentials, as its own tests run it."""
    binary = upstream_binary()
    wait_until(
        lambda: not port_taken(UPSTREAM_HEALTH_PORT),
        120,
        message=f"port {UPSTREAM_HEALTH_PORT}, which upstream's health server needs, free",
    )
    command = [
        str(binary),
        f"--kubeConfig={cluster.kubeconfig}",
        f"--namespace={namespace}",
        f"--lock-namespace={OPERATOR_NAMESPACE}",
        "--monitoring-port=0",
    ]
    return ForeignOperator("upstream", command, {}, log_path)


def start_training_operator(cluster: E2ECluster, namespace: str, log_path: Path) -> ForeignOperator:
    """training-operator with every scheme but MPIJob's, its webhook certificate's Secret in
    ``namespace`` (its MY_POD_NAMESPACE), its servers on free loopback ports."""
    built = subprocess.run(
        ["bash", str(BUILD_TRAINING_OPERATOR)], check=True, stdout=subprocess.PIPE, text=True
    )
    command = [
        built.stdout.strip(),
        "--enable-scheme=tfjob",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{localcluster.free_port()}",
        f"--webhook-server-port={localcluster.free_port()}",
    ]
    env = {"KUBECONFIG": cluster.kubeconfig, "MY_POD_NAMESPACE": namespace}
    return ForeignOperator("training-operator", command, env, log_path)


def crd_versions(cluster: E2ECluster) -> dict[str, Any]:
    crd = k8s.ApiextensionsV1Api(cluster.api).read_custom_resource_definition(MPIJOB_CRD)
    serialized = cluster.api.sanitize_for_serialization(crd)  # type: ignore[no-untyped-call]
    return {v["name"]: v for v in serialized["spec"]["versions"]}


def established(cluster: E2ECluster) -> bool:
    crd = k8s.ApiextensionsV1Api(cluster.api).read_custom_resource_definition(MPIJOB_CRD)
    conditions = (crd.status.conditions if crd.status else None) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def apply_crd(cluster: E2ECluster, path: Path, *flags: str) -> None:
    kubectl(cluster, "apply", "--server-side", *flags, "-f", str(path))
    wait_until(lambda: established(cluster), 60, message="the CRD established")


def apply_upstream_crd(cluster: E2ECluster) -> None:
    """Upstream's CRD, as upstream's install applies it: under a field manager of its own."""
    apply_crd(
        cluster, upstream_crd(), f"--field-manager={UPSTREAM_FIELD_MANAGER}", "--force-conflicts"
    )


def wait_upstream_condition(
    cluster: E2ECluster, namespace: str, name: str, kind: str, upstream: ForeignOperator
) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        upstream.check_alive()
        job = get_mpijob(cluster, namespace, name)
        conditions = (job.get("status") or {}).get("conditions") or []
        return job if any(c["type"] == kind and c["status"] == "True" for c in conditions) else None

    return wait_until(reached, 120, message=f"{name} {kind} under upstream")


def backdate_finish(cluster: E2ECluster, namespace: str, name: str) -> dict[str, Any]:
    """The job's finish and its conditions dated FINISHED_AGO back, as if it had finished
    long before the switch (written through the status subresource, as an operator writes)."""
    job = get_mpijob(cluster, namespace, name)
    then = (datetime.now(UTC) - FINISHED_AGO).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = job["status"]
    status["completionTime"] = then
    status["startTime"] = then
    for entry in status["conditions"]:
        entry["lastTransitionTime"] = entry["lastUpdateTime"] = then
    cluster.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": status}
    )
    return get_mpijob(cluster, namespace, name)


def by_type(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The job's conditions, whatever their order."""
    return {c["type"]: c for c in job["status"]["conditions"]}


def uids(items: list[Any]) -> dict[str, str]:
    return {item.metadata.name: item.metadata.uid for item in items}


def children_uids(cluster: E2ECluster, namespace: str, name: str) -> dict[str, str]:
    return {
        **uids(pods_of(cluster, namespace, name)),
        **uids(
            cluster.batch.list_namespaced_job(
                namespace, field_selector=f"metadata.name={name}-launcher"
            ).items
        ),
    }


@pytest.fixture
def our_crd_restored(cluster: E2ECluster) -> Iterator[None]:
    """Ours again after the test, for the tests that follow."""
    yield
    apply_crd(cluster, CRD_FILE, "--force-conflicts")


def assert_ours_served(cluster: E2ECluster) -> None:
    """The served CRD has exactly this project's schemas: nothing of the one it replaced is
    left under the other field manager."""
    served = crd_versions(cluster)
    for version in yaml.safe_load(CRD_FILE.read_text())["spec"]["versions"]:
        assert served[version["name"]]["schema"] == version["schema"], version["name"]


def test_upstreams_jobs_survive_the_switch_running_ones_keep_their_pods(
    cluster: E2ECluster, namespace: str, tmp_path: Path, our_crd_restored: None
) -> None:
    # Upstream's install applied its CRD; storage versions match (v2beta1), so nothing stored
    # needs converting either way.
    apply_upstream_crd(cluster)
    assert set(crd_versions(cluster)) == {"v2beta1"}
    ensure_namespace(cluster, OPERATOR_NAMESPACE)
    upstream = start_upstream(cluster, namespace, tmp_path / "upstream.log")
    try:
        held = sim_job("running").template_annotation("Launcher", SIM + "hold", "true")
        create_mpijob(cluster, namespace, held.obj())
        create_mpijob(
            cluster, namespace, sim_job("done").run_policy(ttlSecondsAfterFinished=TTL).obj()
        )
        failing = (
            sim_job("broken")
            .run_policy(ttlSecondsAfterFinished=TTL, backoffLimit=0)
            .template_annotation("Launcher", SIM + "exit-code", "3")
        )
        create_mpijob(cluster, namespace, failing.obj())
        create_mpijob(cluster, namespace, sim_job("parked").run_policy(suspend=True).obj())
        wait_upstream_condition(cluster, namespace, "running", "Running", upstream)
        wait_upstream_condition(cluster, namespace, "done", "Succeeded", upstream)
        wait_upstream_condition(cluster, namespace, "broken", "Failed", upstream)
        wait_upstream_condition(cluster, namespace, "parked", "Suspended", upstream)
        launcher = cluster.batch.read_namespaced_job("done-launcher", namespace).to_dict()
        assert launcher["spec"]["ttl_seconds_after_finished"] == TTL  # upstream's meaning
    finally:
        upstream.stop()

    finished = {name: backdate_finish(cluster, namespace, name) for name in ("done", "broken")}
    running_children = children_uids(cluster, namespace, "running")
    assert len(running_children) == 4, running_children  # two workers, the launcher, its Job
    parked = get_mpijob(cluster, namespace, "parked")

    apply_crd(cluster, CRD_FILE, "--force-conflicts")
    assert_ours_served(cluster)
    ours = OperatorProcess(cluster, tmp_path, name="ours", extra_args=[f"--namespace={namespace}"])
    ours.start()
    try:
        # Ours waits for upstream's Lease to expire (upstream does not hand it back), then syncs.
        wait_until(
            lambda: (ours.metric(RECONCILES, SUCCESSES) or 0) >= 4,
            120,
            message=f"four syncs by ours (log: {ours.log_path})",
        )
        settle(5)
        listed = cluster.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
        names = {job["metadata"]["name"] for job in listed["items"]}  # type: ignore[index]
        assert names == {"running", "done", "broken", "parked"}
        assert children_uids(cluster, namespace, "running") == running_children
        for name, before in finished.items():
            after = get_mpijob(cluster, namespace, name)
            assert by_type(after) == by_type(before), name
            # The first sync puts the job's state last (docs/differences.md A9).
            assert after["status"]["conditions"][-1]["type"] in ("Succeeded", "Failed"), name
            assert after["status"]["completionTime"] == before["status"]["completionTime"], name
        kept = get_mpijob(cluster, namespace, "parked")
        assert by_type(kept) == by_type(parked)
        assert not pods_of(cluster, namespace, "parked")

        finish_launcher(cluster, namespace, "running")
        wait_for_condition(cluster, namespace, "running", "Succeeded", operator=ours)
        assert set(uids(pods_of(cluster, namespace, "running", "worker"))) <= set(running_children)
    finally:
        assert ours.stop() == 0, ours.log_tail()


def test_back_to_upstream_transport_is_pruned_and_running_replaces_restarting(
    cluster: E2ECluster, namespace: str, tmp_path: Path, our_crd_restored: None
) -> None:
    """The way back: this operator stops, upstream's CRD replaces this one's, upstream starts.
    A job written through kubeflow.org/v1 reads without `spec.transport` (upstream's schema
    prunes it) and keeps its status; a job this operator marked `Restarting` gets upstream's
    `Running=True` in its place once its pods run."""
    ours = OperatorProcess(cluster, tmp_path, name="ours", extra_args=[f"--namespace={namespace}"])
    ours.start()
    try:
        create(cluster, "v1", namespace, sim_job("from-v1").obj())
        finished = wait_for_condition(cluster, namespace, "from-v1", "Succeeded", operator=ours)
        assert finished["spec"]["transport"] == "KubectlExec"
        held = sim_job("flaky").template_annotation("Launcher", SIM + "hold", "true")
        create_mpijob(cluster, namespace, held.obj())
        wait_for_condition(cluster, namespace, "flaky", "Running", operator=ours)
        finish_pod(cluster, namespace, "flaky-worker-0", exit_code=1)
        wait_for_condition(cluster, namespace, "flaky", "Restarting", operator=ours)
    finally:
        # At once: the replaced worker's start would bring Running back.
        ours.stop(signal.SIGKILL)
    restarting = get_mpijob(cluster, namespace, "flaky")
    assert condition(restarting, "Restarting") is not None
    assert condition(restarting, "Running") is None

    apply_crd(cluster, upstream_crd(), "--force-conflicts")
    assert set(crd_versions(cluster)) == {"v2beta1"}
    from_v1 = get_mpijob(cluster, namespace, "from-v1")
    assert "transport" not in from_v1["spec"]
    upstream = start_upstream(cluster, namespace, tmp_path / "upstream.log")
    try:
        running = wait_upstream_condition(cluster, namespace, "flaky", "Running", upstream)
        assert condition(running, "Restarting") is None, running["status"]
        settle()
        kept = get_mpijob(cluster, namespace, "from-v1")
        assert kept["status"]["conditions"] == finished["status"]["conditions"]
    finally:
        upstream.stop()


def test_helm_leaves_upstreams_crd_in_place(
    cluster: E2ECluster,
    namespace_factory: Callable[[E2ECluster], str],
    tmp_path: Path,
    our_crd_restored: None,
) -> None:
    """`helm install` of the chart where upstream's CRD is: Helm installs a chart's CRDs only
    where none exists, so upstream's stays until kubectl replaces it (docs/migrating.md)."""
    apply_upstream_crd(cluster)
    release_namespace = namespace_factory(cluster)
    installed = run_helm(
        cluster.kubeconfig,
        tmp_path,
        "install",
        "mpi",
        str(CHART),
        f"--namespace={release_namespace}",
        "--set=rbac.scope=namespace",
        f"--set=operator.namespace={release_namespace}",
        "--set=rbac.userRoles=false",
        "--set=replicaCount=0",
    )
    try:
        assert installed.returncode == 0, installed.stderr
        assert set(crd_versions(cluster)) == {"v2beta1"}
        apply_crd(cluster, CRD_FILE, "--force-conflicts")
        assert_ours_served(cluster)
    finally:
        uninstalled = run_helm(
            cluster.kubeconfig, tmp_path, "uninstall", "mpi", f"--namespace={release_namespace}"
        )
        assert uninstalled.returncode == 0, uninstalled.stderr


def test_training_operators_crd_is_replaced_and_its_v1_jobs_run(
    cluster: E2ECluster, namespace: str, tmp_path: Path, our_crd_restored: None
) -> None:
    """training-operator v1.8.1's MPIJob CRD (kubeflow.org/v1 only, stored as v1), installed
    under its own field manager, with a job Flyte's way written through it; this CRD replaces
    it and this operator runs the job over kubectl exec."""
    # A CRD may not drop a version objects are stored in: training-operator's (v1 only) comes
    # only where no MPIJob CRD is, as on a cluster that never had kubeflow/mpi-operator.
    kubectl(cluster, "delete", "--ignore-not-found", "--wait=true", f"crd/{MPIJOB_CRD}")
    apply_crd(
        cluster,
        module_file(TRAINING_OPERATOR_MODULE, TRAINING_OPERATOR_CRD),
        f"--field-manager={TRAINING_OPERATOR_FIELD_MANAGER}",
    )
    assert set(crd_versions(cluster)) == {"v1"}
    create(cluster, "v1", namespace, v1_job("flyte"))

    apply_crd(cluster, CRD_FILE, "--force-conflicts")
    assert_ours_served(cluster)
    ours = OperatorProcess(cluster, tmp_path, name="ours", extra_args=[f"--namespace={namespace}"])
    ours.start()
    try:
        done = wait_for_condition(cluster, namespace, "flyte", "Succeeded", operator=ours)
        assert done["spec"]["transport"] == "KubectlExec"
    finally:
        assert ours.stop() == 0, ours.log_tail()
    try:
        # Jobs were stored as v1, which upstream's CRD does not serve: the API server keeps
        # v1 in the CRD's storedVersions and refuses upstream's CRD.
        refused = run_kubectl(
            cluster, "apply", "--server-side", "--force-conflicts", "-f", str(upstream_crd())
        )
        assert refused.returncode != 0
        assert "status.storedVersions" in refused.stderr, refused.stderr
    finally:
        # A fresh CRD (storedVersions v2beta1 alone) for the tests that follow.
        kubectl(cluster, "delete", "--wait=true", f"crd/{MPIJOB_CRD}")


def test_training_operator_without_its_mpijob_scheme_leaves_mpijobs_to_this_operator(
    cluster: E2ECluster, namespace: str, tmp_path: Path
) -> None:
    """training-operator v1.8.1 runs beside this operator with `--enable-scheme=tfjob`: a job
    written through kubeflow.org/v1 is this operator's alone (training-operator, whose
    launcher is a Pod named `<job>-launcher`, creates none) and succeeds."""
    tfjobs = module_file(TRAINING_OPERATOR_MODULE, TRAINING_OPERATOR_TFJOB_CRD)
    kubectl(cluster, "apply", "--server-side", "-f", str(tfjobs))
    wait_until(
        lambda: (
            run_kubectl(
                cluster, "wait", "--for=condition=Established", "crd/tfjobs.kubeflow.org"
            ).returncode
            == 0
        ),
        60,
        message="the TFJob CRD established",
    )
    webhooks = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": TRAINING_OPERATOR_WEBHOOKS},
        "webhooks": [],
    }
    kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(webhooks))
    kubectl(cluster, "create", "secret", "generic", CERT_SECRET, f"--namespace={namespace}")
    training_operator = start_training_operator(cluster, namespace, tmp_path / "to.log")
    ours = OperatorProcess(cluster, tmp_path, name="ours", extra_args=[f"--namespace={namespace}"])
    try:
        mount_certificates(cluster, namespace)
        wait_until(
            lambda: (
                training_operator.check_alive()
                or "registering controllers" in training_operator.log()
            ),
            120,
            message=lambda: f"training-operator's controllers: {training_operator.log()[-3000:]}",
        )
        ours.start()
        create(cluster, "v1", namespace, v1_job("beside"))
        wait_for_condition(cluster, namespace, "beside", "Succeeded", operator=ours)
        training_operator.check_alive()
        assert not [
            p for p in pods_of(cluster, namespace, "beside") if p.metadata.name == "beside-launcher"
        ]
        log = training_operator.log()
        assert '"controller": "tfjob-controller"' in log  # its other kinds run
        assert "mpijob" not in log.lower()
        assert ours.stop() == 0, ours.log_tail()
    finally:
        ours.stop()
        training_operator.stop()
        shutil.rmtree(TRAINING_OPERATOR_CERT_DIR, ignore_errors=True)
        kubectl(
            cluster,
            "delete",
            "--ignore-not-found",
            f"validatingwebhookconfiguration/{TRAINING_OPERATOR_WEBHOOKS}",
        )
