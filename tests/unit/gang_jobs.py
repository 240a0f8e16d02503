"""Jobs from kubeflow/mpi-operator's TestCalculatePGMinResources, shared by the tests of the
gang's size and of every scheduler's PodGroup, which must agree on them."""

from __future__ import annotations

from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.testing.wrappers import MPIJobWrapper, container

HIGH_AND_LOW = ClusterFacts(priority_classes={"high": 100010, "low": 10010})


def two_container_workers() -> MPIJobWrapper:
    """A 2 CPU / 1Gi launcher and two workers of two containers, 10 CPU / 32Gi and 50 CPU / 512Gi:
    122 CPU / 1089Gi in all."""
    return (
        MPIJobWrapper()
        .launcher(cpu="2", memory="1Gi")
        .workers(2)
        .containers(
            "Worker",
            container("a", cpu="10", memory="32Gi"),
            container("b", cpu="50", memory="512Gi"),
        )
    )


def two_of_three(priority_class: str | None = None) -> MPIJobWrapper:
    """minAvailable 2 of a 2 CPU / 2Gi launcher and two 5 CPU / 16Gi workers, every pod in
    ``priority_class``."""
    job = MPIJobWrapper().launcher(cpu="2", memory="2Gi").workers(2, cpu="5", memory="16Gi")
    if priority_class is not None:
        job.priority_class("Launcher", priority_class).priority_class("Worker", priority_class)
    return job.scheduling_policy(minAvailable=2)


def two_of_a_hundred_and_one(launcher_class: str, worker_class: str) -> MPIJobWrapper:
    """minAvailable 2 of a 2 CPU / 4Gi launcher and a hundred 20 CPU / 64Gi workers."""
    return (
        MPIJobWrapper()
        .launcher(cpu="2", memory="4Gi")
        .workers(100, cpu="20", memory="64Gi")
        .priority_class("Launcher", launcher_class)
        .priority_class("Worker", worker_class)
        .scheduling_policy(minAvailable=2)
    )
