"""The operator installed as users install it, running in the local cluster on real nodes.

`kubectl apply --server-side -k` of deploy/overlays/standalone (through an overlay that only
sets two replicas and drops the CPU request), and `helm install` of charts/mpi-operator: the
operator runs as a Deployment from the image hack/images built, with the in-cluster
configuration (the `kubernetes` Service, the ServiceAccount's token) and the RBAC shipped with
it; the pi example succeeds under each; its probes' and metrics' endpoints answer through the
API server's pod proxy; with two replicas one holds the Lease and the other takes over when the
leader's pod is deleted.

Two replicas and the pi job share two real nodes of two CPUs each, and pi asks for three whole
CPUs: the operator's pods request none, so they never keep a rank from fitting.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from hack.cluster.images import images_tool
from mpi_operator import sdk
from tests.tools import run_helm

from .clusters import REPO, E2ECluster, wait_until
from .installs import SELECTOR, images_build, kubectl, operator_pods, ready
from .operator import run_pi_example

pytestmark = [pytest.mark.e2e, pytest.mark.realnodes]

STANDALONE = REPO / "deploy" / "overlays" / "standalone"
CHART = REPO / "charts" / "mpi-operator"
NAMESPACE = "mpi-operator"
LEASE = "mpi-operator"
# The ClusterRoles for people, which aggregate into Kubeflow's.
USER_ROLES = "kubeflow-mpijobs-"
# What deploy/base and the chart's appVersion name: the operator image of this version.
IMAGE = images_tool().Spec.load().operator.name
HEALTH_PORT = 8080
METRICS_PORT = 8081
# Generous: pods start on a machine other tests keep busy.
ROLLOUT_TIMEOUT = 240
JOB_TIMEOUT = 300


@pytest.fixture(scope="module")
def image_digests() -> set[str]:
    """The manifest and config digests of the operator image the real nodes imported."""
    listing = images_build("--list")
    (tar_path,) = [line.split()[1] for line in listing.splitlines() if line.startswith(IMAGE)]
    with tarfile.open(tar_path) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        (manifest,) = index["manifests"]
        blob = f"blobs/sha256/{manifest['digest'].removeprefix('sha256:')}"
        config = json.load(tar.extractfile(blob))["config"]  # type: ignore[arg-type]
    return {manifest["digest"], config["digest"]}


def write_overlay(directory: Path) -> Path:
    """deploy/overlays/standalone with two replicas whose pods request no CPU."""
    directory.mkdir(parents=True, exist_ok=True)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(STANDALONE, directory)],
        "patches": [
            {
                "target": {"kind": "Deployment", "name": "mpi-operator"},
                "patch": yaml.safe_dump(
                    [
                        {"op": "replace", "path": "/spec/replicas", "value": 2},
                        {
                            "op": "remove",
                            "path": "/spec/template/spec/containers/0/resources/requests/cpu",
                        },
                    ]
                ),
            }
        ],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return directory


def wait_ready_pods(
    cluster: E2ECluster, namespace: str, count: int, selector: str = SELECTOR
) -> list[dict[str, Any]]:
    def all_ready() -> list[dict[str, Any]] | None:
        pods = operator_pods(cluster, namespace, selector)
        return pods if len(pods) == count and all(ready(p) for p in pods) else None

    return wait_until(
        all_ready,
        ROLLOUT_TIMEOUT,
        interval=1,
        message=lambda: f"{count} ready operator pods: {describe(cluster, namespace, selector)}",
    )


def describe(cluster: E2ECluster, namespace: str, selector: str = SELECTOR) -> str:
    """Pod phases, container states and the last log lines, for a failure message."""
    lines = []
    for pod in cluster.list_pods(namespace, label_selector=selector):
        name = pod["metadata"]["name"]
        lines.append(f"{name}: {json.dumps(pod.get('status', {}).get('containerStatuses'))}")
        try:
            log = str(cluster.core.read_namespaced_pod_log(name, namespace, tail_lines=20))
        except ApiException as error:
            log = f"(no log: {error.reason})"
        lines.append(log)
    return "\n".join(lines)


def lease_holder(cluster: E2ECluster, namespace: str) -> str:
    lease = k8s.CoordinationV1Api(cluster.api).read_namespaced_lease(LEASE, namespace)
    return str(lease.spec.holder_identity or "")


def leader_pod(cluster: E2ECluster, namespace: str, pods: list[dict[str, Any]]) -> str | None:
    """The pod whose identity (``<pod name>_<uuid>``) holds the Lease."""
    holder = lease_holder(cluster, namespace)
    names = [p["metadata"]["name"] for p in pods if holder.startswith(p["metadata"]["name"] + "_")]
    return names[0] if names else None


def proxy_get(cluster: E2ECluster, namespace: str, pod: str, port: int, path: str) -> str:
    """GET through the API server's pod proxy, as `kubectl get --raw` would."""
    return str(
        cluster.core.connect_get_namespaced_pod_proxy_with_path(f"{pod}:{port}", namespace, path)
    )


