"""KubectlExec jobs (kubeflow.org/v1, as training-operator runs them): no sshd, Secret or
Service; the launcher execs into the workers under an account of its own."""

from __future__ import annotations

from typing import Any

import pytest
from golden import assert_matches_golden

from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.cli import dump_objects
from mpi_operator.desired.config import new_config_map
from mpi_operator.desired.objects import desired_objects
from mpi_operator.desired.transports.kubectl_exec import MAX_ROLE_BYTES, role_errors, role_rules
from mpi_operator.desired.validation import load_valid_mpijob, render_errors
from mpi_operator.testing.wrappers import MPIJobWrapper, container

FACTS = ClusterFacts()
MPIRUN = ["mpirun", "--allow-run-as-root", "-np", "2", "python", "/opt/venv/bin/entrypoint.py"]


def flyte_job(name: str = "f3a9-n0-0", workers: int = 2) -> MPIJobWrapper:
    """What Flyte's backend writes: one container named mpi with args and no command, the
    same args in the workers, restartPolicy Never."""
    job = MPIJobWrapper(name, "flytesnacks-development").v1()
    job.containers(c.LAUNCHER, container("mpi", image="flyte/pi:1")).args(c.LAUNCHER, *MPIRUN)
    job.workers(workers).containers(c.WORKER, container("mpi", image="flyte/pi:1"))
    job.args(c.WORKER, *MPIRUN)
    for role in (c.LAUNCHER, c.WORKER):
        job.restart_policy(role, c.RESTART_POLICY_NEVER)
        job.pod_spec_field(role, "serviceAccountName", "default")
    return job


def kinds_and_names(objects: list[dict[str, Any]]) -> list[str]:
    return [f"{obj['kind']} {obj['metadata']['name']}" for obj in objects]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == kind]


def test_the_children_are_the_config_the_workers_the_exec_access_and_the_launcher() -> None:
    objects = desired_objects(flyte_job("pi").job(), FACTS, None)
    assert kinds_and_names(objects) == [
        "ConfigMap pi-config",
        "Pod pi-worker-0",
        "Pod pi-worker-1",
        "ServiceAccount pi-launcher",
        "Role pi-launcher",
        "RoleBinding pi-launcher",
        "Job pi-launcher",
    ]


def test_a_job_without_workers_renders_no_role_and_no_binding() -> None:
    """A Role with no names would grant exec into every pod of the namespace."""
    job = flyte_job("pi").without("Worker").run_launcher_as_worker().job()
    objects = desired_objects(job, FACTS, None)
    assert kinds_and_names(objects) == [
        "ConfigMap pi-config",
        "ServiceAccount pi-launcher",
        "Job pi-launcher",
    ]


def test_a_role_is_never_built_without_names() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        role_rules([])


def test_workers_get_no_account_token_unless_their_template_asks() -> None:
    [plain, *_] = by_kind(desired_objects(flyte_job("pi").job(), FACTS, None), "Pod")
    assert plain["spec"]["automountServiceAccountToken"] is False
    asking = flyte_job("pi").pod_spec_field(c.WORKER, "automountServiceAccountToken", True)
    [kept, *_] = by_kind(desired_objects(asking.job(), FACTS, None), "Pod")
    assert kept["spec"]["automountServiceAccountToken"] is True
    # The launcher needs its token for kubectl, whatever its template says.
    [launcher] = by_kind(desired_objects(flyte_job("pi").job(), FACTS, None), "Job")
    assert launcher["spec"]["template"]["spec"]["automountServiceAccountToken"] is True


def test_a_suspended_job_has_no_exec_access_and_no_workers() -> None:
    objects = desired_objects(flyte_job("pi").suspend().job(), FACTS, None)
    assert kinds_and_names(objects) == ["ConfigMap pi-config", "Job pi-launcher"]


def test_the_role_allows_get_and_exec_on_this_jobs_workers_only() -> None:
    [role] = by_kind(desired_objects(flyte_job("pi", workers=3).job(), FACTS, None), "Role")
    workers = ["pi-worker-0", "pi-worker-1", "pi-worker-2"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": workers},
        {
            "apiGroups": [""],
            "resources": ["pods/exec"],
            "verbs": ["create"],
            "resourceNames": workers,
        },
    ]


def test_the_launcher_runs_under_its_own_account_not_the_templates() -> None:
    objects = desired_objects(flyte_job("pi").job(), FACTS, None)
    [binding] = by_kind(objects, "RoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "pi-launcher", "namespace": "flytesnacks-development"}
    ]
    pod = by_kind(objects, "Job")[0]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "pi-launcher"
    assert pod["automountServiceAccountToken"] is True
    # The workers keep the template's account: they are never given a right.
    assert {w["spec"]["serviceAccountName"] for w in by_kind(objects, "Pod")} == {"default"}


