"""Flyte's own code, without a cluster: what flytekit serializes for an MPI task, the
kubeflow.org/v1 MPIJob flyteplugins' BuildResource makes of it, and the phase flyteplugins'
GetTaskPhase reads from an MPIJob's status (tests/e2e/flyte.py runs them). These pin what the
operator receives from Flyte and how Flyte judges what the operator writes back."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from .flyte import BuildRefusedError, build_mpijob, task_phase, task_templates

pytestmark = pytest.mark.e2e

NAMESPACE = "flytesnacks-development"
SERVICE_ACCOUNT = "flyte-exec"
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def build(template_name: str, name: str = "f7c1d2e3a4b5-n0-0", **kwargs: Any) -> dict[str, Any]:
    return build_mpijob(
        task_templates()[template_name],
        name=name,
        namespace=NAMESPACE,
        service_account=SERVICE_ACCOUNT,
        **kwargs,
    )


def replicas(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    specs: dict[str, dict[str, Any]] = job["spec"]["mpiReplicaSpecs"]
    return specs


def container(job: dict[str, Any], role: str) -> dict[str, Any]:
    containers = replicas(job)[role]["template"]["spec"]["containers"]
    assert len(containers) == 1, containers
    only: dict[str, Any] = containers[0]
    return only


# --- what flytekit serializes ------------------------------------------------------------


def test_flytekit_serializes_version_1_mpi_templates() -> None:
    templates = task_templates()
    assert sorted(templates) == ["horovod", "mpi", "mpi-run-policy"]
    for template in templates.values():
        assert template["type"] == "mpi"
        assert template["taskTypeVersion"] == 1
        assert "command" not in template["container"]
    mpi = templates["mpi"]
    assert mpi["custom"]["workerReplicas"]["replicas"] == 2
    assert mpi["custom"]["launcherReplicas"]["replicas"] == 1
    assert mpi["custom"]["slots"] == 1
    args = mpi["container"]["args"]
    assert args[0] == "mpirun"
    # -np is workers x slots.
    assert args[args.index("-np") + 1] == "2"
    assert templates["mpi-run-policy"]["custom"]["runPolicy"] == {
        "cleanPodPolicy": "CLEANPOD_POLICY_ALL",
        "backoffLimit": 2,
        "activeDeadlineSeconds": 600,
    }


# --- BuildResource -----------------------------------------------------------------------


def test_build_resource_makes_a_v1_mpijob_of_the_mpi_template() -> None:
    job = build("mpi")
    assert job["apiVersion"] == "kubeflow.org/v1"
    assert job["kind"] == "MPIJob"
    assert job["metadata"]["name"] == "f7c1d2e3a4b5-n0-0"
    assert job["metadata"]["namespace"] == NAMESPACE
    assert "ownerReferences" not in job["metadata"]
    assert "finalizers" not in job["metadata"]
    spec = job["spec"]
    assert spec["slotsPerWorker"] == 1
    assert spec["runPolicy"] == {}
    assert sorted(replicas(job)) == ["Launcher", "Worker"]
    assert replicas(job)["Launcher"]["replicas"] == 1
    assert replicas(job)["Worker"]["replicas"] == 2
    template_args = task_templates()["mpi"]["container"]["args"]
    for role in ("Launcher", "Worker"):
        replica = replicas(job)[role]
        assert replica["restartPolicy"] == "Never"
        pod = replica["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        assert pod["serviceAccountName"] == SERVICE_ACCOUNT
        c = container(job, role)
        assert c["name"] == "mpi"
        assert "command" not in c
        # The task's command, placeholders filled in, for both roles.
        assert c["args"][0] == "mpirun"
        assert len(c["args"]) == len(template_args)
        assert not any("{{" in arg for arg in c["args"]), c["args"]
        assert c["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["FLYTE_INTERNAL_EXECUTION_ID"] == "f7c1d2e3a4b5-n0-0"


def test_build_resource_carries_the_run_policy() -> None:
    job = build("mpi-run-policy")
    assert job["spec"]["runPolicy"] == {
        "cleanPodPolicy": "All",
        "backoffLimit": 2,
        "activeDeadlineSeconds": 600,
    }
    assert job["spec"]["slotsPerWorker"] == 1


def test_build_resource_runs_horovodrun_with_the_discovery_script() -> None:
    job = build("horovod")
    assert replicas(job)["Worker"]["replicas"] == 2
    args = container(job, "Launcher")["args"]
    assert args[:3] == ["horovodrun", "-np", "2"]
    assert args[args.index("--host-discovery-script") + 1] == "/etc/mpi/discover_hosts.sh"
    assert args[args.index("--slots-per-host") + 1] == "1"
    assert "pyflyte-execute" in args


def test_execution_labels_and_annotations_reach_the_job_and_its_pods() -> None:
    job = build(
        "mpi",
        labels={"execution-id": "f7c1d2e3a4b5", "node-id": "n0"},
        annotations={"example.com/owner": "flyte"},
    )
    assert job["metadata"]["labels"] == {"execution-id": "f7c1d2e3a4b5", "node-id": "n0"}
    assert job["metadata"]["annotations"] == {"example.com/owner": "flyte"}
    for role in ("Launcher", "Worker"):
        meta = replicas(job)[role]["template"]["metadata"]
        assert meta["labels"]["execution-id"] == "f7c1d2e3a4b5"
        assert meta["annotations"]["example.com/owner"] == "flyte"


def test_a_generated_name_is_made_dns_1123_as_propeller_does() -> None:
    name = build("mpi", name="Exec_Ab-n0-0")["metadata"]["name"]
    assert DNS1123_SUBDOMAIN.match(name), name


def test_build_resource_refuses_a_template_without_workers() -> None:
    template = task_templates()["mpi"]
    template["custom"]["workerReplicas"]["replicas"] = 0
    with pytest.raises(BuildRefusedError, match="number of workers must be greater than 0"):
        build_mpijob(template, name="x-n0-0", namespace=NAMESPACE, service_account="default")


# --- GetTaskPhase ------------------------------------------------------------------------


@dataclass(frozen=True)
class Cond:
    """A status condition whose lastTransitionTime is ``seconds_ago`` before the test runs."""

    kind: str
    seconds_ago: int
    status: str = "True"
    reason: str = ""
    message: str = ""


def cond(kind: str, seconds_ago: int, status: str = "True", **extra: str) -> Cond:
    return Cond(kind, seconds_ago, status, **extra)


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    return build("mpi")


def job_with(
    built: dict[str, Any],
    *,
    age: int,
    conditions: list[Cond],
    started: bool = True,
    suspend: bool = False,
) -> dict[str, Any]:
    """The built job as the API server would return it ``age`` seconds after its creation
    (times are taken now, as GetTaskPhase compares them with its clock)."""
    now = datetime.now(UTC)

    def ago(seconds: int) -> str:
        return (now - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")

    job = {**built, "metadata": {**built["metadata"], "creationTimestamp": ago(age)}}
    job["spec"] = {**built["spec"], "runPolicy": {"suspend": True} if suspend else {}}
    status: dict[str, Any] = {}
    if conditions:
        status["conditions"] = [
            {
                "type": c.kind,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": ago(c.seconds_ago),
            }
            for c in conditions
        ]
    if started:
        status["startTime"] = ago(age - 1)
    job["status"] = status
    return job


# (id, job arguments, phase, reason, text in the message or the error, Go error expected)
PHASES: list[tuple[str, dict[str, Any], str, str, str, bool]] = [
    (
        "young-without-status",
        dict(age=10, conditions=[], started=False),
        "Queued",
        "JobCreated",
        "",
        False,
    ),
    (
        "old-without-start-time",
        dict(age=120, conditions=[], started=False),
        "Undefined",
        "",
        "kubeflow operator hasn't updated the mpi custom resource since creation time",
        True,
    ),
    (
        "old-created-without-start-time",
        dict(age=120, conditions=[cond("Created", 119)], started=False),
        "Undefined",
        "",
        "kubeflow operator hasn't updated",
        True,
    ),
    (
        "suspended-without-start-time",
        dict(
            age=120,
            conditions=[cond("Created", 119), cond("Suspended", 100)],
            started=False,
            suspend=True,
        ),
        "Queued",
        "Suspended",
        "",
        False,
    ),
    ("created", dict(age=30, conditions=[cond("Created", 29)]), "Queued", "JobCreated", "", False),
    (
        "running",
        dict(age=30, conditions=[cond("Created", 29), cond("Running", 20)]),
        "Running",
        "",
        "",
        False,
    ),
    (
        "restarting",
        dict(age=60, conditions=[cond("Created", 59), cond("Running", 50), cond("Restarting", 20)]),
        "Running",
        "",
        "",
        False,
    ),
    (
        "succeeded",
        dict(
            age=60,
            conditions=[cond("Created", 59), cond("Running", 10, "False"), cond("Succeeded", 10)],
        ),
        "Success",
        "",
        "",
        False,
    ),
    (
        "failed",
        dict(
            age=60,
            conditions=[
                cond("Created", 59),
                cond("Running", 10, "False"),
                cond("Failed", 10, reason="MPIJobFailed", message="launcher exited with 1"),
            ],
        ),
        "RetryableFailure",
        "",
        "Job failed:\n\tMPIJobFailed - launcher exited with 1",
        False,
    ),
    (
        "gang-scheduled-newest",
        dict(
            age=60, conditions=[cond("Created", 59), cond("Running", 40), cond("GangScheduled", 20)]
        ),
        "Undefined",
        "",
        "",
        False,
    ),
    (
        "all-false",
        dict(age=60, conditions=[cond("Created", 59, "False"), cond("Running", 40, "False")]),
        "Undefined",
        "",
        "found no current condition",
        True,
    ),
]


@pytest.mark.parametrize(
    ("job_args", "phase", "reason", "text", "go_error"),
    [pytest.param(*row[1:], id=row[0]) for row in PHASES],
)
def test_get_task_phase(
    built: dict[str, Any],
    job_args: dict[str, Any],
    phase: str,
    reason: str,
    text: str,
    go_error: bool,
) -> None:
    got = task_phase(job_with(built, **job_args))
    assert (got.phase, got.reason) == (phase, reason), got
    assert (got.error is not None) == go_error, got
    if text:
        assert text in ((got.error if go_error else got.message) or ""), got
    if phase == "RetryableFailure":
        assert got.message == text
        assert got.code == "DownstreamSystemError"
    if phase in ("Queued", "Running", "Success"):
        assert got.logs, got  # the worker pods' log links


def test_the_timeout_flag_overrides_the_kf_operator_timeout(built: dict[str, Any]) -> None:
    job = job_with(built, age=120, conditions=[], started=False)
    assert task_phase(job).error is not None
    got = task_phase(job, timeout="5m")
    assert (got.phase, got.reason, got.error) == ("Queued", "JobCreated", None)
