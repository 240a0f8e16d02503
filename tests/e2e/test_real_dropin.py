"""Upstream's Deployments, unchanged but for the image, start this operator on real nodes.

kubeflow/mpi-operator v0.8.2's Deployment and the container of training-operator v1.8.1's,
written here from their manifests, with this project's image; the rest of the install (the
ServiceAccount, RBAC and CRD) is deploy/overlays/standalone's, in a namespace that, like
upstream's, enforces no Pod Security Standard. Each runs the operator to Ready (its `/readyz`
through the API server's pod proxy) and the pi example to Succeeded.

The image goes by a version tag: upstream's `:latest` would make the kubelet pull on every
start (`imagePullPolicy: Always` is the default for `:latest`), and the real nodes have no
registry, so the test tags the image the nodes imported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

import hack.cluster as localcluster
from hack.cluster import realnodes

from .clusters import E2ECluster, wait_until
from .operator import ensure_namespace
from .test_real_install import (
    HEALTH_PORT,
    IMAGE,
    NAMESPACE,
    ROLLOUT_TIMEOUT,
    STANDALONE,
    assert_pi_succeeds,
    describe,
    kubectl,
    operator_pods,
    proxy_get,
    uninstall,
    wait_ready_pods,
)

pytestmark = [pytest.mark.e2e, pytest.mark.realnodes]

# As a release names the image: by a version, not `:latest`.
TAGGED_IMAGE = IMAGE.rsplit(":", 1)[0] + ":drop-in"


def upstream_deployment() -> dict[str, Any]:
    """kubeflow/mpi-operator v0.8.2, manifests/base/deployment.yaml: only `image` differs."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "mpi-operator"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "mpi-operator"}},
            "template": {
                "metadata": {
                    "labels": {"app": "mpi-operator"},
                    "annotations": {"sidecar.istio.io/inject": "false"},
                },
                "spec": {
                    "containers": [
                        {
                            "args": ["-alsologtostderr"],
                            "image": TAGGED_IMAGE,
                            "name": "mpi-operator",
                        }
                    ],
                    "serviceAccountName": "mpi-operator",
                },
            },
        },
    }


def training_operator_deployment() -> dict[str, Any]:
    """training-operator v1.8.1, manifests/base/deployment.yaml: its labels, container name,
    ports, environment and security context, with this image and this install's account. Left
    out: `command: [/manager]` (training-operator's binary; this image's entrypoint starts the
    operator), the probes on :8081 (here `/healthz` and `/readyz` are on :8080) and the
    webhook's certificate volume (no webhook here)."""
    labels = {"control-plane": "kubeflow-training-operator"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "training-operator", "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "replicas": 1,
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"sidecar.istio.io/inject": "false"},
                },
                "spec": {
                    "containers": [
                        {
                            "image": TAGGED_IMAGE,
                            "name": "training-operator",
                            "ports": [
                                {"containerPort": 8080},
                                {
                                    "containerPort": 9443,
                                    "name": "webhook-server",
                                    "protocol": "TCP",
                                },
                            ],
                            "env": [
                                {
                                    "name": "MY_POD_NAMESPACE",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                },
                                {
                                    "name": "MY_POD_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                },
                            ],
                            "securityContext": {"allowPrivilegeEscalation": False},
                        }
                    ],
                    "serviceAccountName": "mpi-operator",
                    "terminationGracePeriodSeconds": 10,
                },
            },
        },
    }


def standalone_install(cluster: E2ECluster) -> list[dict[str, Any]]:
    return [
        doc for doc in yaml.safe_load_all(kubectl(cluster, "kustomize", str(STANDALONE))) if doc
    ]


def tag_image_on_nodes(cluster: E2ECluster) -> None:
    directory = localcluster.cluster_dir(cluster.name)
    for node in kubectl(cluster, "get", "nodes", "-o", "name").split():
        paths = realnodes.node_paths(directory, node.removeprefix("node/"))
        realnodes.ctr(paths, "images", "tag", "--force", IMAGE, TAGGED_IMAGE)


@pytest.fixture(scope="module")
def install_without_deployment(real_node_cluster: E2ECluster) -> Iterator[None]:
    """The ServiceAccount, RBAC and CRD of deploy/overlays/standalone, in a namespace like
    upstream's: its own Namespace enforces the restricted Pod Security Standard, which
    upstream's Deployment (no security context) does not meet."""
    tag_image_on_nodes(real_node_cluster)
    objects = standalone_install(real_node_cluster)
    kept = [doc for doc in objects if doc["kind"] not in ("Namespace", "Deployment")]
    ensure_namespace(real_node_cluster, NAMESPACE)
    installed = yaml.safe_dump_all(kept)
    kubectl(real_node_cluster, "apply", "--server-side", "-f", "-", stdin=installed)
    try:
        yield
    finally:
        uninstall(real_node_cluster, [doc for doc in objects if doc["kind"] != "Deployment"])


def run_deployment(cluster: E2ECluster, deployment: dict[str, Any], jobs_namespace: str) -> None:
    """The Deployment in the install's namespace runs the operator to Ready and pi to
    Succeeded; removed afterwards."""
    manifest = yaml.safe_dump(deployment)
    kubectl(cluster, "create", f"--namespace={NAMESPACE}", "-f", "-", stdin=manifest)
    name = deployment["metadata"]["name"]
    labels = deployment["spec"]["selector"]["matchLabels"]
    selector = ",".join(f"{key}={value}" for key, value in labels.items())

    def context() -> str:
        return describe(cluster, NAMESPACE, selector)

    try:
        (pod,) = wait_ready_pods(cluster, NAMESPACE, 1, selector)
        pod_name = pod["metadata"]["name"]
        assert pod["spec"]["nodeName"].startswith("real-node-")
        (status,) = pod["status"]["containerStatuses"]
        assert status["restartCount"] == 0, context()
        # Neither Deployment has a readiness probe: the pod is Ready once its container
        # starts, before the operator's caches have synced.
        wait_until(
            lambda: (
                proxy_get(cluster, NAMESPACE, pod_name, HEALTH_PORT, "readyz")
                .strip()
                .endswith("ok")
            ),
            ROLLOUT_TIMEOUT,
            interval=1,
            message=lambda: f"the operator's /readyz ok: {context()}",
        )
        # One line names the klog flags it was given, which change nothing here.
        log = str(cluster.core.read_namespaced_pod_log(pod_name, NAMESPACE))
        ignored = [line for line in log.splitlines() if "ignoring klog's flags" in line]
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        klog_flags = [arg.lstrip("-").partition("=")[0] for arg in container.get("args", [])]
        assert len(ignored) == (1 if klog_flags else 0), log
        assert all(flag in ignored[0] for flag in klog_flags), ignored
        assert_pi_succeeds(cluster, jobs_namespace, context)
    finally:
        kubectl(cluster, "delete", f"--namespace={NAMESPACE}", f"deployment/{name}")
        wait_until(
            lambda: not operator_pods(cluster, NAMESPACE, selector),
            120,
            message=f"{name}'s pods gone",
        )


@pytest.mark.parametrize(
    "deployment",
    [upstream_deployment, training_operator_deployment],
    ids=["kubeflow-mpi-operator-v0.8.2", "training-operator-v1.8.1"],
)
def test_an_upstream_deployment_runs_this_operator_and_pi(
    real_node_cluster: E2ECluster,
    install_without_deployment: None,
    namespace_factory: Callable[..., str],
    deployment: Callable[[], dict[str, Any]],
) -> None:
    namespace = namespace_factory(real_node_cluster, restricted=True)
    run_deployment(real_node_cluster, deployment(), namespace)
