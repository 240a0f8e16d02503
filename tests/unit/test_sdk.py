"""The SDK's offline half: the builder, validation with the operator's rules, rendering, the
state helpers and the errors built from API server answers."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from golden import assert_matches_golden

from gang import select_gang_scheduler
from mpi_operator import sdk
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.cli import dump_objects
from mpi_operator.desired.objects import desired_objects
from mpi_operator.desired.validation import load_valid_mpijob
from mpi_operator.runtime.client import ApiError
from mpi_operator.sdk.errors import from_api_error
from mpi_operator.sdk.offline import as_stored

ROOT = Path(__file__).resolve().parents[2]
PI_YAML = ROOT / "examples" / "pi" / "pi.yaml"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sdk_pi_example", ROOT / "examples/sdk/pi.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def without_secret_data(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The SSH key pair is fresh on every render; everything else must match."""
    return [
        {k: v for k, v in o.items() if not (o["kind"] == "Secret" and k == "data")} for o in objects
    ]


def small_job() -> sdk.JobBuilder:
    return (
        sdk.JobBuilder("train", namespace="team-a")
        .image("example.com/train:1")
        .launcher(command=["mpirun", "python", "train.py"], cpu="500m")
        .workers(4, command=["/usr/sbin/sshd", "-De"], cpu="2", memory="4Gi", gpus=1)
    )


# -- builder ---------------------------------------------------------------------------------


def test_the_example_builds_exactly_the_pi_yaml() -> None:
    built = load_example().pi_job().build()
    assert built.to_dict() == yaml.safe_load(PI_YAML.read_text())


def test_a_job_with_every_shortcut_matches_its_golden_file() -> None:
    job = (
        small_job()
        .label("team", "a")
        .annotation("owner", "ml")
        .env("NCCL_DEBUG", "INFO")
        .env("ONLY_WORKERS", "1", role="Worker")
        .run_as_user(1000, role="Launcher")
        .restricted(role="Worker")
        .read_only_root("/tmp", "/var/cache", role="Worker")
        .pod_spec("Worker", nodeSelector={"gpu": "a100"})
        .container("Launcher", workingDir="/work")
        .pod_annotation("Worker", "sidecar.istio.io/inject", "false")
        .pod_label("Launcher", "tier", "control")
        .restart_policy("Launcher", "OnFailure")
        .slots_per_worker(8)
        .mpi_implementation("Intel")
        .ssh_auth_mount_path("/home/user/.ssh")
        .run_launcher_as_worker()
        .launcher_creation_policy("WaitForWorkersReady")
        .clean_pod_policy("All")
        .ttl_seconds_after_finished(300)
        .active_deadline_seconds(3600)
        .backoff_limit(2)
        .suspend()
        .gang(queue="research", min_available=5, priority_class="high", schedule_timeout_seconds=60)
        .build()
    )
    assert_matches_golden("sdk/every-shortcut.yaml", dump_objects([job.to_dict()]))


def test_image_applies_to_roles_declared_before_and_after() -> None:
    obj = sdk.JobBuilder("j").launcher().image("a:1").workers(1).to_dict()
    specs = obj["spec"]["mpiReplicaSpecs"]
    assert [specs[r]["template"]["spec"]["containers"][0]["image"] for r in specs] == ["a:1", "a:1"]


def test_an_unknown_role_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="role must be one of Launcher, Worker, not 'worker'"):
        sdk.JobBuilder("j").pod_spec("worker", hostNetwork=True)


def test_to_dict_is_a_copy() -> None:
    builder = small_job()
    builder.to_dict()["spec"]["mpiReplicaSpecs"].clear()
    assert set(builder.to_dict()["spec"]["mpiReplicaSpecs"]) == {"Launcher", "Worker"}


# -- validation ------------------------------------------------------------------------------


