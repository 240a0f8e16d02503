"""Validation: upstream's TestValidateMPIJob cases plus the rules upstream misses."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.api.defaults import with_defaults
from mpi_operator.api.errors import InvalidMPIJobError
from mpi_operator.api.validation import parse_mpijob
from mpi_operator.desired.validation import load_valid_mpijob, validate, with_defaults_and_errors
from mpi_operator.testing.wrappers import MPIJobWrapper, container

QUANTITY_SYNTAX = (
    ": must be a number with an optional suffix (m, k, Ki, M, Mi, G, Gi, ... or an exponent "
    "such as e3), without spaces"
)


def errors_of(obj: dict[str, Any]) -> list[str]:
    return [str(error) for error in validate(parse_mpijob(obj))]


def paths_of(obj: dict[str, Any]) -> list[str]:
    return [error.path for error in validate(parse_mpijob(obj))]


@pytest.mark.parametrize(
    "job",
    [
        MPIJobWrapper().implementation("Intel"),
        MPIJobWrapper().implementation("Intel").workers(2),
        MPIJobWrapper().implementation("MPICH"),
        MPIJobWrapper().implementation("MPICH").workers(2),
        MPIJobWrapper().implementation("OpenMPI").workers(3).clean_pod_policy("All"),
        MPIJobWrapper().run_launcher_as_worker().slots_per_worker(0),
        MPIJobWrapper().workers(1).launcher_creation_policy("WaitForWorkersReady"),
        MPIJobWrapper().workers(1).run_policy(managedBy="kueue.x-k8s.io/multikueue"),
        MPIJobWrapper().workers(1).run_policy(activeDeadlineSeconds=0, backoffLimit=0),
        MPIJobWrapper().workers(2).scheduling_policy(minAvailable=10),
        MPIJobWrapper().workers(2).scheduling_policy(minAvailable=0, minResources={"cpu": 3}),
    ],
    ids=[
        "valid intel launcher only",
        "valid intel with workers",
        "valid mpich launcher only",
        "valid mpich with workers",
        "valid openmpi with clean pod policy All",
        "zero slots per worker is allowed",
        "wait for workers ready is a known policy",
        "managed by multikueue",
        "zero deadline and backoff are allowed",
        "minAvailable larger than the pod count is allowed",
        "minAvailable zero with integer minResources",
    ],
)
def test_valid_jobs_have_no_errors(job: MPIJobWrapper) -> None:
    assert errors_of(job.obj()) == []


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (
            MPIJobWrapper().replicas("Launcher", 2),
            ["spec.mpiReplicaSpecs[Launcher].replicas: must be 1"],
        ),
        (
            MPIJobWrapper().workers(0),
            ["spec.mpiReplicaSpecs[Worker].replicas: must be greater than or equal to 1"],
        ),
        (
            MPIJobWrapper().workers(1).replicas("Worker", None),
            ["spec.mpiReplicaSpecs[Worker].replicas: must define number of replicas (at least 1)"],
        ),
        (
            MPIJobWrapper().restart_policy("Launcher", "Always"),
            [
                'spec.mpiReplicaSpecs[Launcher].restartPolicy: unsupported value "Always": '
                'must be one of "Never", "OnFailure"'
            ],
        ),
        (
            MPIJobWrapper().workers(1).containers("Worker"),
            [
                "spec.mpiReplicaSpecs[Worker].template.spec.containers: "
                "must define at least one container"
            ],
        ),
        (
            MPIJobWrapper().without("Launcher").workers(1),
            ["spec.mpiReplicaSpecs[Launcher]: must have Launcher replica spec"],
        ),
        (
            MPIJobWrapper().spec_field("mpiReplicaSpecs", {}),
            ["spec.mpiReplicaSpecs: must have replica specs"],
        ),
        (
            MPIJobWrapper().clean_pod_policy("Sometimes"),
            [
                'spec.runPolicy.cleanPodPolicy: unsupported value "Sometimes": '
                'must be one of "All", "None", "Running"'
            ],
        ),
        (
            MPIJobWrapper().implementation("MVAPICH"),
            [
                'spec.mpiImplementation: unsupported value "MVAPICH": '
                'must be one of "Intel", "MPICH", "OpenMPI"'
            ],
        ),
        (
            MPIJobWrapper().launcher_creation_policy("Eventually"),
            [
                'spec.launcherCreationPolicy: unsupported value "Eventually": '
                'must be one of "AtStartup", "WaitForWorkersReady"'
            ],
        ),
        (
            MPIJobWrapper().run_policy(managedBy="someone/else"),
            [
                'spec.runPolicy.managedBy: unsupported value "someone/else": must be one of '
                '"kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue"'
            ],
        ),
        (
            MPIJobWrapper().ssh_auth_mount_path(""),
            ["spec.sshAuthMountPath: must have a mount path for SSH credentials"],
        ),
        (
            MPIJobWrapper().slots_per_worker(-1),
            ["spec.slotsPerWorker: must be greater than or equal to 0"],
        ),
        (
            MPIJobWrapper().scheduling_policy(minAvailable=-1),
            ["spec.runPolicy.schedulingPolicy.minAvailable: must be greater than or equal to 0"],
        ),
        (
            MPIJobWrapper().scheduling_policy(scheduleTimeoutSeconds=-5),
            [
                "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds: "
                "must be greater than or equal to 0"
            ],
        ),
        (
            MPIJobWrapper().scheduling_policy(minResources={"cpu": "lots"}),
            [
                'spec.runPolicy.schedulingPolicy.minResources[cpu]: invalid quantity "lots"'
                + QUANTITY_SYNTAX
            ],
        ),
        (
            MPIJobWrapper().workers(1).containers("Worker", container(cpu="ten")),
            [
                "spec.mpiReplicaSpecs[Worker].template.spec.containers[0].resources"
                '.requests[cpu]: invalid quantity "ten"' + QUANTITY_SYNTAX
            ],
        ),
        (
            MPIJobWrapper()
            .workers(1)
            .spec_field(
                "mpiReplicaSpecs",
                {
                    "Launcher": {"template": {"spec": {"containers": [container()]}}},
                    "Workers": {"replicas": 1, "template": {"spec": {"containers": []}}},
                },
            ),
            ["spec.mpiReplicaSpecs[Workers]: unsupported replica type: must be Launcher or Worker"],
        ),
        (
            MPIJobWrapper()
            .template_label("Launcher", "team", "a")
            .pod_spec_field("Launcher", "volumes", {"name": "not-a-list"}),
            ["spec.mpiReplicaSpecs[Launcher].template.spec.volumes: must be a list"],
        ),
    ],
    ids=[
        "launcher replicas must be 1",
        "worker replicas must be at least 1",
        "worker replicas must be set",
        "restart policy Always is not supported",
        "worker template needs a container",
        "launcher is required",
        "replica specs are required",
        "unknown clean pod policy",
        "unknown mpi implementation",
        "unknown launcher creation policy (upstream accepts it silently)",
        "unknown managedBy",
        "empty ssh mount path",
        "negative slots per worker",
        "negative minAvailable (upstream panics)",
        "negative schedule timeout",
        "unparseable minResources quantity",
        "unparseable container request",
        "misspelled replica type (upstream ignores it)",
        "volumes must be a list",
    ],
)
def test_invalid_jobs_report_each_problem_by_field(job: MPIJobWrapper, expected: list[str]) -> None:
    assert errors_of(job.obj()) == expected


@pytest.mark.parametrize(
    ("name", "workers", "valid"),
    [
        ("pi", 1, True),
        ("a" * 54, 10, True),  # a-...-worker-9 is exactly 63 characters
        ("a" * 54, 11, False),  # worker-10 makes it 64
        ("1-foo", 1, False),
        ("Upper", 1, False),
        ("trailing-", 1, False),  # "trailing--worker-0" is valid, the Service "trailing-" not
    ],
    ids=[
        "short name",
        "longest name for ten workers",
        "too long once the worker index grows",
        "name starting with a digit",
        "upper case name",
        "name ending with a dash still gives a valid worker name",
    ],
)
def test_job_name_must_keep_every_worker_hostname_a_dns_label(
    name: str, workers: int, valid: bool
) -> None:
    job = MPIJobWrapper(name).workers(workers).obj()
    assert ("metadata.name" not in paths_of(job)) is valid


def test_empty_job_reports_name_and_replica_specs_together() -> None:
    obj = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {}, "spec": {}}
    assert paths_of(obj) == ["metadata.name", "spec.mpiReplicaSpecs"]


def test_many_problems_are_reported_in_one_round() -> None:
    job = (
        MPIJobWrapper()
        .replicas("Launcher", 3)
        .workers(0)
        .clean_pod_policy("Never")
        .scheduling_policy(minAvailable=-2)
    )
    assert paths_of(job.obj()) == [
        "spec.mpiReplicaSpecs[Launcher].replicas",
        "spec.mpiReplicaSpecs[Worker].replicas",
        "spec.runPolicy.cleanPodPolicy",
        "spec.runPolicy.schedulingPolicy.minAvailable",
    ]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda o: o["spec"].update(slotsPerWorker="2"),
            ["spec.slotsPerWorker: must be an integer"],
        ),
        (
            lambda o: o["spec"].update(runLauncherAsWorker="yes"),
            ["spec.runLauncherAsWorker: must be true or false"],
        ),
        (
            lambda o: o["spec"]["mpiReplicaSpecs"]["Launcher"].update(replicas=1.5),
            ["spec.mpiReplicaSpecs[Launcher].replicas: must be an integer"],
        ),
        (
            lambda o: o["spec"].update(
                runPolicy={"schedulingPolicy": {"minResources": {"cpu": 0.5}}}
            ),
            [
                "spec.runPolicy.schedulingPolicy.minResources[cpu]: "
                "must be an integer or a quantity string"
            ],
        ),
        (
            lambda o: o["spec"].update(runPolicy=[]),
            ["spec.runPolicy: must be an object"],
        ),
    ],
    ids=["string slots", "string bool", "fractional replicas", "float quantity", "list run policy"],
)
def test_wrong_types_are_reported_by_field_without_a_traceback(
    mutate: Any, expected: list[str]
) -> None:
    obj = MPIJobWrapper().obj()
    mutate(obj)
    with pytest.raises(InvalidMPIJobError) as raised:
        parse_mpijob(obj)
    assert [str(e) for e in raised.value.errors] == expected


@pytest.mark.parametrize(
    "obj",
    [
        {"apiVersion": "kubeflow.org/v1alpha2", "kind": "MPIJob"},
        {"apiVersion": "kubeflow.org/v2beta1", "kind": "TFJob"},
        {"apiVersion": "kubeflow.org/v1", "kind": "TFJob"},
        ["not", "an", "object"],
    ],
    ids=["old api version", "other kind", "other v1 kind", "not an object"],
)
def test_only_v2beta1_and_v1_mpijobs_are_accepted(obj: Any) -> None:
    with pytest.raises(InvalidMPIJobError) as raised:
        parse_mpijob(obj)
    assert len(raised.value.errors) == 1


def test_load_valid_mpijob_raises_with_all_errors() -> None:
    with pytest.raises(InvalidMPIJobError) as raised:
        load_valid_mpijob(MPIJobWrapper().replicas("Launcher", 0).slots_per_worker(-1).obj())
    assert len(raised.value.errors) == 2


@pytest.mark.parametrize(
    "job",
    [
        MPIJobWrapper().workers(2),
        MPIJobWrapper().implementation("MPICH").run_launcher_as_worker(),
        MPIJobWrapper().replicas("Launcher", 0).slots_per_worker(-1),
    ],
    ids=["valid", "valid with launcher as worker", "invalid"],
)
def test_defaults_and_errors_together_are_those_of_each_alone(job: MPIJobWrapper) -> None:
    raw = parse_mpijob(job.obj())
    before = raw.model_dump()
    defaulted, errors = with_defaults_and_errors(raw)
    assert defaulted.model_dump() == with_defaults(raw).model_dump()
    assert errors == validate(raw)
    assert raw.model_dump() == before  # the input is left untouched