def test_workers_without_a_command_sleep_and_their_args_go() -> None:
    pods = by_kind(desired_objects(flyte_job().job(), FACTS, None), "Pod")
    for pod in pods:
        main = pod["spec"]["containers"][0]
        assert (main["command"], main["args"]) == (["sleep"], ["365d"])
        # No SSH keys: only kubexec.sh, which Open MPI's daemons look for.
        [volume] = pod["spec"]["volumes"]
        assert volume["configMap"]["items"] == [
            {"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555}
        ]
        assert "subdomain" not in pod["spec"]


def test_a_worker_command_is_kept() -> None:
    job = flyte_job().command(c.WORKER, "python", "serve.py").job()
    main = by_kind(desired_objects(job, FACTS, None), "Pod")[0]["spec"]["containers"][0]
    assert (main["command"], main["args"]) == (["python", "serve.py"], MPIRUN)


@pytest.mark.parametrize(
    ("policy", "launcher", "worker"),
    [
        (c.RESTART_POLICY_EXIT_CODE, "Never", "Never"),
        (c.RESTART_POLICY_ALWAYS, "OnFailure", "Always"),
        (c.RESTART_POLICY_ON_FAILURE, "OnFailure", "OnFailure"),
    ],
)
def test_v1_restart_policies_become_what_pods_and_jobs_take(
    policy: str, launcher: str, worker: str
) -> None:
    job = flyte_job().restart_policy(c.LAUNCHER, policy).restart_policy(c.WORKER, policy).job()
    objects = desired_objects(job, FACTS, None)
    assert by_kind(objects, "Job")[0]["spec"]["template"]["spec"]["restartPolicy"] == launcher
    assert by_kind(objects, "Pod")[0]["spec"]["restartPolicy"] == worker


def test_the_launcher_restarts_never_by_default_as_in_training_operator() -> None:
    job = flyte_job().obj()
    del job["spec"]["mpiReplicaSpecs"][c.LAUNCHER]["restartPolicy"]
    launcher = load_valid_mpijob(job).replica_spec(c.LAUNCHER)
    assert launcher is not None and launcher.restart_policy == c.RESTART_POLICY_NEVER


def test_hosts_are_pod_names_and_discovery_names_the_slots() -> None:
    job = flyte_job("pi").slots_per_worker(2).job()
    data = new_config_map(job, FACTS, ["pi-worker-1", "pi-worker-0"])["data"]
    assert data["hostfile"] == "pi-worker-0 slots=2\npi-worker-1 slots=2\n"
    assert data["discover_hosts.sh"] == "#!/bin/sh\necho pi-worker-0:2\necho pi-worker-1:2\n"
    assert data["kubexec.sh"] == (
        '#!/bin/sh\npod="$1"\nshift\n'
        'exec /opt/kube/kubectl exec "$pod" --container=mpi -- /bin/sh -c "$*"\n'
    )


def test_main_container_names_the_exec_target() -> None:
    job = (
        flyte_job("pi")
        .containers(c.WORKER, container("sidecar", image="s"), container("mpi", image="m"))
        .spec_field("mainContainer", "mpi")
        .job()
    )
    assert "--container=mpi " in new_config_map(job, FACTS)["data"]["kubexec.sh"]


def test_the_role_must_fit_what_the_api_server_stores() -> None:
    job = flyte_job("a" * 40, workers=15_000).job()
    [error] = role_errors(job)
    assert error.path == "spec.mpiReplicaSpecs[Worker].replicas"
    assert f"under {MAX_ROLE_BYTES}" in error.message
    assert error in render_errors(job, FACTS, None)
    assert list(role_errors(flyte_job("pi", workers=15_000).job())) == []


GOLDEN_SCENARIOS = [
    ("v1-flyte", flyte_job(), FACTS),
    ("v1-intel", flyte_job().implementation(c.INTEL_MPI).slots_per_worker(2), FACTS),
    ("v1-mpich", flyte_job().implementation(c.MPICH), FACTS),
    (
        "v1-launcher-as-worker",
        flyte_job().run_launcher_as_worker(),
        ClusterFacts(kubectl_delivery_image="registry.example/kubectl-delivery:v1"),
    ),
]


@pytest.mark.parametrize(
    ("scenario", "job", "facts"), GOLDEN_SCENARIOS, ids=[s[0] for s in GOLDEN_SCENARIOS]
)
def test_rendered_objects_match_golden(
    scenario: str, job: MPIJobWrapper, facts: ClusterFacts
) -> None:
    objects = desired_objects(job.job(), facts, None)
    assert_matches_golden(f"desired/{scenario}.yaml", dump_objects(objects))
