"""The launcher Job: MPI environment, config mount, run policy and restart policy."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.desired.launcher import (
    launcher_pod_template,
    new_launcher_job,
    template_sets_restart_policy,
)
from mpi_operator.testing.wrappers import MPIJobWrapper, child_labels

FACTS = ClusterFacts()
CONNECT = "-o ConnectionAttempts=10"
ROLE = ("K_MPI_JOB_ROLE", "launcher")
NVIDIA = [("NVIDIA_VISIBLE_DEVICES", None), ("NVIDIA_DRIVER_CAPABILITIES", None)]
# Open MPI 4 reads the OMPI_MCA_ names, Open MPI 5 (PRRTE) only the PRTE_MCA_ ones.
OPEN_MPI_4_AND_5 = [
    ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
    ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
    ("OMPI_MCA_plm_rsh_args", CONNECT),
    ("PRTE_MCA_prte_keep_fqdn_hostnames", "true"),
    ("PRTE_MCA_prte_default_hostfile", "/etc/mpi/hostfile"),
    ("PRTE_MCA_plm_ssh_args", CONNECT),
]
# Hydra reads HYDRA_LAUNCHER_EXTRA_ARGS; upstream's misspelt name is kept beside it.
HYDRA_RETRIES = [("HYDRA_LAUNCH_EXTRA_ARGS", CONNECT), ("HYDRA_LAUNCHER_EXTRA_ARGS", CONNECT)]


def base() -> MPIJobWrapper:
    return MPIJobWrapper("pi", "ns").workers(2)


def launcher(job: MPIJobWrapper, facts: ClusterFacts = FACTS) -> dict[str, Any]:
    return new_launcher_job(job.job(), facts, None)


def pod_spec(job: MPIJobWrapper) -> dict[str, Any]:
    spec: dict[str, Any] = launcher(job)["spec"]["template"]["spec"]
    return spec


def main_container(job: MPIJobWrapper) -> dict[str, Any]:
    container: dict[str, Any] = pod_spec(job)["containers"][0]
    return container


@pytest.mark.parametrize(
    ("job", "expected_env"),
    [
        (
            base(),
            [
                ROLE,
                *OPEN_MPI_4_AND_5,
                ("OMPI_MCA_orte_set_default_slots", "1"),
                ("PRTE_MCA_prte_set_default_slots", "1"),
                *NVIDIA,
            ],
        ),
        (
            base().slots_per_worker(4).run_launcher_as_worker(),
            [
                ROLE,
                *OPEN_MPI_4_AND_5,
                ("OMPI_MCA_orte_set_default_slots", "4"),
                ("PRTE_MCA_prte_set_default_slots", "4"),
            ],
        ),
        (
            base().implementation(c.INTEL_MPI).slots_per_worker(5),
            [
                ROLE,
                ("I_MPI_HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
                ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", CONNECT),
                ("I_MPI_PERHOST", "5"),
                *NVIDIA,
            ],
        ),
        (
            base().implementation(c.INTEL_MPI).run_launcher_as_worker(),
            [
                ROLE,
                ("I_MPI_HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
                ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", CONNECT),
                ("I_MPI_PERHOST", "1"),
            ],
        ),
        (
            base().implementation(c.MPICH).slots_per_worker(3),
            [
                ROLE,
                ("HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
                *HYDRA_RETRIES,
                *NVIDIA,
            ],
        ),
        (
            base().implementation(c.MPICH).run_launcher_as_worker(),
            [
                ROLE,
                ("HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
                *HYDRA_RETRIES,
            ],
        ),
        (
            base().env(c.LAUNCHER, "OMPI_MCA_plm_rsh_args", "mine").env(c.LAUNCHER, "A", "b"),
            [
                ("OMPI_MCA_plm_rsh_args", "mine"),
                ("A", "b"),
                ROLE,
                *OPEN_MPI_4_AND_5,
                ("OMPI_MCA_orte_set_default_slots", "1"),
                ("PRTE_MCA_prte_set_default_slots", "1"),
                *NVIDIA,
            ],
        ),
    ],
    ids=[
        "OpenMPI: slots env and GPU blanks",
        "OpenMPI launcher as worker: no GPU blanks",
        "Intel: I_MPI_PERHOST is the slots",
        "Intel launcher as worker: no GPU blanks",
        "MPICH: no slots env",
        "MPICH launcher as worker: no GPU blanks",
        "user env first, ours after it so ours win",
    ],
)
def test_launcher_env_in_upstream_order(
    job: MPIJobWrapper, expected_env: list[tuple[str, str | None]]
) -> None:
    env = main_container(job)["env"]
    assert [(e["name"], e.get("value")) for e in env] == expected_env


def test_gpu_blanks_have_no_value_so_the_container_sees_empty_strings() -> None:
    env = main_container(base())["env"]
    assert env[-2:] == [{"name": "NVIDIA_VISIBLE_DEVICES"}, {"name": "NVIDIA_DRIVER_CAPABILITIES"}]


@pytest.mark.parametrize(
    ("job", "expected_labels"),
    [
        (
            base().template_label(c.LAUNCHER, "team", "ml"),
            {
                "team": "ml",
                "training.kubeflow.org/operator-name": "mpi-operator",
                "training.kubeflow.org/job-name": "pi",
                "training.kubeflow.org/job-role": "launcher",
            },
        ),
        (
            base().run_launcher_as_worker(),
            {
                "training.kubeflow.org/operator-name": "mpi-operator",
                "training.kubeflow.org/job-name": "pi",
                "training.kubeflow.org/job-role": "launcher",
                "training.kubeflow.org/replica-index": "0",
            },
        ),
        (
            base().template_label(c.LAUNCHER, "training.kubeflow.org/job-role", "worker"),
            {
                "training.kubeflow.org/job-role": "launcher",
                "training.kubeflow.org/operator-name": "mpi-operator",
                "training.kubeflow.org/job-name": "pi",
            },
        ),
    ],
    ids=[
        "template labels kept, no replica index",
        "launcher as worker: replica index 0",
        "operator labels win over the template's",
    ],
)
def test_launcher_pod_labels(job: MPIJobWrapper, expected_labels: dict[str, str]) -> None:
    assert launcher(job)["spec"]["template"]["metadata"]["labels"] == expected_labels


def test_job_labels_are_only_app_and_template_annotations_reach_the_pod() -> None:
    job = base().template_annotation(c.LAUNCHER, "example.com/note", "x")
    rendered = launcher(job)
    assert rendered["metadata"]["labels"] == child_labels("pi")
    assert rendered["spec"]["template"]["metadata"]["annotations"] == {"example.com/note": "x"}
    assert "annotations" not in launcher(base())["spec"]["template"]["metadata"]


@pytest.mark.parametrize(
    ("run_policy", "expected_fields"),
    [
        ({}, {}),
        # The TTL stays the MPIJob's: the launcher Job goes with it.
        (
            {"ttlSecondsAfterFinished": 60, "activeDeadlineSeconds": 600, "backoffLimit": 2},
            {"activeDeadlineSeconds": 600, "backoffLimit": 2},
        ),
        (
            {"ttlSecondsAfterFinished": 0, "activeDeadlineSeconds": 0, "backoffLimit": 0},
            {"activeDeadlineSeconds": 0, "backoffLimit": 0},
        ),
        ({"suspend": True}, {"suspend": True}),
        ({"suspend": False}, {}),
    ],
    ids=[
        "nothing set: Kubernetes defaults apply",
        "deadline and backoff copied, not the ttl",
        "zeros are copied, not dropped",
        "suspended job: suspended launcher",
        "suspend false: field left unset",
    ],
)
def test_run_policy_is_delegated_to_the_job(
    run_policy: dict[str, Any], expected_fields: dict[str, Any]
) -> None:
    spec = launcher(base().run_policy(**run_policy))["spec"]
    fields = {k: v for k, v in spec.items() if k not in ("template", "podReplacementPolicy")}
    assert fields == expected_fields
    assert spec["podReplacementPolicy"] == "Failed"


@pytest.mark.parametrize(
    ("job", "expected_policy", "overridden"),
    [
        (base(), "OnFailure", False),
        (base().restart_policy(c.LAUNCHER, "Never"), "Never", False),
        (base().pod_spec_field(c.LAUNCHER, "restartPolicy", "Always"), "OnFailure", True),
        (
            base()
            .restart_policy(c.LAUNCHER, "Never")
            .pod_spec_field(c.LAUNCHER, "restartPolicy", "OnFailure"),
            "Never",
            True,
        ),
        (base().pod_spec_field(c.LAUNCHER, "restartPolicy", "OnFailure"), "OnFailure", True),
    ],
    ids=[
        "default OnFailure, no warning",
        "replica Never",
        "template Always overridden by the replica default",
        "template OnFailure overridden by replica Never",
        "template value equal to the replica's still warns, like upstream",
    ],
)
def test_restart_policy_comes_from_the_replica_spec(
    job: MPIJobWrapper, expected_policy: str, overridden: bool
) -> None:
    assert pod_spec(job)["restartPolicy"] == expected_policy
    assert template_sets_restart_policy(job.job()) is overridden


def test_launcher_command_is_never_defaulted() -> None:
    container = main_container(base())
    assert "command" not in container
    assert "args" not in container


def test_launcher_identity() -> None:
    spec = pod_spec(base().pod_spec_field(c.LAUNCHER, "hostNetwork", True))
    assert spec["hostname"] == "pi-launcher"
    assert spec["subdomain"] == "pi"
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert "dnsPolicy" not in pod_spec(base())


def test_launcher_mounts_ssh_keys_then_the_config_after_the_users_volumes() -> None:
    job = base().ssh_auth_mount_path("/home/mpiuser/.ssh").volume(c.LAUNCHER, "data", "/data")
    spec = pod_spec(job)
    assert [v["name"] for v in spec["volumes"]] == ["data", "ssh-auth", "mpi-job-config"]
    assert spec["volumes"][1]["secret"]["defaultMode"] == 0o444
    assert spec["volumes"][2]["configMap"] == {
        "name": "pi-config",
        "items": [
            {"key": "hostfile", "path": "hostfile", "mode": 0o444},
            {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
        ],
    }
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "data", "mountPath": "/data"},
        {"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh"},
        {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
    ]


def test_the_launchers_own_fs_group_sets_its_ssh_key_mode() -> None:
    job = base().ssh_auth_mount_path("/home/mpiuser/.ssh")
    job.pod_spec_field(c.LAUNCHER, "securityContext", {"fsGroup": 1000})
    [ssh] = [v for v in pod_spec(job)["volumes"] if v["name"] == "ssh-auth"]
    assert ssh["secret"]["defaultMode"] == 0o440


def test_fields_the_operator_does_not_know_reach_the_job_unchanged() -> None:
    main = {"name": "launcher", "image": "mpi", "workingDir": "/work"}
    sidecar = {"name": "log", "image": "busybox", "terminationMessagePolicy": "File"}
    job = (
        base()
        .pod_spec_field(c.LAUNCHER, "shareProcessNamespace", True)
        .containers(c.LAUNCHER, copy.deepcopy(main), copy.deepcopy(sidecar))
    )
    spec = pod_spec(job)
    assert spec["shareProcessNamespace"] is True
    assert spec["containers"][0]["workingDir"] == "/work"
    assert spec["containers"][1] == sidecar


def test_pod_template_is_the_jobs_template_and_leaves_the_job_untouched() -> None:
    mpijob = base().env(c.LAUNCHER, "A", "b").job()
    before = mpijob.to_dict()
    template = launcher_pod_template(mpijob, FACTS, None)
    assert template == new_launcher_job(mpijob, FACTS, None)["spec"]["template"]
    assert mpijob.to_dict() == before
    template["spec"]["containers"][0]["env"].clear()
    assert launcher_pod_template(mpijob, FACTS, None) != template
