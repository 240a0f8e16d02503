"""Jobs the API server would refuse children of, or that crashed rendering: each is refused by
field path, by ``render`` and by the operator's sync alike.

Every case here once rendered objects the API server refuses, or raised: quantities
(InvalidOperation, ValueError), int32 overflow copied into a Job or PodGroup, a job name
ending in '-', metadata of the wrong type (Volcano read the annotations), templates without
container names or images, volumes and mounts clashing with the operator's own.
"""

from __future__ import annotations

import io
import sys
from typing import Any

import pytest
import yaml

from gang import select_gang_scheduler
from gang.volcano import GROUP_NAME_ANNOTATION
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.errors import InvalidMPIJobError
from mpi_operator.api.models import MAX_WORKERS
from mpi_operator.cli import main
from mpi_operator.controller.plan import SyncContext, plan_sync
from mpi_operator.desired.config import MAX_CONFIG_MAP_BYTES
from mpi_operator.desired.validation import load_valid_mpijob, render_errors
from mpi_operator.pod_rules.template import MAX_ANNOTATIONS_BYTES
from mpi_operator.testing.view import MemoryView
from mpi_operator.testing.wrappers import MPIJobWrapper, container, resources_container

INT32_OVER = 2**31
LAUNCHER_SPEC = "spec.mpiReplicaSpecs[Launcher].template.spec"
WORKER_SPEC = "spec.mpiReplicaSpecs[Worker].template.spec"
SYNTAX = (
    "must be a number with an optional suffix (m, k, Ki, M, Mi, G, Gi, ... or an exponent "
    "such as e3), without spaces"
)


def with_metadata(**fields: Any) -> MPIJobWrapper:
    job = MPIJobWrapper().workers(1)
    for key, value in fields.items():
        job.metadata_field(key, value)
    return job


def requests(**amounts: Any) -> MPIJobWrapper:
    return MPIJobWrapper().workers(1).container_field("Worker", "resources", {"requests": amounts})


