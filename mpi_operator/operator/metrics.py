"""Upstream's Prometheus metrics, with the names and labels dashboards already query.

``mpi_operator_is_leader`` lives with leader election (``runtime/leader.py``).
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge

JOBS_CREATED: Final = Counter(
    "mpi_operator_jobs_created", "Counts number of MPI jobs created"
)  # exposed as mpi_operator_jobs_created_total, as upstream's counter is
JOBS_SUCCESSFUL: Final = Counter(
    "mpi_operator_jobs_successful", "Counts number of MPI jobs successful"
)
JOBS_FAILED: Final = Counter("mpi_operator_jobs_failed", "Counts number of MPI jobs failed")
JOB_INFO: Final = Gauge(
    "mpi_operator_job_info",
    "Information about MPIJob",
    ["launcher", "namespace"],
)

# Ours, not upstream's.
GANG_CAPACITY_NUDGES: Final = Counter(
    "mpi_operator_gang_capacity_nudges",
    "Waiting gangs whose scheduler was told that the cluster may have room for them",
)
