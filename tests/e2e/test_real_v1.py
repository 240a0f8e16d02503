"""kubeflow.org/v1 jobs compute pi in real containers over kubectl exec: the launcher's mpirun
starts one rank in each worker through the kubectl its init container delivered, under the
launcher's own account, with no sshd, SSH key or Service, in a namespace that enforces the
restricted Pod Security Standard."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from .clusters import REPO, E2ECluster
from .operator import GROUP, PLURAL, OperatorProcess, wait_for_condition
from .realpods import assert_pi, launcher_log, rank_hosts, set_image

pytestmark = [pytest.mark.e2e, pytest.mark.realnodes]

V1_EXAMPLE = REPO / "examples" / "v1" / "pi.yaml"


def v1_example(image: str | None, suffix: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(V1_EXAMPLE.read_text())
    job["metadata"]["name"] += suffix
    if image is not None:
        set_image(job, image)
    return job


def create_v1(cluster: E2ECluster, namespace: str, job: dict[str, Any]) -> None:
    job["metadata"]["namespace"] = namespace
    cluster.custom.create_namespaced_custom_object(GROUP, "v1", namespace, PLURAL, job)


@pytest.mark.parametrize(
    ("image", "suffix"),
    [
        pytest.param(None, "", id="openmpi4"),
        pytest.param("mpioperator/mpi-pi:openmpi5", "-ompi5", id="openmpi5"),
    ],
)
def test_a_v1_job_computes_pi_over_kubectl_exec(
    real_cluster: E2ECluster,
    namespace_factory: Callable[..., str],
    real_operator: OperatorProcess,
    image: str | None,
    suffix: str,
) -> None:
    ns = namespace_factory(real_cluster, restricted=True)
    job = v1_example(image, suffix)
    name = job["metadata"]["name"]
    create_v1(real_cluster, ns, job)

    try:
        done = wait_for_condition(
            real_cluster, ns, name, "Succeeded", timeout=300, operator=real_operator
        )
    except BaseException:
        sys.stderr.write(f"--- launcher log ---\n{launcher_log(real_cluster, ns, name)}\n")
        raise
    assert done["spec"]["transport"] == "KubectlExec"
    log = launcher_log(real_cluster, ns, name)
    assert_pi(log)
    assert rank_hosts(log) == [f"{name}-worker-0", f"{name}-worker-1"], log
    # Nothing of the SSH transport was made.
    core = real_cluster.core
    for read, child in (
        (core.read_namespaced_service, name),
        (core.read_namespaced_secret, f"{name}-ssh"),
    ):
        with pytest.raises(k8s.ApiException) as missing:
            read(child, ns)
        assert missing.value.status == 404
