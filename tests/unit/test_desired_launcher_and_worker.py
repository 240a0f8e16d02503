"""Whole launcher Jobs and worker pods, as upstream's TestNewLauncherAndWorker renders them."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.desired.launcher import new_launcher_job
from mpi_operator.desired.workers import new_worker_pod
from mpi_operator.testing.wrappers import MPIJobWrapper, child_labels, owner_references


def ssh_volume(job: str, default_mode: int) -> dict[str, Any]:
    secret: dict[str, Any] = {
        "secretName": f"{job}-ssh",
        "items": [
            {"key": "ssh-privatekey", "path": "id_rsa"},
            {"key": "ssh-publickey", "path": "id_rsa.pub"},
            {"key": "ssh-publickey", "path": "authorized_keys"},
        ],
        "defaultMode": default_mode,
    }
    return {"name": "ssh-auth", "secret": secret}


def config_volume(job: str) -> dict[str, Any]:
    return {
        "name": "mpi-job-config",
        "configMap": {
            "name": f"{job}-config",
            "items": [
                {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
            ],
        },
    }


def labels(job: str, role: str, index: str | None = None) -> dict[str, str]:
    result = {
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": job,
        "training.kubeflow.org/job-role": role,
    }
    if index is not None:
        result["training.kubeflow.org/replica-index"] = index
    return result


OPENMPI_ENV = [
    {"name": "K_MPI_JOB_ROLE", "value": "launcher"},
    {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
    {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
    {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
    {"name": "PRTE_MCA_prte_keep_fqdn_hostnames", "value": "true"},
    {"name": "PRTE_MCA_prte_default_hostfile", "value": "/etc/mpi/hostfile"},
    {"name": "PRTE_MCA_plm_ssh_args", "value": "-o ConnectionAttempts=10"},
    {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"},
    {"name": "PRTE_MCA_prte_set_default_slots", "value": "1"},
]
NVIDIA_BLANKS = [{"name": "NVIDIA_VISIBLE_DEVICES"}, {"name": "NVIDIA_DRIVER_CAPABILITIES"}]
WORKER_ENV = [{"name": "K_MPI_JOB_ROLE", "value": "worker"}]
SSHD = ["/usr/sbin/sshd", "-De"]
# The kubelet keeps a failed main container's log tail for the job's failure message.
LAST_WORDS = "FallbackToLogsOnError"


def defaults_job() -> MPIJobWrapper:
    return (
        MPIJobWrapper("foo", "bar").containers(c.LAUNCHER, {}).workers(1).containers(c.WORKER, {})
    )


def defaults_launcher(*, launcher_as_worker: bool) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "foo-launcher",
            "namespace": "bar",
            "labels": child_labels("foo"),
            "ownerReferences": owner_references("foo"),
        },
        "spec": {
            "template": {
                "metadata": {
                    "labels": labels("foo", "launcher", "0" if launcher_as_worker else None),
                    "ownerReferences": owner_references("foo"),
                },
                "spec": {
                    "containers": [
                        {
                            "env": OPENMPI_ENV + ([] if launcher_as_worker else NVIDIA_BLANKS),
                            "terminationMessagePolicy": LAST_WORDS,
                            "volumeMounts": [
                                {"name": "ssh-auth", "mountPath": "/root/.ssh"},
                                {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
                            ],
                        }
                    ],
                    "hostname": "foo-launcher",
                    "subdomain": "foo",
                    "dnsConfig": {"searches": ["foo.bar.svc.cluster.local"]},
                    "restartPolicy": "OnFailure",
                    "volumes": [ssh_volume("foo", 0o600), config_volume("foo")],
                },
            },
            "podReplacementPolicy": "Failed",
        },
    }


def defaults_worker(*, index_label: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "foo-worker-0",
            "namespace": "bar",
            "labels": labels("foo", "worker", index_label),
            "ownerReferences": owner_references("foo"),
        },
        "spec": {
            "containers": [
                {
                    "command": SSHD,
                    "env": WORKER_ENV,
                    "terminationMessagePolicy": LAST_WORDS,
                    "volumeMounts": [{"name": "ssh-auth", "mountPath": "/root/.ssh"}],
                }
            ],
            "hostname": "foo-worker-0",
            "subdomain": "foo",
            "dnsConfig": {"searches": ["foo.bar.svc.cluster.local"]},
            "restartPolicy": "Never",
            "volumes": [ssh_volume("foo", 0o600)],
        },
    }


def overrides_job() -> MPIJobWrapper:
    return (
        MPIJobWrapper("bar", "foo")
        .ssh_auth_mount_path("/home/mpiuser/.ssh")
        .slots_per_worker(5)
        .implementation(c.INTEL_MPI)
        .run_policy(ttlSecondsAfterFinished=1, activeDeadlineSeconds=2, backoffLimit=3)
        .restart_policy(c.LAUNCHER, c.RESTART_POLICY_ON_FAILURE)
        .template_label(c.LAUNCHER, "foo", "bar")
        .pod_spec_field(c.LAUNCHER, "hostNetwork", True)
        .containers(
            c.LAUNCHER,
            {
                "env": [{"name": "FOO", "value": "bar"}],
                "securityContext": {"runAsUser": 1000},
                "volumeMounts": [{"name": "fool-vol", "mountPath": "/mnt/foo"}],
            },
            {},
        )
        .pod_spec_field(c.LAUNCHER, "volumes", [{"name": "foo-vol"}])
        .workers(13)
        .pod_spec_field(c.WORKER, "hostNetwork", True)
        .containers(
            c.WORKER, {"command": ["/entrypoint.sh"], "env": [{"name": "FOO", "value": "bar"}]}
        )
    )


OVERRIDES_LAUNCHER: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "bar-launcher",
        "namespace": "foo",
        "labels": child_labels("bar"),
        "ownerReferences": owner_references("bar"),
    },
    "spec": {
        "activeDeadlineSeconds": 2,
        "backoffLimit": 3,
        "template": {
            "metadata": {
                "labels": {"foo": "bar", **labels("bar", "launcher")},
                "ownerReferences": owner_references("bar"),
            },
            "spec": {
                "hostNetwork": True,
                "containers": [
                    {
                        "env": [
                            {"name": "FOO", "value": "bar"},
                            {"name": "K_MPI_JOB_ROLE", "value": "launcher"},
                            {"name": "I_MPI_HYDRA_HOST_FILE", "value": "/etc/mpi/hostfile"},
                            {
                                "name": "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS",
                                "value": "-o ConnectionAttempts=10",
                            },
                            {"name": "I_MPI_PERHOST", "value": "5"},
                            *NVIDIA_BLANKS,
                        ],
                        "securityContext": {"runAsUser": 1000},
                        "terminationMessagePolicy": LAST_WORDS,
                        "volumeMounts": [
                            {"name": "fool-vol", "mountPath": "/mnt/foo"},
                            {"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh"},
                            {"name": "mpi-job-config", "mountPath": "/etc/mpi"},
                        ],
                    },
                    {},
                ],
                "volumes": [{"name": "foo-vol"}, ssh_volume("bar", 0o444), config_volume("bar")],
                "hostname": "bar-launcher",
                "subdomain": "bar",
                "dnsPolicy": "ClusterFirstWithHostNet",
                "dnsConfig": {"searches": ["bar.foo.svc.cluster.local"]},
                "restartPolicy": "OnFailure",
            },
        },
        "podReplacementPolicy": "Failed",
    },
}

OVERRIDES_WORKER_12: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "bar-worker-12",
        "namespace": "foo",
        "labels": labels("bar", "worker", "12"),
        "ownerReferences": owner_references("bar"),
    },
    "spec": {
        "hostNetwork": True,
        "containers": [
            {
                "command": ["/entrypoint.sh"],
                "env": [{"name": "FOO", "value": "bar"}, *WORKER_ENV],
                "terminationMessagePolicy": LAST_WORDS,
                "volumeMounts": [{"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh"}],
            }
        ],
        "hostname": "bar-worker-12",
        "subdomain": "bar",
        "dnsPolicy": "ClusterFirstWithHostNet",
        "dnsConfig": {"searches": ["bar.foo.svc.cluster.local"]},
        "restartPolicy": "Never",
        "volumes": [ssh_volume("bar", 0o444)],
    },
}


@pytest.mark.parametrize(
    ("job", "worker_index", "expected_launcher", "expected_worker"),
    [
        (
            defaults_job(),
            0,
            defaults_launcher(launcher_as_worker=False),
            defaults_worker(index_label="0"),
        ),
        (
            defaults_job().run_launcher_as_worker(),
            0,
            defaults_launcher(launcher_as_worker=True),
            defaults_worker(index_label="1"),
        ),
        (overrides_job(), 12, OVERRIDES_LAUNCHER, OVERRIDES_WORKER_12),
    ],
    ids=["defaults", "launcher-as-worker", "overrides"],
)
def test_new_launcher_and_worker(
    job: MPIJobWrapper,
    worker_index: int,
    expected_launcher: dict[str, Any],
    expected_worker: dict[str, Any],
) -> None:
    mpijob = job.defaulted()
    assert new_launcher_job(mpijob, ClusterFacts(), None) == expected_launcher
    assert new_worker_pod(mpijob, worker_index, ClusterFacts(), None) == expected_worker


def pod_spec_of(role: str, job: MPIJobWrapper, facts: ClusterFacts) -> dict[str, Any]:
    mpijob = job.job()
    if role == c.LAUNCHER:
        spec: dict[str, Any] = new_launcher_job(mpijob, facts, None)["spec"]["template"]["spec"]
        return spec
    worker_spec: dict[str, Any] = new_worker_pod(mpijob, 0, facts, None)["spec"]
    return worker_spec


@pytest.mark.parametrize("role", [c.LAUNCHER, c.WORKER])
@pytest.mark.parametrize(
    ("dns_config", "facts", "expected_dns_config"),
    [
        (None, ClusterFacts(), {"searches": ["pi.ns.svc.cluster.local"]}),
        (
            None,
            ClusterFacts(cluster_domain="corp.example"),
            {"searches": ["pi.ns.svc.corp.example"]},
        ),
        (
            {"searches": ["example.org"], "options": [{"name": "ndots", "value": "2"}]},
            ClusterFacts(),
            {
                "searches": ["example.org", "pi.ns.svc.cluster.local"],
                "options": [{"name": "ndots", "value": "2"}],
            },
        ),
        (
            {"nameservers": ["1.1.1.1"]},
            ClusterFacts(),
            {"nameservers": ["1.1.1.1"], "searches": ["pi.ns.svc.cluster.local"]},
        ),
    ],
    ids=[
        "no dnsConfig: the job's Service domain",
        "configured cluster domain is used instead of cluster.local",
        "existing searches and options are kept, ours appended",
        "dnsConfig without searches gets one",
    ],
)
def test_every_pod_of_the_job_resolves_short_names_through_the_job_domain(
    role: str,
    dns_config: dict[str, Any] | None,
    facts: ClusterFacts,
    expected_dns_config: dict[str, Any],
) -> None:
    """The launcher too: images look up their own short hostname before starting."""
    job = MPIJobWrapper("pi", "ns").workers(2)
    if dns_config is not None:
        job = job.pod_spec_field(role, "dnsConfig", dns_config)
    assert pod_spec_of(role, job, facts)["dnsConfig"] == expected_dns_config
