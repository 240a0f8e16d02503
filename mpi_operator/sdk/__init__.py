"""The Python SDK: build, validate, render and run MPIJobs from code.

    from mpi_operator import sdk

    job = sdk.JobBuilder("pi").image(...).launcher(...).workers(2, ...).build()
    sdk.render(job)                          # the objects the operator would create, offline
    with sdk.MPIJobClient() as jobs:         # $KUBECONFIG, or in-cluster
        jobs.submit(job)
        done = jobs.wait("pi", "Succeeded", timeout=600)
        print(sdk.phase(done), sdk.gang_state(done))

Everything exported here is public and typed; the rest of the package is not an API.
"""

from mpi_operator.api.models import JobCondition, JobStatus, MPIJob
from mpi_operator.field_errors import FieldError
from mpi_operator.sdk.builder import JobBuilder
from mpi_operator.sdk.client import MPIJobClient, Until
from mpi_operator.sdk.errors import (
    AlreadyExistsError,
    ApiServerError,
    InvalidJobError,
    JobFailedError,
    LogsUnavailableError,
    MPIJobError,
    NotFoundError,
    WaitTimeoutError,
)
from mpi_operator.sdk.offline import JobLike, render, validate
from mpi_operator.sdk.state import (
    GangState,
    condition,
    gang_state,
    has_condition,
    is_finished,
    phase,
)

__all__ = [
    "AlreadyExistsError",
    "ApiServerError",
    "FieldError",
    "GangState",
    "InvalidJobError",
    "JobBuilder",
    "JobCondition",
    "JobFailedError",
    "JobLike",
    "JobStatus",
    "LogsUnavailableError",
    "MPIJob",
    "MPIJobClient",
    "MPIJobError",
    "NotFoundError",
    "Until",
    "WaitTimeoutError",
    "condition",
    "gang_state",
    "has_condition",
    "is_finished",
    "phase",
    "render",
    "validate",
]
