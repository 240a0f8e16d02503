"""The job's headless Service, which gives the launcher and every worker a DNS name."""

from __future__ import annotations

from typing import Any

from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import child_metadata
from mpi_operator.desired.pod_templates import launcher_runs_as_worker


def service_selector(job: DefaultedMPIJob) -> dict[str, str]:
    """Both roles: the launcher needs a DNS name too, for Intel MPI and MPICH workers."""
    return {c.LABEL_OPERATOR_NAME: c.OPERATOR_NAME, c.LABEL_JOB_NAME: job.name}


def new_service(job: DefaultedMPIJob) -> dict[str, Any]:
    """The headless Service named after the job, matching the pods' subdomain."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": child_metadata(job, names.service_name(job), {c.LABEL_APP: job.name}),
        "spec": {
            "clusterIP": "None",
            "selector": service_selector(job),
            # A launcher that is also a worker lists itself in the hostfile, so its name
            # must resolve before it can ever become Ready.
            "publishNotReadyAddresses": launcher_runs_as_worker(job),
        },
    }