CASES: list[Any] = [
    # -- quantities ---------------------------------------------------------------------
    pytest.param(
        requests(cpu="1e309"),
        [
            f"{WORKER_SPEC}.containers[0].resources.requests[cpu]: invalid quantity "
            '"1e309": must be no more than 9223372036854775807 in magnitude'
        ],
        id="quantity beyond 2^63",
    ),
    pytest.param(
        requests(cpu="1e999999999"),
        [
            f"{WORKER_SPEC}.containers[0].resources.requests[cpu]: invalid quantity "
            '"1e999999999": must be no more than 9223372036854775807 in magnitude'
        ],
        id="quantity with a huge exponent",
    ),
    pytest.param(
        requests(cpu="1e" + "9" * 5000),
        [
            f"{WORKER_SPEC}.containers[0].resources.requests[cpu]: invalid quantity "
            f'"1e{"9" * 38}...": the exponent is too long'
        ],
        id="quantity with a 5000-digit exponent",
    ),
    pytest.param(
        requests(cpu=" 1"),
        [f'{WORKER_SPEC}.containers[0].resources.requests[cpu]: invalid quantity " 1": {SYNTAX}'],
        id="space-padded quantity",
    ),
    pytest.param(
        requests(memory="-1Gi"),
        [
            f"{WORKER_SPEC}.containers[0].resources.requests[memory]: "
            "must be greater than or equal to 0"
        ],
        id="negative request",
    ),
    pytest.param(
        MPIJobWrapper()
        .workers(1)
        .containers("Worker", resources_container(requests={"cpu": "2"}, limits={"cpu": "1"})),
        [
            f"{WORKER_SPEC}.containers[0].resources.requests[cpu]: "
            "must be less than or equal to the cpu limit of 1"
        ],
        id="request above limit",
    ),
    pytest.param(
        MPIJobWrapper().workers(1).scheduling_policy(minResources={"cpu": "-2"}),
        ["spec.runPolicy.schedulingPolicy.minResources[cpu]: must be greater than or equal to 0"],
        id="negative minResources",
    ),
    pytest.param(
        MPIJobWrapper()
        .workers(1)
        .pod_spec_field("Worker", "runtimeClassName", "kata")
        .pod_spec_field("Worker", "overhead", {"cpu": "1e30"}),
        [
            f'{WORKER_SPEC}.overhead[cpu]: invalid quantity "1e30": '
            "must be no more than 9223372036854775807 in magnitude"
        ],
        id="overhead beyond 2^63",
    ),
    pytest.param(
        MPIJobWrapper().workers(1).pod_spec_field("Worker", "overhead", {"cpu": "10m"}),
        [
            f"{WORKER_SPEC}.overhead: is set from the pod's RuntimeClass: the API server "
            "refuses a pod that sets it without spec.runtimeClassName"
        ],
        id="overhead without a RuntimeClass",
    ),
    # -- integer ranges -----------------------------------------------------------------
    pytest.param(
        MPIJobWrapper().workers(1).run_policy(backoffLimit=INT32_OVER),
        ["spec.runPolicy.backoffLimit: must be less than or equal to 2147483647"],
        id="backoffLimit beyond int32",
    ),
    pytest.param(
        MPIJobWrapper().workers(1).run_policy(ttlSecondsAfterFinished=INT32_OVER),
        ["spec.runPolicy.ttlSecondsAfterFinished: must be less than or equal to 2147483647"],
        id="ttlSecondsAfterFinished beyond int32",
    ),
    pytest.param(
        MPIJobWrapper().workers(1).slots_per_worker(INT32_OVER),
        ["spec.slotsPerWorker: must be less than or equal to 2147483647"],
        id="slotsPerWorker beyond int32",
    ),
    pytest.param(
        MPIJobWrapper().workers(1).scheduling_policy(minAvailable=INT32_OVER),
        ["spec.runPolicy.schedulingPolicy.minAvailable: must be less than or equal to 2147483647"],
        id="minAvailable beyond int32",
    ),
    pytest.param(
        MPIJobWrapper().workers(1).scheduling_policy(scheduleTimeoutSeconds=INT32_OVER),
        [
            "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds: "
            "must be less than or equal to 2147483647"
        ],
        id="scheduleTimeoutSeconds beyond int32",
    ),
    pytest.param(
        MPIJobWrapper().workers(INT32_OVER - 1),
        [
            f"spec.mpiReplicaSpecs[Worker].replicas: must be less than or equal to {MAX_WORKERS}"
            ": the hostfile of more workers cannot fit in a ConfigMap (1 MiB at most)",
        ],
        id="2^31-1 workers",
    ),
    # -- metadata -----------------------------------------------------------------------
    pytest.param(
        MPIJobWrapper("trailing-").workers(1),
        [
            'metadata.name: invalid value "trailing-" for the name of the job\'s Service: '
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
            "with an alphabetic character, and end with an alphanumeric character"
        ],
        id="job name ending in a dash",
    ),
    pytest.param(
        with_metadata(name=123),
        ["metadata.name: must be a string"],
        id="job name not a string",
    ),
    pytest.param(
        with_metadata(namespace=["ns"]),
        ["metadata.namespace: must be a string"],
        id="namespace not a string",
    ),
    pytest.param(
        with_metadata(namespace="Team_A"),
        [
            'metadata.namespace: invalid value "Team_A": a lowercase RFC 1123 label must '
            "consist of lower case alphanumeric characters or '-', and must start and end with "
            "an alphanumeric character"
        ],
        id="namespace not a DNS label",
    ),
    pytest.param(
        with_metadata(annotations=["scheduling.volcano.sh/queue-name"]),
        ["metadata.annotations: must be an object"],
        id="annotations not a map",
    ),
    pytest.param(
        MPIJobWrapper().workers(1).template_label("Worker", "team", "a b"),
        [
            'spec.mpiReplicaSpecs[Worker].template.metadata.labels[team]: invalid value "a b": '
            "a valid label must be 63 characters or less and must be empty or begin and end "
            "with an alphanumeric character ([a-z0-9A-Z]) with dashes (-), underscores (_), "
            "dots (.), and alphanumerics between"
        ],
        id="template label value with a space",
    ),
    # -- the operator's own volumes and mounts ------------------------------------------
    pytest.param(
        MPIJobWrapper().workers(1).volume("Worker", "ssh-auth", "/data"),
        [
            f'{WORKER_SPEC}.volumes[0].name: "ssh-auth" is reserved: the operator adds a '
            "volume of that name"
        ],
        id="volume named like the SSH volume",
    ),
    pytest.param(
        MPIJobWrapper().volume("Launcher", "mpi-job-config", "/data"),
        [
            f'{LAUNCHER_SPEC}.volumes[0].name: "mpi-job-config" is reserved: the operator '
            "adds a volume of that name"
        ],
        id="volume named like the config volume",
    ),
    pytest.param(
        MPIJobWrapper().volume("Launcher", "keys", "/root/.ssh/"),
        [
            f'{LAUNCHER_SPEC}.containers[0].volumeMounts[0].mountPath: "/root/.ssh/" is '
            "reserved: the operator mounts its own volume there"
        ],
        id="mount at the SSH mount path",
    ),
    pytest.param(
        MPIJobWrapper().volume("Launcher", "config", "/etc/mpi"),
        [
            f'{LAUNCHER_SPEC}.containers[0].volumeMounts[0].mountPath: "/etc/mpi" is '
            "reserved: the operator mounts its own volume there"
        ],
        id="mount at the config mount path",
    ),
    pytest.param(
        MPIJobWrapper().workers(1).ssh_auth_mount_path("/etc/mpi"),
        ['spec.sshAuthMountPath: "/etc/mpi" is reserved: the launcher mounts the hostfile there'],
        id="sshAuthMountPath at the config mount path",
    ),
    # -- what the API server checks in a pod template -----------------------------------
    pytest.param(
        MPIJobWrapper().workers(1).containers("Worker", {"image": "x"}),
        [f"{WORKER_SPEC}.containers[0].name: is required"],
        id="container without a name",
    ),
    pytest.param(
        MPIJobWrapper().workers(1).containers("Worker", {"name": "w"}),
        [f"{WORKER_SPEC}.containers[0].image: is required"],
        id="container without an image",
    ),
    pytest.param(
        MPIJobWrapper().workers(1).containers("Worker", container("w", image="img ")),
        [f"{WORKER_SPEC}.containers[0].image: must not have leading or trailing whitespace"],
        id="image with a trailing space",
    ),
    pytest.param(
        MPIJobWrapper()
        .workers(1)
        .containers("Worker", container("w"))
        .init_containers("Worker", container("w")),
        [f'{WORKER_SPEC}.containers[0].name: duplicate container name "w"'],
        id="init container named like a container",
    ),
    pytest.param(
        MPIJobWrapper().pod_spec_field(
            "Launcher", "dnsConfig", {"searches": [f"s{i}.example" for i in range(33)]}
        ),
        [f"{LAUNCHER_SPEC}.dnsConfig.searches: must have at most 32 entries"],
        id="33 DNS searches in the launcher",
    ),
    pytest.param(
        MPIJobWrapper().workers(1).volume("Worker", "data", "/a").volume("Worker", "data", "/b"),
        [f'{WORKER_SPEC}.volumes[1].name: duplicate volume name "data"'],
        id="duplicate volume",
    ),
    pytest.param(
        MPIJobWrapper()
        .workers(1)
        .container_field("Worker", "volumeMounts", [{"name": "nowhere", "mountPath": "/x"}]),
        [
            f'{WORKER_SPEC}.containers[0].volumeMounts[0].name: no volume named "nowhere" in the '
            "template"
        ],
        id="mount of a missing volume",
    ),
    # -- env entries, which no check read before the pod schema ----------------------------
    *(
        pytest.param(
            MPIJobWrapper().workers(1).container_field("Launcher", "env", env),
            [f"{LAUNCHER_SPEC}.containers[0].{problem}"],
            id=f"launcher env {env!r}",
        )
        for env, problem in (
            ([{"name": 1}], "env[0].name: must be a string"),
            ([1], "env[0]: must be an object"),
            ([{"name": "A", "value": 5}], "env[0].value: must be a string"),
        )
    ),
    pytest.param(
        MPIJobWrapper().workers(1).container_field("Worker", "env", [{"value": "x"}]),
        [f"{WORKER_SPEC}.containers[0].env[0].name: is required"],
        id="worker env without a name",
    ),
]


