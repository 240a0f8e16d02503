"""The headless Service that names every pod of a job."""

from __future__ import annotations

import pytest

from mpi_operator.desired.transports.ssh import new_service
from mpi_operator.testing.wrappers import MPIJobWrapper, child_labels, owner_references


@pytest.mark.parametrize(
    ("job", "publish_not_ready"),
    [
        (MPIJobWrapper("pi", "ns").workers(2), False),
        (MPIJobWrapper("pi", "ns").workers(2).run_launcher_as_worker(), True),
        (MPIJobWrapper("pi", "ns").run_launcher_as_worker(False), False),
    ],
    ids=[
        "default: only ready pods are published",
        "launcher as worker: not-ready pods are published",
        "launcher as worker explicitly off",
    ],
)
def test_service_is_headless_and_selects_both_roles(
    job: MPIJobWrapper, publish_not_ready: bool
) -> None:
    assert new_service(job.job()) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "pi",
            "namespace": "ns",
            "labels": child_labels("pi"),
            "ownerReferences": owner_references("pi"),
        },
        "spec": {
            "clusterIP": "None",
            "selector": {
                "training.kubeflow.org/operator-name": "mpi-operator",
                "training.kubeflow.org/job-name": "pi",
            },
            "publishNotReadyAddresses": publish_not_ready,
        },
    }
