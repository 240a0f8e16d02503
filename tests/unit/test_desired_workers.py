"""Worker pods: what the operator overlays on the Worker template, and what it leaves alone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.desired.validation import load_valid_mpijob
from mpi_operator.desired.workers import new_worker_pod
from mpi_operator.testing.wrappers import MPIJobWrapper

FACTS = ClusterFacts()


def worker(job: MPIJobWrapper, index: int = 0, facts: ClusterFacts = FACTS) -> dict[str, Any]:
    return new_worker_pod(job.job(), index, facts, None)


def main_container(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


def base() -> MPIJobWrapper:
    return MPIJobWrapper("pi", "ns").workers(4)


@pytest.mark.parametrize(
    ("launcher_as_worker", "index", "expected_label"),
    [(False, 0, "0"), (False, 3, "3"), (True, 0, "1"), (True, 3, "4")],
    ids=[
        "first worker is index 0",
        "fourth worker is index 3",
        "launcher as worker: first worker is index 1",
        "launcher as worker: fourth worker is index 4",
    ],
)
def test_replica_index_label_is_shifted_only_when_the_launcher_works(
    launcher_as_worker: bool, index: int, expected_label: str
) -> None:
    pod = worker(base().run_launcher_as_worker(launcher_as_worker), index)
    assert pod["metadata"]["labels"]["training.kubeflow.org/replica-index"] == expected_label
    assert pod["metadata"]["name"] == f"pi-worker-{index}"
    assert pod["spec"]["hostname"] == f"pi-worker-{index}"
    assert pod["spec"]["subdomain"] == "pi"


def test_operator_labels_win_over_template_labels_and_others_are_kept() -> None:
    job = (
        base()
        .template_label(c.WORKER, "team", "ml")
        .template_label(c.WORKER, "training.kubeflow.org/job-role", "launcher")
        .template_label(c.WORKER, "training.kubeflow.org/replica-index", "99")
        .template_label(c.WORKER, "training.kubeflow.org/job-name", "other")
    )
    assert worker(job, 2)["metadata"]["labels"] == {
        "team": "ml",
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": "pi",
        "training.kubeflow.org/job-role": "worker",
        "training.kubeflow.org/replica-index": "2",
    }


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (base(), None),
        (
            base().template_annotation(c.WORKER, "sidecar.istio.io/inject", "false"),
            {"sidecar.istio.io/inject": "false"},
        ),
    ],
    ids=["no template annotations: none on the pod", "template annotations reach the pod"],
)
def test_annotations_come_from_the_template(job: MPIJobWrapper, expected: Any) -> None:
    assert worker(job)["metadata"].get("annotations") == expected


@pytest.mark.parametrize(
    ("job", "expected_command", "expected_args"),
    [
        (base(), ["/usr/sbin/sshd", "-De"], None),
        (base().command(c.WORKER, "/entrypoint.sh"), ["/entrypoint.sh"], None),
        (base().args(c.WORKER, "-D"), None, ["-D"]),
        (base().command(c.WORKER, "sshd").args(c.WORKER, "-De"), ["sshd"], ["-De"]),
        (base().command(c.WORKER).args(c.WORKER), ["/usr/sbin/sshd", "-De"], []),
    ],
    ids=[
        "neither command nor args: sshd",
        "command only: kept",
        "args only: image entrypoint kept",
        "command and args: kept",
        "empty command and args count as unset",
    ],
)
def test_sshd_is_the_default_command(
    job: MPIJobWrapper, expected_command: Any, expected_args: Any
) -> None:
    container = main_container(worker(job))
    assert container.get("command") == expected_command
    assert container.get("args") == expected_args


@pytest.mark.parametrize(
    ("job", "expected_dns_policy"),
    [
        (base(), None),
        (base().pod_spec_field(c.WORKER, "hostNetwork", False), None),
        (base().pod_spec_field(c.WORKER, "hostNetwork", True), "ClusterFirstWithHostNet"),
        (
            base()
            .pod_spec_field(c.WORKER, "hostNetwork", True)
            .pod_spec_field(c.WORKER, "dnsPolicy", "Default"),
            "ClusterFirstWithHostNet",
        ),
        (base().pod_spec_field(c.WORKER, "dnsPolicy", "None"), "None"),
    ],
    ids=[
        "pod network: no dnsPolicy",
        "hostNetwork false: no dnsPolicy",
        "hostNetwork: ClusterFirstWithHostNet",
        "hostNetwork overrides the template's dnsPolicy",
        "pod network keeps the template's dnsPolicy",
    ],
)
def test_host_network_pods_resolve_cluster_names(
    job: MPIJobWrapper, expected_dns_policy: str | None
) -> None:
    assert worker(job)["spec"].get("dnsPolicy") == expected_dns_policy


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (base(), "Never"),
        (base().restart_policy(c.WORKER, "OnFailure"), "OnFailure"),
        (base().pod_spec_field(c.WORKER, "restartPolicy", "Always"), "Never"),
    ],
    ids=[
        "default Never",
        "replica restartPolicy OnFailure",
        "template restartPolicy is overridden by the replica's",
    ],
)
def test_restart_policy_comes_from_the_replica_spec(job: MPIJobWrapper, expected: str) -> None:
    assert worker(job)["spec"]["restartPolicy"] == expected


def test_role_env_is_appended_after_user_env_so_it_wins() -> None:
    job = base().env(c.WORKER, "K_MPI_JOB_ROLE", "mine").env(c.WORKER, "FOO", "bar")
    assert main_container(worker(job))["env"] == [
        {"name": "K_MPI_JOB_ROLE", "value": "mine"},
        {"name": "FOO", "value": "bar"},
        {"name": "K_MPI_JOB_ROLE", "value": "worker"},
    ]


@pytest.mark.parametrize(
    ("mount_path", "fs_group", "expected_mode"),
    [
        ("/root/.ssh", None, 0o600),
        ("/root/.ssh", 1000, 0o600),
        ("/home/mpiuser/.ssh", 1000, 0o440),
        ("/home/mpiuser/.ssh", 0, 0o440),
        ("/home/mpiuser/.ssh", None, 0o444),
        ("/root/.ssh/", None, 0o444),
    ],
    ids=[
        "root .ssh: 0600",
        "root .ssh with an fsGroup: 0600",
        "another path with an fsGroup: read by the group only",
        "another path with fsGroup 0: read by the group only",
        "another path without an fsGroup: read by all, written by none",
        "only the exact default path gets 0600",
    ],
)
def test_ssh_keys_are_mounted_in_container_zero(
    mount_path: str, fs_group: int | None, expected_mode: int
) -> None:
    job = base().ssh_auth_mount_path(mount_path).volume(c.WORKER, "scratch", "/scratch")
    if fs_group is not None:
        job.pod_spec_field(c.WORKER, "securityContext", {"fsGroup": fs_group})
    pod = worker(job)
    volumes = pod["spec"]["volumes"]
    assert [v["name"] for v in volumes] == ["scratch", "ssh-auth"]
    assert volumes[1]["secret"]["defaultMode"] == expected_mode
    assert volumes[1]["secret"]["secretName"] == "pi-ssh"
    assert main_container(pod)["volumeMounts"] == [
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "ssh-auth", "mountPath": mount_path},
    ]


def test_workers_get_no_mpi_config_nor_mpi_env() -> None:
    pod = worker(base().implementation(c.INTEL_MPI))
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["ssh-auth"]
    assert [e["name"] for e in main_container(pod)["env"]] == ["K_MPI_JOB_ROLE"]


def test_only_container_zero_is_configured() -> None:
    sidecar = {"name": "sidecar", "image": "busybox", "env": [{"name": "A", "value": "1"}]}
    init = {"name": "init", "image": "busybox"}
    job = (
        base()
        .containers(c.WORKER, {"name": "main", "image": "mpi"}, copy.deepcopy(sidecar))
        .init_containers(c.WORKER, copy.deepcopy(init))
    )
    pod = worker(job)
    assert pod["spec"]["containers"][1] == sidecar
    assert pod["spec"]["initContainers"] == [init]


def test_fields_the_operator_does_not_know_reach_the_pod_unchanged() -> None:
    job = (
        base()
        .pod_spec_field(c.WORKER, "readinessGates", [{"conditionType": "example.com/ready"}])
        .container_field(c.WORKER, "workingDir", "/keep-me")
        .pod_spec_field(c.WORKER, "nodeSelector", {"gpu": "a100"})
        .pod_spec_field(c.WORKER, "tolerations", [{"key": "gpu", "operator": "Exists"}])
    )
    pod = worker(job)
    assert pod["spec"]["readinessGates"] == [{"conditionType": "example.com/ready"}]
    assert main_container(pod)["workingDir"] == "/keep-me"
    assert pod["spec"]["nodeSelector"] == {"gpu": "a100"}
    assert pod["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]


def test_only_labels_and_annotations_of_the_template_metadata_reach_the_pod() -> None:
    job = base().template_label(c.WORKER, "a", "b")
    obj = job.obj()
    obj["spec"]["mpiReplicaSpecs"][c.WORKER]["template"]["metadata"].update(
        {"name": "ignored", "namespace": "elsewhere", "finalizers": ["example.com/f"]}
    )
    pod = new_worker_pod(load_valid_mpijob(obj), 0, FACTS, None)
    assert pod["metadata"]["name"] == "pi-worker-0"
    assert pod["metadata"]["namespace"] == "ns"
    assert set(pod["metadata"]) == {"name", "namespace", "labels", "ownerReferences"}


def test_rendering_leaves_the_job_untouched_and_pods_independent() -> None:
    mpijob = base().pod_spec_field(c.WORKER, "dnsConfig", {"searches": ["a"]}).job()
    before = mpijob.to_dict()
    first = new_worker_pod(mpijob, 0, FACTS, None)
    second = new_worker_pod(mpijob, 1, FACTS, None)
    assert mpijob.to_dict() == before
    first["spec"]["dnsConfig"]["searches"].append("mutated")
    main_container(first)["env"].append({"name": "X"})
    assert second["spec"]["dnsConfig"]["searches"] == ["a", "pi.ns.svc.cluster.local"]
    assert new_worker_pod(mpijob, 0, FACTS, None)["spec"]["dnsConfig"]["searches"] == [
        "a",
        "pi.ns.svc.cluster.local",
    ]