@pytest.mark.parametrize(("job", "expected"), CASES)
def test_render_refuses_by_field(
    job: MPIJobWrapper,
    expected: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(yaml.safe_dump(job.obj())))
    assert main(["render", "-f", "-"]) == 2
    out, err = capsys.readouterr()
    assert (out, err.splitlines()) == ("", expected)


@pytest.mark.parametrize("gang", ["", "volcano", "scheduler-plugins-scheduler", "koord-scheduler"])
@pytest.mark.parametrize(("job", "expected"), CASES)
def test_the_operator_reports_the_same_problems_without_writing(
    job: MPIJobWrapper, expected: list[str], gang: str
) -> None:
    context = SyncContext(ClusterFacts(), select_gang_scheduler(gang), "2026-01-01T00:00:00Z")
    plan = plan_sync(job.obj(), MemoryView(), context)
    assert plan.actions == []
    [event] = plan.events
    assert event.reason == "ValidationError"
    assert event.message == "Found validation errors: " + "; ".join(expected)


def test_two_billion_workers_are_refused_at_once() -> None:
    # Before the bound, rendering built one pod dict per worker until MemoryError; now
    # validation refuses the count before any hostfile or pod is built.
    with pytest.raises(InvalidMPIJobError) as refused:
        load_valid_mpijob(MPIJobWrapper().workers(INT32_OVER - 1).obj())
    assert [error.path for error in refused.value.errors] == [
        "spec.mpiReplicaSpecs[Worker].replicas"
    ]


