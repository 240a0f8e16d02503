"""The CRD's admission rules on a real API server: it installs (CEL within the cost budget),
refuses bad jobs naming the field, and takes good ones."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

import hack.cluster as localcluster
from mpi_operator.api.models import MAX_WORKERS
from mpi_operator.testing.wrappers import MPIJobWrapper, container

from .clusters import E2ECluster
from .operator import create_mpijob
from .rbac import CRD_FILE, install_mpijob_crd

pytestmark = pytest.mark.e2e

LAUNCHER = "spec.mpiReplicaSpecs[Launcher]"
WORKER = "spec.mpiReplicaSpecs[Worker]"
CONTAINER = f"{WORKER}.template.spec.containers[0]"


@pytest.fixture(scope="module")
def crd_cluster(local_cluster: Callable[[str], E2ECluster]) -> E2ECluster:
    """The default cluster with the CRD as generated; installing it proves the API server
    accepts every rule, CEL cost estimates included."""
    cluster = local_cluster("default")
    install_mpijob_crd(cluster.api)
    return cluster


def refusal(cluster: E2ECluster, namespace: str, job: dict[str, Any]) -> str:
    with pytest.raises(ApiException) as refused:
        create_mpijob(cluster, namespace, job)
    assert refused.value.status == 422, refused.value.body
    message: str = json.loads(refused.value.body)["message"]
    return message


@pytest.mark.parametrize(
    ("job", "field", "words"),
    [
        pytest.param(
            MPIJobWrapper("pi-").workers(1),
            "metadata.name",
            "must be a DNS-1035 label",
            id="name ending in a dash",
        ),
        pytest.param(
            MPIJobWrapper("a" * 52).workers(10_000),
            "metadata.name",
            "too long: the last worker's pod name, <name>-worker-<replicas - 1>, must be no "
            "more than 63 characters",
            id="worker host names too long",
        ),
        pytest.param(
            MPIJobWrapper().workers(MAX_WORKERS + 1),
            f"{WORKER}.replicas",
            f"less than or equal to {MAX_WORKERS}",
            id="too many workers",
        ),
        pytest.param(
            MPIJobWrapper().workers(1).run_policy(backoffLimit=2**31),
            "spec.runPolicy.backoffLimit",
            "less than or equal to 2147483647",
            id="int32 overflow",
        ),
        pytest.param(
            MPIJobWrapper().workers(1).containers("Worker", {"image": "busybox"}),
            f"{CONTAINER}.name",
            "Required value",
            id="container without a name",
        ),
        pytest.param(
            MPIJobWrapper().workers(1).containers("Worker", {"name": "main"}),
            f"{CONTAINER}.image",
            "Required value",
            id="container without an image",
        ),
        pytest.param(
            MPIJobWrapper().workers(1).containers("Worker", container("Main")),
            f"{CONTAINER}.name",
            "should match",
            id="container name not a DNS label",
        ),
        pytest.param(
            MPIJobWrapper().workers(1).containers("Worker", container(memory="-1Gi")),
            f"{CONTAINER}.resources.requests[memory]",
            "should match",
            id="negative request",
        ),
        pytest.param(
            MPIJobWrapper().workers(1).scheduling_policy(minResources={"cpu": -1}),
            "spec.runPolicy.schedulingPolicy.minResources[cpu]",
            "greater than or equal to 0",
            id="negative minResources",
        ),
        pytest.param(
            MPIJobWrapper().workers(0),
            f"{WORKER}.replicas",
            "must be greater than or equal to 1",
            id="no workers",
        ),
    ],
)
def test_bad_jobs_are_refused_naming_the_field(
    crd_cluster: E2ECluster,
    namespace: str,
    job: MPIJobWrapper,
    field: str,
    words: str,
) -> None:
    message = refusal(crd_cluster, namespace, job.obj())
    # OpenAPI errors print map keys as `.Worker`, CEL rules with a fieldPath as `[Worker]`.
    assert f"{field}:" in message or f"{as_dotted_keys(field)}:" in message, message
    assert words in message


def as_dotted_keys(field: str) -> str:
    return re.sub(r"\[([A-Za-z][^\]]*)\]", r".\1", field)


def test_good_jobs_are_admitted(crd_cluster: E2ECluster, namespace: str) -> None:
    for job in (
        MPIJobWrapper("launcher-only"),
        MPIJobWrapper("a" * 53).workers(10),  # a...a-worker-9: exactly 63 characters
        MPIJobWrapper("big").workers(MAX_WORKERS),
        MPIJobWrapper("gang")
        .workers(2, cpu="1", memory="1Gi")
        .scheduling_policy(minAvailable=3, minResources={"cpu": "2", "memory": 0})
        .run_policy(activeDeadlineSeconds=2**40),  # an int64 field: no float64 maximum
    ):
        created = create_mpijob(crd_cluster, namespace, job.obj())
        assert created["metadata"]["uid"]


def kubectl(cluster: E2ECluster, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """The local cluster's pinned kubectl, with its defaults (strict field validation)."""
    binary = localcluster.bin_dir(build=False) / "kubectl"
    command = [str(binary), f"--kubeconfig={cluster.kubeconfig}", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)


def test_client_side_apply_of_the_crd_fits_its_annotation(crd_cluster: E2ECluster) -> None:
    # kubectl apply without --server-side keeps the whole CRD in one annotation, which the API
    # server limits to 256 KiB.
    done = kubectl(crd_cluster, "apply", "-f", "-", stdin=CRD_FILE.read_text())
    assert done.returncode == 0, done.stderr


TYPO = f"{LAUNCHER}.template.spec.containers[0].comand"


@pytest.mark.parametrize("server_side", [False, True], ids=["client-side", "server-side"])
@pytest.mark.parametrize("api", ["v2beta1", "v1"])
def test_kubectl_apply_refuses_a_typo_in_a_template_naming_it(
    crd_cluster: E2ECluster, namespace: str, api: str, server_side: bool
) -> None:
    job = MPIJobWrapper(f"typo-{api}-{'ss' if server_side else 'cs'}").workers(1)
    if api == "v1":
        job = job.v1()
    obj = job.obj()
    obj["metadata"] = {"name": obj["metadata"]["name"], "namespace": namespace}
    obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["comand"] = [
        "mpirun"
    ]
    mode = ["--server-side"] if server_side else []
    done = kubectl(crd_cluster, "apply", *mode, "-f", "-", stdin=yaml.safe_dump(obj))
    assert done.returncode != 0, done.stdout
    # Strict decoding says "unknown field"; server-side apply's typed patch, "field not
    # declared in schema". Both print map keys after a dot.
    assert "unknown field" in done.stderr or "not declared in schema" in done.stderr, done.stderr
    assert as_dotted_keys(TYPO) in done.stderr, done.stderr
    # Without the typo, the same job is applied.
    del obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["comand"]
    done = kubectl(crd_cluster, "apply", *mode, "-f", "-", stdin=yaml.safe_dump(obj))
    assert done.returncode == 0, done.stderr
