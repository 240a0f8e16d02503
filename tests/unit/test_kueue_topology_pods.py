"""What Kueue's Topology Aware Scheduling reads from the pods of an MPIJob it admitted: the
scheduling gate, pod-set label and workload annotation it wrote into the templates, and the
replica-index label by which its ungater gives each pod the node of its rank (the launcher's
only when it is rank 0, as upstream's operator sets them)."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.desired.launcher import new_launcher_job
from mpi_operator.desired.workers import new_worker_pod
from mpi_operator.testing.wrappers import MPIJobWrapper

GATE = {"name": "kueue.x-k8s.io/topology"}
PODSET = "kueue.x-k8s.io/podset"
WORKLOAD = "kueue.x-k8s.io/workload"
REPLICA_INDEX = "training.kubeflow.org/replica-index"


def admitted_by_kueue(launcher_as_worker: bool) -> MPIJobWrapper:
    """A three-worker job as Kueue resumes it after a topology assignment."""
    job = MPIJobWrapper("tas", "ns").workers(3).run_launcher_as_worker(launcher_as_worker)
    for replica_type, podset in (("Launcher", "launcher"), ("Worker", "worker")):
        job.template_label(replica_type, PODSET, podset)
        job.template_annotation(replica_type, WORKLOAD, "mpijob-tas-1a2b3")
        job.pod_spec_field(replica_type, "schedulingGates", [GATE])
        job.pod_spec_field(replica_type, "nodeSelector", {"pool": "tas"})
    return job.template_annotation("Worker", "kueue.x-k8s.io/podset-required-topology", "rack")


def launcher_and_workers(job: MPIJobWrapper) -> list[dict[str, Any]]:
    """The launcher's pod template and each worker pod."""
    defaulted, facts = job.job(), ClusterFacts()
    launcher = new_launcher_job(defaulted, facts, None)["spec"]["template"]
    return [launcher, *(new_worker_pod(defaulted, i, facts, None) for i in range(3))]


@pytest.mark.parametrize("launcher_as_worker", [False, True])
def test_every_pod_keeps_the_gate_label_and_annotation_kueue_wrote(
    launcher_as_worker: bool,
) -> None:
    for pod in launcher_and_workers(admitted_by_kueue(launcher_as_worker)):
        assert pod["spec"]["schedulingGates"] == [GATE]
        assert pod["spec"]["nodeSelector"] == {"pool": "tas"}
        assert pod["metadata"]["annotations"][WORKLOAD] == "mpijob-tas-1a2b3"
        assert pod["metadata"]["labels"][PODSET] in ("launcher", "worker")


@pytest.mark.parametrize(
    ("launcher_as_worker", "ranks"),
    [(False, [None, "0", "1", "2"]), (True, ["0", "1", "2", "3"])],
)
def test_the_replica_index_kueue_ranks_by(launcher_as_worker: bool, ranks: list[str]) -> None:
    pods = launcher_and_workers(admitted_by_kueue(launcher_as_worker))
    assert [pod["metadata"]["labels"].get(REPLICA_INDEX) for pod in pods] == ranks