def test_max_workers_is_just_below_where_no_config_map_fits() -> None:
    # The shortest names and lines there are: one-letter job and namespace, Intel MPI lines
    # with zero slots, no cluster domain.
    shortest = MPIJobWrapper("a", "b").implementation("Intel").slots_per_worker(0)
    assert render_errors(shortest.workers(MAX_WORKERS).job(), ClusterFacts(), None) == []
    beyond = shortest.workers(MAX_WORKERS * 102 // 100).defaulted()
    [error] = render_errors(beyond, ClusterFacts(), None)
    assert error.path == "spec.mpiReplicaSpecs[Worker].replicas"
    assert error.message.endswith(f"a ConfigMap holds at most {MAX_CONFIG_MAP_BYTES}")


def test_long_names_reach_the_config_map_limit_with_fewer_workers() -> None:
    job = MPIJobWrapper("j" * 40, "n" * 63).workers(MAX_WORKERS).job()
    [error] = render_errors(job, ClusterFacts(cluster_domain="cluster.example"), None)
    assert error.message.startswith(f"{MAX_WORKERS} workers need a hostfile and discover_hosts")


def test_a_long_cluster_domain_makes_every_roles_search_list_invalid() -> None:
    job = MPIJobWrapper("pi", "ns").workers(1).job()
    errors = render_errors(job, ClusterFacts(cluster_domain="d" * 60 + "." + "e" * 60 * 4), None)
    assert [error.path for error in errors] == [
        "spec.mpiReplicaSpecs[Launcher].template.spec.dnsConfig.searches",
        f"{WORKER_SPEC}.dnsConfig.searches",
    ]
    assert all("must be no more than 253 characters" in error.message for error in errors)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param(
            ["--gang-scheduling", "My Scheduler"],
            "mpi-operator render: --gang-scheduling 'My Scheduler': a scheduler name a "
            "lowercase RFC 1123 subdomain must consist of",
            id="scheduler name with a space",
        ),
        pytest.param(
            ["--cluster-domain", "cluster..local"],
            "mpi-operator render: --cluster-domain 'cluster..local': a DNS domain a lowercase "
            "RFC 1123 subdomain must consist of",
            id="cluster domain with an empty label",
        ),
    ],
)
def test_flags_that_land_in_pods_are_checked(
    flags: list[str], expected: str, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(MPIJobWrapper().workers(1).obj()))
    assert main(["render", "-f", str(job_file), *flags]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(expected)


def annotations_filling(total: int) -> MPIJobWrapper:
    """A job whose worker template's annotations are ``total`` bytes, keys and values."""
    key = "example.com/filler"
    return (
        MPIJobWrapper("pi", "ns")
        .workers(1)
        .template_annotation("Worker", key, "x" * (total - len(key)))
    )


FULL = MAX_ANNOTATIONS_BYTES


@pytest.mark.parametrize(
    ("gang", "job", "refused"),
    [
        ("", annotations_filling(FULL), False),
        ("volcano", annotations_filling(FULL - 100), False),
        ("volcano", annotations_filling(FULL), True),
        # Coscheduling marks pods with a label, which has no such limit.
        ("scheduler-plugins-scheduler", annotations_filling(FULL), False),
    ],
    ids=["no gang", "volcano, room left", "volcano, no room", "coscheduling adds a label"],
)
def test_the_gang_schedulers_annotations_must_fit_beside_the_templates(
    gang: str, job: MPIJobWrapper, refused: bool
) -> None:
    errors = render_errors(job.defaulted(), ClusterFacts(), select_gang_scheduler(gang))
    expected = [
        (
            "spec.mpiReplicaSpecs[Worker].template.metadata.annotations",
            f"may not be larger than {FULL} bytes in total, found "
            f"{FULL + len(GROUP_NAME_ANNOTATION + 'pi')}, with the gang scheduler's annotations",
        )
    ]
    assert [(e.path, e.message) for e in errors] == (expected if refused else [])