def assert_pi_succeeds(cluster: E2ECluster, namespace: str, context: Callable[[], str]) -> None:
    example = run_pi_example(cluster, namespace, timeout=JOB_TIMEOUT)
    assert example.returncode == 0, f"{example.stdout}\n{example.stderr}\n{context()}"
    assert "pi is approximately 3.14159" in example.stdout, example.stdout
    assert sdk.phase(cluster.jobs.get("pi", namespace=namespace)) == "Succeeded"


@pytest.fixture(scope="class")
def installed(
    real_node_cluster: E2ECluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[dict[str, Any]]]:
    overlay = write_overlay(tmp_path_factory.mktemp("overlay") / "local")
    kubectl(real_node_cluster, "apply", "--server-side", "-k", str(overlay))
    try:
        yield wait_ready_pods(real_node_cluster, NAMESPACE, 2)
    finally:
        rendered = kubectl(real_node_cluster, "kustomize", str(overlay))
        uninstall(real_node_cluster, [doc for doc in yaml.safe_load_all(rendered) if doc])


def uninstall(cluster: E2ECluster, installed: list[dict[str, Any]]) -> None:
    """Everything but what the cluster keeps: the CRD, which other tests' operators use, and
    the user roles (the aggregated admin role, deleted while the controller-manager aggregates
    the roles deleted with it, came back empty and unlabelled here). The namespace takes the
    Deployment, ServiceAccount and Lease with it."""
    removed = [
        doc
        for doc in installed
        if doc["kind"] != "CustomResourceDefinition"
        and not doc["metadata"]["name"].startswith(USER_ROLES)
    ]
    kubectl(
        cluster,
        "delete",
        "--wait=true",
        "--ignore-not-found",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(removed),
    )


