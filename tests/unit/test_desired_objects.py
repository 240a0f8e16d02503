"""Everything created for a fresh job, in creation order, and the golden renderings."""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from golden import assert_matches_golden

from gang import GangResource, GangState, StoredGang
from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.meta import is_controlled_by
from mpi_operator.api.models import MPIJob
from mpi_operator.cli import dump_objects
from mpi_operator.desired.objects import desired_objects
from mpi_operator.desired.transports.ssh import SSHKeyPair
from mpi_operator.testing.wrappers import MPIJobWrapper

# Not a usable key: goldens must not change from run to run, and builders never parse it.
FIXED_KEY = SSHKeyPair(
    private_key_pem=(
        "-----BEGIN EC PRIVATE KEY-----\nZml4ZWQtdGVzdC1rZXk=\n-----END EC PRIVATE KEY-----\n"
    ),
    public_key_openssh="ecdsa-sha2-nistp521 AAAAE2VjZHNhLXNoYTItbmlzdHA1MjE= fixed\n",
)
FACTS = ClusterFacts()


class FakeGang:
    """Just enough of a gang scheduler to see where the builders call it."""

    scheduler_name = "fake-gang"
    gang_resources = (GangResource("example.com", "v1", "PodGroup", "podgroups", "Example"),)

    def gang_objects(self, job: MPIJob, facts: ClusterFacts) -> list[dict[str, Any]]:
        return [
            {
                "apiVersion": self.gang_resources[0].api_version,
                "kind": "PodGroup",
                "metadata": {"name": job.name, "namespace": job.namespace},
                "spec": {"minMember": job.replicas(c.WORKER) + 1},
            }
        ]

    def decorate_pod_template(self, template: dict[str, Any], job: MPIJob) -> dict[str, Any]:
        decorated = copy.deepcopy(template)
        decorated["spec"]["schedulerName"] = self.scheduler_name
        decorated["metadata"].setdefault("annotations", {})["example.com/gang"] = job.name
        decorated["metadata"]["labels"]["example.com/gang"] = job.name
        return decorated

    def needs_update(self, current: dict[str, Any], desired: dict[str, Any]) -> bool:
        return current.get("spec") != desired.get("spec")

    def updated_object(
        self, current: Mapping[str, Any], desired: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {**copy.deepcopy(dict(current)), "spec": copy.deepcopy(desired["spec"])}

    def gang_state(self, gang: StoredGang) -> GangState:
        return GangState(scheduled=None, reason="", message="")


def kinds_and_names(objects: list[dict[str, Any]]) -> list[str]:
    return [f"{obj['kind']} {obj['metadata']['name']}" for obj in objects]


# What every job gets first, whatever its workers and gang.
SHARED_OBJECTS = ["Service foo", "ConfigMap foo-config", "Secret foo-ssh"]
FIVE_WORKERS = [f"Pod foo-worker-{i}" for i in range(5)]


@pytest.mark.parametrize(
    "implementation", [c.OPENMPI, c.INTEL_MPI, c.MPICH], ids=["OpenMPI", "Intel", "MPICH"]
)
def test_all_resources_created_in_upstream_order(implementation: str) -> None:
    job = MPIJobWrapper("foo", "default").implementation(implementation).workers(5).job()
    objects = desired_objects(job, FACTS, None, FIXED_KEY)
    assert kinds_and_names(objects) == [*SHARED_OBJECTS, *FIVE_WORKERS, "Job foo-launcher"]
    config_data = objects[1]["data"]
    assert config_data["hostfile"].count("\n") == 5
    assert config_data["discover_hosts.sh"] == "#!/bin/sh\n"
    assert all(is_controlled_by(obj, job) for obj in objects)
    assert all(obj["metadata"]["namespace"] == "default" for obj in objects)


def test_pod_group_comes_after_the_secret_and_before_the_workers() -> None:
    job = MPIJobWrapper("foo", "default").workers(5).job()
    objects = desired_objects(job, FACTS, FakeGang(), FIXED_KEY)
    assert kinds_and_names(objects) == [
        *SHARED_OBJECTS,
        "PodGroup foo",
        *FIVE_WORKERS,
        "Job foo-launcher",
    ]
    assert objects[3]["spec"] == {"minMember": 6}


def test_gang_decorates_every_worker_and_the_launcher_template() -> None:
    job = MPIJobWrapper("foo", "default").workers(2).job()
    objects = desired_objects(job, FACTS, FakeGang(), FIXED_KEY)
    pods = [obj for obj in objects if obj["kind"] == "Pod"]
    launcher_template = objects[-1]["spec"]["template"]
    for pod_like in [*pods, launcher_template]:
        assert pod_like["spec"]["schedulerName"] == "fake-gang"
        assert pod_like["metadata"]["annotations"] == {"example.com/gang": "foo"}
        assert pod_like["metadata"]["labels"]["example.com/gang"] == "foo"
    # Decoration comes after the operator's overlay, so it never loses it.
    assert pods[1]["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "1"
    assert launcher_template["metadata"]["ownerReferences"][0]["name"] == "foo"


@pytest.mark.parametrize("gang", [None, FakeGang()], ids=["no gang", "gang scheduling"])
def test_suspended_job_gets_no_workers_nor_pod_group_and_a_suspended_launcher(
    gang: FakeGang | None,
) -> None:
    job = MPIJobWrapper("foo", "default").workers(5).suspend().job()
    objects = desired_objects(job, FACTS, gang, FIXED_KEY)
    assert kinds_and_names(objects) == [*SHARED_OBJECTS, "Job foo-launcher"]
    assert objects[-1]["spec"]["suspend"] is True
    # The hostfile still names every worker: it is ready for the resume.
    assert objects[1]["data"]["hostfile"].count("\n") == 5


def test_a_fresh_key_pair_is_generated_when_none_is_given() -> None:
    job = MPIJobWrapper("foo", "default").workers(1).job()
    first = desired_objects(job, FACTS, None)[2]["data"]
    second = desired_objects(job, FACTS, None)[2]["data"]
    assert first["ssh-privatekey"] != second["ssh-privatekey"]
    private_key = serialization.load_pem_private_key(
        base64.b64decode(first["ssh-privatekey"]), password=None
    )
    assert isinstance(private_key, ec.EllipticCurvePrivateKey)
    assert base64.b64decode(first["ssh-publickey"]).startswith(b"ecdsa-sha2-nistp521 ")


def test_rendering_does_not_touch_the_job_and_is_repeatable() -> None:
    job = MPIJobWrapper("foo", "default").workers(3).env(c.WORKER, "A", "1").job()
    before = job.to_dict()
    first = desired_objects(job, FACTS, FakeGang(), FIXED_KEY)
    assert job.to_dict() == before
    assert desired_objects(job, FACTS, FakeGang(), FIXED_KEY) == first


def overrides() -> MPIJobWrapper:
    return (
        MPIJobWrapper("bar", "foo")
        .ssh_auth_mount_path("/home/mpiuser/.ssh")
        .run_policy(ttlSecondsAfterFinished=60, activeDeadlineSeconds=3600, backoffLimit=2)
        .template_label(c.LAUNCHER, "team", "ml")
        .template_annotation(c.LAUNCHER, "example.com/owner", "ml-team")
        .pod_spec_field(c.LAUNCHER, "hostNetwork", True)
        .pod_spec_field(c.LAUNCHER, "restartPolicy", "Always")
        .container_field(c.LAUNCHER, "securityContext", {"runAsUser": 1000})
        .command(c.LAUNCHER, "mpirun", "-n", "2", "/home/mpiuser/pi")
        .env(c.LAUNCHER, "FOO", "bar")
        .volume(c.LAUNCHER, "scratch", "/scratch")
        .workers(2)
        .restart_policy(c.WORKER, c.RESTART_POLICY_ON_FAILURE)
        .pod_spec_field(c.WORKER, "hostNetwork", True)
        .pod_spec_field(c.WORKER, "dnsConfig", {"searches": ["example.org"]})
        .pod_spec_field(c.WORKER, "readinessGates", [{"conditionType": "example.com/keep"}])
        .container_field(c.WORKER, "workingDir", "/keep")
        .command(c.WORKER, "/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config")
    )


GOLDEN_SCENARIOS = [
    ("openmpi-defaults", MPIJobWrapper("pi", "ns").workers(2), FACTS),
    (
        "intel",
        MPIJobWrapper("pi", "ns").implementation(c.INTEL_MPI).slots_per_worker(2).workers(2),
        FACTS,
    ),
    (
        "mpich",
        MPIJobWrapper("pi", "ns").implementation(c.MPICH).slots_per_worker(2).workers(2),
        FACTS,
    ),
    ("launcher-as-worker", MPIJobWrapper("pi", "ns").run_launcher_as_worker().workers(2), FACTS),
    ("overrides", overrides(), FACTS),
    ("cluster-domain", MPIJobWrapper("pi", "ns").workers(2), ClusterFacts("corp.example")),
    ("suspended", MPIJobWrapper("pi", "ns").workers(2).suspend(), FACTS),
]


@pytest.mark.parametrize(
    ("scenario", "job", "facts"), GOLDEN_SCENARIOS, ids=[s[0] for s in GOLDEN_SCENARIOS]
)
def test_rendered_objects_match_golden(
    scenario: str, job: MPIJobWrapper, facts: ClusterFacts
) -> None:
    objects = desired_objects(job.job(), facts, None, FIXED_KEY)
    assert_matches_golden(f"desired/{scenario}.yaml", dump_objects(objects))