def test_build_reports_every_problem_by_field_path() -> None:
    builder = small_job().slots_per_worker(-1).clean_pod_policy("Sometimes")
    with pytest.raises(sdk.InvalidJobError) as raised:
        builder.build()
    paths = {error.path for error in raised.value.errors}
    assert {"spec.slotsPerWorker", "spec.runPolicy.cleanPodPolicy"} <= paths


def test_validate_returns_the_operators_errors_without_raising() -> None:
    no_image = sdk.JobBuilder("Bad_Name").launcher().workers(1).to_dict()
    errors = sdk.validate(no_image)
    assert [str(e) for e in errors] == [
        str(e) for e in sdk.validate(sdk.JobBuilder("Bad_Name").launcher().workers(1))
    ]
    assert any(e.path == "metadata.name" for e in errors), errors
    assert sdk.validate(small_job()) == []


def test_validate_names_a_wrong_type() -> None:
    wire = small_job().to_dict()
    wire["spec"]["slotsPerWorker"] = "eight"
    assert [str(e) for e in sdk.validate(wire)] == ["spec.slotsPerWorker: must be an integer"]


def test_validate_checks_pod_templates_against_the_pod_schema() -> None:
    wire = small_job().to_dict()
    worker = wire["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["env"] = [{"name": "A", "value": 5}]
    assert [str(e) for e in sdk.validate(wire)] == [
        "spec.mpiReplicaSpecs[Worker].template.spec.containers[0].env[0].value: must be a string"
    ]


def naming(account: str, namespace: str = "team-a") -> dict[str, Any]:
    """The small job with its workers running as ``account``."""
    wire = small_job().to_dict()
    wire["metadata"]["namespace"] = namespace
    wire["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["serviceAccountName"] = account
    return wire


WORKER_ACCOUNT = "spec.mpiReplicaSpecs[Worker].template.spec.serviceAccountName"


@pytest.mark.parametrize(
    ("wire", "options"),
    [
        (naming("team-a-launcher"), {}),
        (naming("mpi-operator", "mpi-operator"), {}),
        (naming("runner", "ops"), {"operator_account": "ops/runner"}),
    ],
    ids=["a launcher's account", "the standard install's operator account", "the one given"],
)
def test_a_template_naming_a_reserved_account_is_refused_by_path(
    wire: dict[str, Any], options: dict[str, str]
) -> None:
    assert [e.path for e in sdk.validate(wire, **options)] == [WORKER_ACCOUNT]
    with pytest.raises(sdk.InvalidJobError) as raised:
        sdk.render(wire, **options)
    assert [e.path for e in raised.value.errors] == [WORKER_ACCOUNT]


@pytest.mark.parametrize(
    ("wire", "options"),
    [
        (naming("mpi-operator"), {}),
        (naming("mpi-operator", "mpi-operator"), {"operator_account": ""}),
        (naming("mpi-operator", "mpi-operator"), {"operator_account": "ops/mpi-operator"}),
    ],
    ids=["another namespace", "the operator's account unknown", "another operator account"],
)
def test_the_operators_account_name_is_accepted_elsewhere(
    wire: dict[str, Any], options: dict[str, str]
) -> None:
    assert sdk.validate(wire, **options) == []
    assert sdk.render(wire, **options)


@pytest.mark.parametrize("account", ["mpi-operator", "a/B", "a/b/c"])
def test_an_invalid_operator_account_raises_value_error(account: str) -> None:
    with pytest.raises(ValueError, match="--operator-account"):
        sdk.validate(small_job(), operator_account=account)
    with pytest.raises(ValueError, match="--operator-account"):
        sdk.render(small_job(), operator_account=account)


# -- render ----------------------------------------------------------------------------------


def test_render_is_what_the_operator_creates() -> None:
    job = load_example().pi_job().build()
    rendered = sdk.render(job, gang_scheduling="volcano", cluster_domain="cluster.local")
    stored = as_stored(job.to_dict())
    assert stored["metadata"]["namespace"] == "default"
    assert stored["metadata"]["uid"]
    expected = desired_objects(
        load_valid_mpijob(stored),
        ClusterFacts(cluster_domain="cluster.local"),
        select_gang_scheduler("volcano"),
    )
    assert without_secret_data(rendered) == without_secret_data(expected)
    assert [o["kind"] for o in rendered] == [
        "Service",
        "ConfigMap",
        "Secret",
        "PodGroup",
        "Pod",
        "Pod",
        "Job",
    ]


def test_render_of_an_invalid_job_raises_with_paths() -> None:
    with pytest.raises(sdk.InvalidJobError) as raised:
        sdk.render(small_job().backoff_limit(-3))
    assert [e.path for e in raised.value.errors] == ["spec.runPolicy.backoffLimit"]


def test_the_example_renders_without_a_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_example().main(["--render"]) == 0
    objects = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [o["kind"] for o in objects] == ["Service", "ConfigMap", "Secret", "Pod", "Pod", "Job"]


# -- state -----------------------------------------------------------------------------------


def job_with(*conditions: tuple[str, str, str]) -> sdk.MPIJob:
    wire = small_job().to_dict()
    wire["status"] = {
        "conditions": [
            {"type": t, "status": s, "reason": r, "message": f"{t} {r}"} for t, s, r in conditions
        ]
    }
    return sdk.MPIJob.model_validate(wire, by_alias=True)


def test_phase_is_the_latest_true_condition() -> None:
    assert sdk.phase(job_with()) == "Pending"
    running = job_with(("Created", "True", "MPIJobCreated"), ("Running", "True", "MPIJobRunning"))
    assert sdk.phase(running) == "Running"
    assert not sdk.is_finished(running)
    done = job_with(
        ("Created", "True", "MPIJobCreated"),
        ("Running", "False", "MPIJobRunning"),
        ("Succeeded", "True", "MPIJobSucceeded"),
    )
    assert sdk.phase(done) == "Succeeded"
    assert sdk.is_finished(done)


def test_gang_state_reads_the_gang_scheduled_condition() -> None:
    assert sdk.gang_state(job_with(("Created", "True", "MPIJobCreated"))) is None
    waiting = job_with(("GangScheduled", "False", "QueueNotFound"))
    assert sdk.gang_state(waiting) == sdk.GangState(
        False, "QueueNotFound", "GangScheduled QueueNotFound"
    )
    assert sdk.gang_state(job_with(("GangScheduled", "True", "Scheduled"))).scheduled  # type: ignore[union-attr]


# -- errors ----------------------------------------------------------------------------------


def test_an_api_refusal_carries_the_servers_message_and_field_paths() -> None:
    status = {
        "kind": "Status",
        "code": 422,
        "reason": "Invalid",
        "message": 'MPIJob.kubeflow.org "x" is invalid: spec.slotsPerWorker: Invalid value',
        "details": {"causes": [{"field": "spec.slotsPerWorker", "message": "Invalid value: -1"}]},
    }
    error = from_api_error(ApiError.from_status(status))
    assert type(error) is sdk.ApiServerError
    assert (error.status, error.reason) == (422, "Invalid")
    assert "spec.slotsPerWorker" in error.message
    assert [str(c) for c in error.causes] == ["spec.slotsPerWorker: Invalid value: -1"]


@pytest.mark.parametrize(
    ("status", "reason", "kind"),
    [
        (404, "NotFound", sdk.NotFoundError),
        (409, "AlreadyExists", sdk.AlreadyExistsError),
        (409, "Conflict", sdk.ApiServerError),
        (0, "ConnectionRefusedError", sdk.ApiServerError),
    ],
)
def test_api_errors_map_to_their_own_classes(status: int, reason: str, kind: type) -> None:
    error = from_api_error(ApiError(status, reason, "text"))
    assert type(error) is kind
    assert isinstance(error, sdk.MPIJobError)
