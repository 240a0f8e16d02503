"""The namespace-scoped installs on the local cluster, and the operator running with exactly the
RBAC they ship: the Helm chart installed by a real helm, and the hardened kustomize overlay
(deploy/overlays/namespaced) applied by kubectl, each run the pi example to success.

The operator runs as a local process with the install's ServiceAccount token (the Deployment has
no replicas: kwok nodes run no containers); what this proves is that the API server accepts
every object the install renders and that its Roles grant all the operator needs.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kubernetes import config as k8s_config

import hack.cluster as localcluster
from mpi_operator import sdk
from tests.tools import run_helm

from .clusters import REPO, E2ECluster, wait_until
from .operator import OperatorProcess, run_pi_example
from .rbac import allowed, token_kubeconfig

pytestmark = pytest.mark.e2e

CHART = REPO / "charts" / "mpi-operator"
NAMESPACED = REPO / "deploy" / "overlays" / "namespaced"


def test_a_namespace_scoped_helm_install_runs_pi(
    cluster: E2ECluster,
    namespace_factory: Callable[[E2ECluster], str],
    tmp_path: Path,
) -> None:
    release_namespace = namespace_factory(cluster)
    jobs_namespace = namespace_factory(cluster)

    def helm(*args: str) -> subprocess.CompletedProcess[str]:
        return run_helm(cluster.kubeconfig, tmp_path, *args)

    installed = helm(
        "install",
        "mpi",
        str(CHART),
        f"--namespace={release_namespace}",
        "--set=rbac.scope=namespace",
        f"--set=operator.namespace={jobs_namespace}",
        # Cluster-wide user roles would be owned by this release alone; other tests use them.
        "--set=rbac.userRoles=false",
        "--set=replicaCount=0",
        "--wait",
    )
    assert installed.returncode == 0, installed.stderr
    assert f"It watches {jobs_namespace}" in installed.stdout, installed.stdout
    kubeconfig = token_kubeconfig(cluster.kubeconfig, release_namespace, "mpi-operator", tmp_path)
    try:
        operator_runs_pi(cluster, tmp_path, kubeconfig, release_namespace, jobs_namespace)
    finally:
        uninstalled = helm("uninstall", "mpi", f"--namespace={release_namespace}", "--wait")
        assert uninstalled.returncode == 0, uninstalled.stderr


def test_the_namespaced_overlay_runs_pi(
    cluster: E2ECluster,
    namespace_factory: Callable[[E2ECluster], str],
    tmp_path: Path,
) -> None:
    """deploy/overlays/namespaced in a fresh namespace (through an overlay that only sets the
    namespace and no replicas); its cluster-wide objects, the CRD and the user roles, are left
    to the cluster as other tests use them. The operator's token reads nothing cluster-scoped."""
    namespace = namespace_factory(cluster)
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    replicas = [{"op": "replace", "path": "/spec/replicas", "value": 0}]
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": namespace,
        "resources": [os.path.relpath(NAMESPACED, overlay)],
        "patches": [
            {
                "target": {"kind": "Deployment", "name": "mpi-operator"},
                "patch": yaml.safe_dump(replicas),
            }
        ],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    rendered = [d for d in yaml.safe_load_all(kubectl(cluster, "kustomize", str(overlay))) if d]
    namespaced = [d for d in rendered if d["metadata"].get("namespace") == namespace]
    cluster_wide = {d["kind"] for d in rendered if d not in namespaced}
    assert cluster_wide == {"CustomResourceDefinition", "ClusterRole"}, cluster_wide
    kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(namespaced))

    kubeconfig = token_kubeconfig(cluster.kubeconfig, namespace, "mpi-operator", tmp_path)
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        wait_until(
            lambda: allowed(api, "kubeflow.org", "mpijobs", "list", namespace),
            10,
            message="the RoleBinding to take effect",
        )
        assert not allowed(api, "kubeflow.org", "mpijobs", "list", "")
    finally:
        api.close()  # type: ignore[no-untyped-call]
    operator_runs_pi(cluster, tmp_path, kubeconfig, namespace, namespace)


def operator_runs_pi(
    cluster: E2ECluster, workdir: Path, kubeconfig: Path, lock_namespace: str, jobs_namespace: str
) -> None:
    """The operator, a local process with ``kubeconfig`` watching ``jobs_namespace``, runs the
    pi example there to success."""
    operator = OperatorProcess(
        cluster,
        workdir,
        kubeconfig=kubeconfig,
        lock_namespace=lock_namespace,
        extra_args=[f"--namespace={jobs_namespace}"],
    )
    try:
        operator.start()
        example = run_pi_example(cluster, jobs_namespace)
        assert example.returncode == 0, example.stderr + operator.log_tail()
        assert sdk.phase(cluster.jobs.get("pi", namespace=jobs_namespace)) == "Succeeded"
    finally:
        assert operator.stop() == 0, operator.log_tail()


def kubectl(cluster: E2ECluster, *args: str, stdin: str | None = None) -> str:
    """The local cluster's pinned kubectl against ``cluster``; its output."""
    binary = localcluster.bin_dir(build=False) / "kubectl"
    command = [str(binary), f"--kubeconfig={cluster.kubeconfig}", *args]
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout
