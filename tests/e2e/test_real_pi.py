"""The examples compute pi in real containers: the operator's objects, unchanged, start
mpirun on the launcher, which reaches one rank on every worker pod over SSH, in a namespace
that enforces the restricted Pod Security Standard (non-root, no privilege escalation, every
capability dropped, the runtime's default seccomp profile)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .clusters import E2ECluster
from .operator import OperatorProcess, create_mpijob, wait_for_condition
from .realpods import assert_pi, example, launcher_log, rank_hosts, set_image

pytestmark = [pytest.mark.e2e, pytest.mark.realnodes]


def with_image(image: str | None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The example with every container's image replaced (Open MPI 5 has no example)."""

    def edit(job: dict[str, Any]) -> dict[str, Any]:
        if image is not None:
            job["metadata"]["name"] += "-ompi5"
            set_image(job, image)
        return job

    return edit


@pytest.mark.parametrize(
    ("file", "edit"),
    [
        pytest.param("pi.yaml", with_image(None), id="openmpi4"),
        pytest.param("pi.yaml", with_image("mpioperator/mpi-pi:openmpi5"), id="openmpi5"),
        pytest.param("pi-mpich.yaml", with_image(None), id="mpich"),
        pytest.param("pi-intel.yaml", with_image(None), id="intel"),
    ],
)
def test_example_computes_pi_with_one_rank_on_each_worker(
    real_cluster: E2ECluster,
    namespace_factory: Callable[..., str],
    real_operator: OperatorProcess,
    file: str,
    edit: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    ns = namespace_factory(real_cluster, restricted=True)
    job = edit(example(file))
    name = job["metadata"]["name"]
    workers = job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    create_mpijob(real_cluster, ns, job)

    wait_for_condition(real_cluster, ns, name, "Succeeded", timeout=300, operator=real_operator)

    log = launcher_log(real_cluster, ns, name)
    assert_pi(log)
    assert rank_hosts(log) == [f"{name}-worker-{i}" for i in range(workers)], log
