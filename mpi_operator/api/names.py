"""Deterministic names of a job's children; the operator never uses generateName."""

from __future__ import annotations

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob


def service_name(job: MPIJob) -> str:
    return job.name


def config_map_name(job: MPIJob) -> str:
    return f"{job.name}-config"


def ssh_secret_name(job: MPIJob) -> str:
    return f"{job.name}-ssh"


def launcher_name(job: MPIJob) -> str:
    return f"{job.name}-launcher"


def launcher_access_name(job: MPIJob) -> str:
    """The ServiceAccount, Role and RoleBinding that let a KubectlExec launcher exec into its
    workers (training-operator's names)."""
    return f"{job.name}-launcher"


def worker_name(job: MPIJob, index: int) -> str:
    return f"{job.name}-worker-{index}"


def worker_names(job: MPIJob) -> list[str]:
    """Every worker's name, by index."""
    return [worker_name(job, i) for i in range(job.replicas(c.WORKER))]


def pod_group_name(job: MPIJob) -> str:
    return job.name
