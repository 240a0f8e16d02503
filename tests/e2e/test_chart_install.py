"""The Helm chart installed by a real helm into the local cluster, and the operator running with
exactly the RBAC it ships: a namespace-scoped install runs the pi example to success.

The operator runs as a local process with the chart's ServiceAccount token (the Deployment has
no replicas: kwok nodes run no containers); what this proves is that the API server accepts
every object the chart renders and that its Roles grant all the operator needs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from mpi_operator import sdk
from tests.tools import run_helm

from .clusters import REPO, E2ECluster
from .operator import OperatorProcess, run_pi_example
from .rbac import token_kubeconfig

pytestmark = pytest.mark.e2e

CHART = REPO / "charts" / "mpi-operator"


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
    operator = OperatorProcess(
        cluster,
        tmp_path,
        kubeconfig=token_kubeconfig(
            cluster.kubeconfig, release_namespace, "mpi-operator", tmp_path
        ),
        lock_namespace=release_namespace,
        extra_args=[f"--namespace={jobs_namespace}"],
    )
    try:
        operator.start()
        example = run_pi_example(cluster, jobs_namespace)
        assert example.returncode == 0, example.stderr + operator.log_tail()
        done = cluster.jobs.get("pi", namespace=jobs_namespace)
        assert sdk.phase(done) == "Succeeded"
    finally:
        assert operator.stop() == 0, operator.log_tail()
        uninstalled = helm("uninstall", "mpi", f"--namespace={release_namespace}", "--wait")
        assert uninstalled.returncode == 0, uninstalled.stderr
