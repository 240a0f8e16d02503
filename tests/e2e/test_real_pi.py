"""The examples compute pi in real containers: the operator's objects, unchanged, start
mpirun on the launcher, which reaches one rank on every worker pod over SSH."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from .clusters import REPO, E2ECluster
from .operator import OperatorProcess, create_mpijob, operator_fixture, wait_for_condition

pytestmark = [pytest.mark.e2e, pytest.mark.realnodes]

EXAMPLES = REPO / "examples" / "pi"
RANK_LINE = re.compile(r"^rank (\d+) on (\S+)$", re.MULTILINE)
PI_LINE = re.compile(r"^pi is approximately (3\.\d+)", re.MULTILINE)


operator = operator_fixture("default", real_nodes=True)


def with_image(image: str | None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The example with every container's image replaced (Open MPI 5 has no example)."""

    def edit(job: dict[str, Any]) -> dict[str, Any]:
        if image is not None:
            job["metadata"]["name"] += "-ompi5"
            for spec in job["spec"]["mpiReplicaSpecs"].values():
                for container in spec["template"]["spec"]["containers"]:
                    container["image"] = image
        return job

    return edit


@pytest.mark.parametrize(
    ("example", "edit"),
    [
        pytest.param("pi.yaml", with_image(None), id="openmpi4"),
        pytest.param("pi.yaml", with_image("mpioperator/mpi-pi:openmpi5"), id="openmpi5"),
        pytest.param("pi-mpich.yaml", with_image(None), id="mpich"),
        pytest.param("pi-intel.yaml", with_image(None), id="intel"),
    ],
)
def test_example_computes_pi_with_one_rank_on_each_worker(
    real_cluster: E2ECluster,
    namespace_factory: Callable[[E2ECluster], str],
    operator: OperatorProcess,
    example: str,
    edit: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    ns = namespace_factory(real_cluster)
    job = edit(yaml.safe_load((EXAMPLES / example).read_text()))
    name = job["metadata"]["name"]
    workers = job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    create_mpijob(real_cluster, ns, job)

    wait_for_condition(real_cluster, ns, name, "Succeeded", timeout=300, operator=operator)

    launcher = real_cluster.list_pods(ns, label_selector=f"job-name={name}-launcher")
    assert len(launcher) == 1, launcher
    log = str(real_cluster.core.read_namespaced_pod_log(launcher[0]["metadata"]["name"], ns))
    pi = PI_LINE.search(log)
    assert pi is not None, log
    assert pi.group(1)[:8] == "3.141592", log
    hosts = sorted(host for _, host in RANK_LINE.findall(log))
    assert hosts == [f"{name}-worker-{i}" for i in range(workers)], log
