"""What the tests of installed operators share: kubectl against the cluster, and the
operator's pods as the shipped Deployment labels them."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import hack.cluster as localcluster

from .clusters import REPO, E2ECluster

# The shipped Deployment's pod label.
SELECTOR = "app.kubernetes.io/name=mpi-operator"


def images_build(*args: str) -> str:
    """What hack/images/build.py prints with ``args`` (``--list``: names and tar paths)."""
    return subprocess.run(
        [sys.executable, str(REPO / "hack" / "images" / "build.py"), *args],
        capture_output=True,
        text=True,
        timeout=3600,
        check=True,
    ).stdout


def kubectl(cluster: E2ECluster, *args: str, stdin: str | None = None) -> str:
    done = run_kubectl(cluster, *args, stdin=stdin)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def run_kubectl(
    cluster: E2ECluster, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """kubectl against the cluster; a refusal is returned, not failed on."""
    binary = localcluster.bin_dir(build=False) / "kubectl"
    return subprocess.run(
        [str(binary), f"--kubeconfig={cluster.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def operator_pods(
    cluster: E2ECluster, namespace: str, selector: str = SELECTOR
) -> list[dict[str, Any]]:
    """The operator's pods in namespace, but those being deleted."""
    return [
        pod
        for pod in cluster.list_pods(namespace, label_selector=selector)
        if not pod["metadata"].get("deletionTimestamp")
    ]


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
