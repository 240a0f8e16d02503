"""Models and defaults: lossless round trips and upstream's in-memory defaults."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mpi_operator.api import constants as c
from mpi_operator.api.defaults import with_defaults
from mpi_operator.api.validation import parse_mpijob
from mpi_operator.testing.wrappers import MPIJobWrapper


def test_unknown_fields_at_every_level_survive_a_round_trip() -> None:
    obj = MPIJobWrapper().workers(2).scheduling_policy(minAvailable=1).obj()
    obj["futureTopLevel"] = {"a": 1}
    obj["spec"]["futureSpecField"] = [1, 2]
    obj["spec"]["runPolicy"]["futureRunPolicyField"] = "x"
    obj["spec"]["runPolicy"]["schedulingPolicy"]["futureGangField"] = True
    worker = obj["spec"]["mpiReplicaSpecs"]["Worker"]
    worker["futureReplicaField"] = 3
    worker["template"]["spec"]["futurePodField"] = {"deep": {"x": [1]}}
    worker["template"]["spec"]["containers"][0]["futureContainerField"] = "kept"
    obj["status"] = {"conditions": [{"type": "Created", "status": "True", "futureCond": 1}]}
    expected = copy.deepcopy(obj)

    assert parse_mpijob(obj).to_dict() == expected


def test_defaults_are_not_written_into_the_parsed_object() -> None:
    obj = MPIJobWrapper().workers(1).obj()
    job = parse_mpijob(obj)
    with_defaults(job)
    assert job.to_dict() == obj


def test_a_defaulted_job_keeps_unknown_fields_and_writes_its_defaults() -> None:
    obj = MPIJobWrapper().workers(1).clean_pod_policy("All").obj()
    obj["futureTopLevel"] = {"a": 1}
    obj["spec"]["futureSpecField"] = [1, 2]
    # Beside runPolicy, the field's Python name is just an unknown field.
    obj["spec"]["run_policy"] = {"suspend": True}
    defaulted = with_defaults(parse_mpijob(obj))
    wire = defaulted.to_dict()
    assert wire["futureTopLevel"] == {"a": 1}
    assert wire["spec"]["futureSpecField"] == [1, 2]
    assert wire["spec"]["run_policy"] == {"suspend": True}
    assert wire["spec"]["runPolicy"] == {"cleanPodPolicy": "All"}
    assert wire["spec"]["slotsPerWorker"] == 1
    assert defaulted.spec.run_policy.suspend is None


def test_a_job_without_spec_gets_a_defaulted_one() -> None:
    obj = MPIJobWrapper().obj()
    del obj["spec"]
    spec = with_defaults(parse_mpijob(obj)).to_dict()["spec"]
    assert spec["runPolicy"] == {"cleanPodPolicy": "None"}
    assert spec["mpiImplementation"] == "OpenMPI"


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (
            MPIJobWrapper().workers(1),
            {
                "cleanPodPolicy": "None",
                "slotsPerWorker": 1,
                "sshAuthMountPath": "/root/.ssh",
                "mpiImplementation": "OpenMPI",
                "launcherCreationPolicy": "AtStartup",
                "runLauncherAsWorker": False,
                "launcherRestartPolicy": "OnFailure",
                "launcherReplicas": 1,
                "workerRestartPolicy": "Never",
            },
        ),
        (
            MPIJobWrapper()
            .workers(1)
            .clean_pod_policy("All")
            .slots_per_worker(4)
            .ssh_auth_mount_path("/home/mpiuser/.ssh")
            .implementation("Intel")
            .launcher_creation_policy("WaitForWorkersReady")
            .restart_policy("Launcher", "Never")
            .restart_policy("Worker", "OnFailure"),
            {
                "cleanPodPolicy": "All",
                "slotsPerWorker": 4,
                "sshAuthMountPath": "/home/mpiuser/.ssh",
                "mpiImplementation": "Intel",
                "launcherCreationPolicy": "WaitForWorkersReady",
                "runLauncherAsWorker": False,
                "launcherRestartPolicy": "Never",
                "launcherReplicas": 1,
                "workerRestartPolicy": "OnFailure",
            },
        ),
        (
            MPIJobWrapper().implementation("MPICH").run_launcher_as_worker(),
            {
                "cleanPodPolicy": "None",
                "slotsPerWorker": 1,
                "sshAuthMountPath": "/root/.ssh",
                "mpiImplementation": "MPICH",
                "launcherCreationPolicy": "AtStartup",
                "runLauncherAsWorker": True,
                "launcherRestartPolicy": "OnFailure",
                "launcherReplicas": 1,
                "workerRestartPolicy": None,
            },
        ),
    ],
    ids=["base defaults", "every default overridden", "launcher only with mpich"],
)
def test_defaults(job: MPIJobWrapper, expected: dict[str, Any]) -> None:
    obj = job.obj()
    obj["spec"]["mpiReplicaSpecs"]["Launcher"].pop("replicas")
    spec = with_defaults(parse_mpijob(obj)).spec
    assert spec is not None and spec.run_policy is not None and spec.mpi_replica_specs
    worker = spec.mpi_replica_specs.get(c.WORKER)
    launcher = spec.mpi_replica_specs[c.LAUNCHER]
    assert {
        "cleanPodPolicy": spec.run_policy.clean_pod_policy,
        "slotsPerWorker": spec.slots_per_worker,
        "sshAuthMountPath": spec.ssh_auth_mount_path,
        "mpiImplementation": spec.mpi_implementation,
        "launcherCreationPolicy": spec.launcher_creation_policy,
        "runLauncherAsWorker": spec.run_launcher_as_worker,
        "launcherRestartPolicy": launcher.restart_policy,
        "launcherReplicas": launcher.replicas,
        "workerRestartPolicy": worker.restart_policy if worker else None,
    } == expected


def test_namespace_defaults_to_default_when_unset() -> None:
    obj = MPIJobWrapper().obj()
    del obj["metadata"]["namespace"]
    assert parse_mpijob(obj).namespace == "default"