class TestKustomizeInstall:
    """Installed by `kubectl apply --server-side -k`, two replicas."""

    def test_runs_the_built_image_as_shipped_on_real_nodes(
        self,
        real_node_cluster: E2ECluster,
        installed: list[dict[str, Any]],
        image_digests: set[str],
    ) -> None:
        for pod in installed:
            spec = pod["spec"]
            assert spec["nodeName"].startswith("real-node-")
            assert spec["serviceAccountName"] == "mpi-operator"
            (container,) = spec["containers"]
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert spec["securityContext"]["runAsUser"] == 65532
            (status,) = pod["status"]["containerStatuses"]
            assert status["imageID"].rsplit("@", 1)[-1] in image_digests, status
            assert status["restartCount"] == 0, describe(real_node_cluster, NAMESPACE)
            # The in-cluster configuration: no kubeconfig, the Service's address from the
            # kubelet's environment, the token of the shipped ServiceAccount.
            assert "--kubeconfig" not in " ".join(container.get("args", []))
        # Reading the Lease and writing status both went through the shipped RBAC.
        assert leader_pod(real_node_cluster, NAMESPACE, installed) is not None

    def test_probes_and_metrics_answer_through_the_pod_proxy(
        self, real_node_cluster: E2ECluster, installed: list[dict[str, Any]]
    ) -> None:
        for pod in installed:
            name = pod["metadata"]["name"]
            assert (
                proxy_get(real_node_cluster, NAMESPACE, name, HEALTH_PORT, "healthz")
                .strip()
                .endswith("ok")
            )
            assert (
                proxy_get(real_node_cluster, NAMESPACE, name, HEALTH_PORT, "readyz")
                .strip()
                .endswith("ok")
            )
        leader = leader_pod(real_node_cluster, NAMESPACE, installed)
        assert leader is not None
        metrics = proxy_get(real_node_cluster, NAMESPACE, leader, METRICS_PORT, "metrics")
        assert "# TYPE workqueue_depth gauge" in metrics, metrics[:2000]

    def test_pi_succeeds(
        self,
        real_node_cluster: E2ECluster,
        installed: list[dict[str, Any]],
        namespace_factory: Callable[..., str],
    ) -> None:
        namespace = namespace_factory(real_node_cluster, restricted=True)
        assert_pi_succeeds(
            real_node_cluster, namespace, lambda: describe(real_node_cluster, NAMESPACE)
        )

    def test_the_standby_takes_over_when_the_leader_goes(
        self,
        real_node_cluster: E2ECluster,
        installed: list[dict[str, Any]],
        namespace_factory: Callable[..., str],
    ) -> None:
        """The leader's pod is deleted by scaling down to one replica (its deletion cost makes
        it the one to go), so no replacement pod can race the standby for the Lease."""
        pods = operator_pods(real_node_cluster, NAMESPACE)
        leader = leader_pod(real_node_cluster, NAMESPACE, pods)
        assert leader is not None, lease_holder(real_node_cluster, NAMESPACE)
        (standby,) = [p["metadata"]["name"] for p in pods if p["metadata"]["name"] != leader]
        for name, cost in ((leader, "-100"), (standby, "100")):
            real_node_cluster.core.patch_namespaced_pod(
                name,
                NAMESPACE,
                {"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": cost}}},
            )

        kubectl(
            real_node_cluster,
            "scale",
            f"--namespace={NAMESPACE}",
            "deployment/mpi-operator",
            "--replicas=1",
        )

        wait_until(
            lambda: lease_holder(real_node_cluster, NAMESPACE).startswith(standby + "_"),
            ROLLOUT_TIMEOUT,
            interval=1,
            message=lambda: (
                f"{standby} to hold the Lease: {lease_holder(real_node_cluster, NAMESPACE)}"
            ),
        )
        assert [
            p["metadata"]["name"] for p in wait_ready_pods(real_node_cluster, NAMESPACE, 1)
        ] == [standby]
        namespace = namespace_factory(real_node_cluster, restricted=True)
        assert_pi_succeeds(
            real_node_cluster, namespace, lambda: describe(real_node_cluster, NAMESPACE)
        )


def test_a_helm_install_runs_pi(
    real_node_cluster: E2ECluster,
    namespace_factory: Callable[..., str],
    tmp_path: Path,
) -> None:
    """`helm install` with the chart's defaults (the image of its appVersion, which the nodes
    imported) but no CPU request and no user roles."""
    release_namespace = namespace_factory(real_node_cluster, restricted=True)
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "replicaCount": 1,
                # The kustomize install's user roles stay in the cluster (see above).
                "rbac": {"userRoles": False},
                # null removes the chart's default CPU request.
                "resources": {"requests": {"cpu": None}},
            }
        )
    )

    def helm(*args: str) -> subprocess.CompletedProcess[str]:
        return run_helm(real_node_cluster.kubeconfig, tmp_path, *args, timeout=ROLLOUT_TIMEOUT + 60)

    installed = helm(
        "install",
        "mpi",
        str(CHART),
        f"--namespace={release_namespace}",
        f"--values={values}",
        "--wait",
        f"--timeout={ROLLOUT_TIMEOUT}s",
    )
    try:
        assert installed.returncode == 0, installed.stderr + describe(
            real_node_cluster, release_namespace
        )
        (pod,) = wait_ready_pods(real_node_cluster, release_namespace, 1)
        assert pod["spec"]["nodeName"].startswith("real-node-")
        jobs_namespace = namespace_factory(real_node_cluster, restricted=True)
        assert_pi_succeeds(
            real_node_cluster,
            jobs_namespace,
            lambda: describe(real_node_cluster, release_namespace),
        )
    finally:
        uninstalled = helm("uninstall", "mpi", f"--namespace={release_namespace}", "--wait")
        assert uninstalled.returncode == 0, uninstalled.stderr
