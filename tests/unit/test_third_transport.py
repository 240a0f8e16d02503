"""A third transport, written as docs/transports.md's checklist says and registered for this
test alone: rendered and synced with no change outside ``desired/transports/`` and this file.

It is a bootstrap without SSH (as Flux or a PMIx server would start ranks): every pod runs the
broker, which finds its peers by pod name in the hostfile; no Service, no key pair, no grant.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import pytest

from mpi_operator import sdk
from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.controller.plan import plan_sync
from mpi_operator.desired import pod_templates, transports
from mpi_operator.desired.kinds import Child
from mpi_operator.desired.pod_templates import HOSTFILE_PATH
from mpi_operator.field_errors import FieldError
from mpi_operator.pod_rules import dns
from mpi_operator.testing.wrappers import MPIJobWrapper
from tests.unit.controller.test_plan import cluster_view, context, converge, writes

NAME: Final = "Broker"
BOOTSTRAP: Final = "broker-bootstrap.sh"
BROKER_COMMAND: Final = ("broker", "start")
MAX_BROKERS: Final = 512


class Broker:
    name: Final = NAME
    before_workers: Final = (Child.CONFIG_MAP,)
    after_workers: Final = ()

    def set_host_identity(
        self, template: dict[str, Any], job: DefaultedMPIJob, facts: ClusterFacts
    ) -> None:
        template["spec"]["setHostnameAsFQDN"] = False

    def host_name(self, job: DefaultedMPIJob, pod_name: str, facts: ClusterFacts) -> str:
        return pod_name

    def discovered_host(self, job: DefaultedMPIJob, pod_name: str, facts: ClusterFacts) -> str:
        return f"{pod_name} broker"

    def config_scripts(self, job: DefaultedMPIJob) -> dict[str, str]:
        return {BOOTSTRAP: f"#!/bin/sh\nexec broker join --hostfile {HOSTFILE_PATH}\n"}

    def launcher_env(self, implementation: str) -> tuple[tuple[str, str], ...]:
        return (("BROKER_HOSTFILE", HOSTFILE_PATH),)

    def prepare_worker(self, template: dict[str, Any], job: DefaultedMPIJob) -> None:
        container = pod_templates.main_container(template)
        container.setdefault("command", list(BROKER_COMMAND))

    def decorate(
        self, template: dict[str, Any], job: DefaultedMPIJob, role: str, facts: ClusterFacts
    ) -> None:
        pod_templates.append_to(
            pod_templates.main_container(template), "env", {"name": "BROKER_ROLE", "value": role}
        )

    def name_errors(self, job: DefaultedMPIJob) -> Iterator[FieldError]:
        for problem in dns.dns1123_label(job.name):
            yield FieldError("metadata.name", f"a broker's host name: {problem}")

    def spec_errors(self, job: DefaultedMPIJob) -> Iterator[FieldError]:
        return iter(())

    def operator_mounts(self, job: DefaultedMPIJob, role: str) -> tuple[str, ...]:
        return (c.CONFIG_MOUNT_PATH,) if role == c.LAUNCHER else ()

    def replaces_account(self, role: str) -> bool:
        return False

    def errors(self, job: DefaultedMPIJob, facts: ClusterFacts) -> Iterator[FieldError]:
        if job.replicas(c.WORKER) > MAX_BROKERS:
            yield FieldError(
                f"spec.mpiReplicaSpecs[{c.WORKER}].replicas",
                f"a broker tree holds at most {MAX_BROKERS} workers",
            )


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(transports._TRANSPORTS, NAME, Broker())
    monkeypatch.setattr(c, "TRANSPORTS", (*c.TRANSPORTS, NAME))
    yield


def broker_job(workers: int = 2) -> dict[str, Any]:
    return MPIJobWrapper("pi").transport(NAME).workers(workers).obj()


def test_render_gives_the_transports_children_only() -> None:
    objects = sdk.render(broker_job())
    assert [o["kind"] for o in objects] == ["ConfigMap", "Pod", "Pod", "Job"]
    config = objects[0]["data"]
    assert config["hostfile"] == "pi-worker-0 slots=1\npi-worker-1 slots=1\n"
    assert config["discover_hosts.sh"] == "#!/bin/sh\n"
    assert config[BOOTSTRAP].startswith("#!/bin/sh\nexec broker join")


def test_the_pods_are_the_transports() -> None:
    objects = sdk.render(broker_job())
    worker, launcher = objects[1], objects[-1]["spec"]["template"]
    main = worker["spec"]["containers"][0]
    assert main["command"] == list(BROKER_COMMAND)
    assert {"name": "BROKER_ROLE", "value": c.WORKER} in main["env"]
    assert "subdomain" not in worker["spec"] and "volumes" not in worker["spec"]
    env = launcher["spec"]["containers"][0]["env"]
    assert {"name": "BROKER_HOSTFILE", "value": HOSTFILE_PATH} in env
    assert {"name": "BROKER_ROLE", "value": c.LAUNCHER} in env
    [config] = launcher["spec"]["volumes"]
    assert config["configMap"]["items"][-1] == {"key": BOOTSTRAP, "path": BOOTSTRAP, "mode": 0o555}


def test_its_checks_refuse_a_job_before_rendering() -> None:
    with pytest.raises(sdk.InvalidJobError) as refused:
        sdk.render(broker_job(MAX_BROKERS + 1))
    assert [e.path for e in refused.value.errors] == [f"spec.mpiReplicaSpecs[{c.WORKER}].replicas"]


def test_its_rules_of_the_job_come_with_the_apis() -> None:
    job = broker_job()
    job["metadata"]["name"] = "Pi"
    launcher = job["spec"]["mpiReplicaSpecs"][c.LAUNCHER]["template"]["spec"]
    launcher["volumes"] = [{"name": "mine", "emptyDir": {}}]
    launcher["containers"][0]["volumeMounts"] = [{"name": "mine", "mountPath": c.CONFIG_MOUNT_PATH}]
    launcher["serviceAccountName"] = "other-launcher"
    errors = {error.path: error.message for error in sdk.validate(job)}
    assert errors["metadata.name"].startswith("a broker's host name: ")
    mounts = f"spec.mpiReplicaSpecs[{c.LAUNCHER}].template.spec.containers[0].volumeMounts[0]"
    assert "is reserved" in errors[f"{mounts}.mountPath"]
    account = f"spec.mpiReplicaSpecs[{c.LAUNCHER}].template.spec.serviceAccountName"
    assert "is reserved" in errors[account]


def test_a_sync_creates_what_render_lists_and_nothing_to_revoke() -> None:
    view = cluster_view()
    job = broker_job()
    job["metadata"]["name"] = "test"
    assert writes(plan_sync(job, view, context()))[:4] == [
        "create configmaps test-config",
        "create pods test-worker-0",
        "create pods test-worker-1",
        "create jobs test-launcher",
    ]
    job = converge(job, view, context())
    job["spec"]["runPolicy"] = {"suspend": True}
    suspended = writes(plan_sync(job, view, context()))
    assert [w for w in suspended if w.startswith("delete")] == [
        "delete pods test-worker-0",
        "delete pods test-worker-1",
    ]
