"""The kubectl-delivery image on real nodes, used as a kubeflow.org/v1 launcher uses it: an init
container of the image, given no command, copies kubectl into an emptyDir at /opt/kube, and the
pod's main container runs it from there, in a namespace that enforces the restricted Pod
Security Standard. The image is the one the nodes imported: nothing is pulled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from hack.cluster import kubectl_delivery_image
from hack.cluster.images import images_tool

from .clusters import E2ECluster, wait_until
from .realpods import phase, pod_log, wait_finished

pytestmark = [pytest.mark.e2e, pytest.mark.realnodes]

IMAGE = kubectl_delivery_image()
VERSION = IMAGE.rsplit(":", 1)[1]
# The user the image runs as when the pod names none.
IMAGE_UID = images_tool().Spec.load().kubectl_delivery.uid
# The launcher's image: one of the MPI bases the nodes import (bash, mpiuser 1000).
MAIN_IMAGE = "docker.io/mpioperator/openmpi:latest"
TARGET_DIR = "/opt/kube"
KUBECTL = f"{TARGET_DIR}/kubectl"
MPIUSER = 1000
RBAC_GROUP = "rbac.authorization.k8s.io"
RESTRICTED: dict[str, Any] = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def plain_pod(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    """A pod whose one container runs ``command`` in the launcher's image as mpiuser."""
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": MAIN_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": command,
                    "securityContext": {**RESTRICTED, "runAsUser": MPIUSER},
                }
            ],
            **spec,
        },
    }


def pod_with_kubectl(
    name: str, script: str, delivery_uid: int | None = None, **spec: Any
) -> dict[str, Any]:
    """A plain pod running bash ``script``, after an init container that delivers kubectl to
    /opt/kube (as its image's user, or as ``delivery_uid``)."""
    manifest = plain_pod(name, ["bash", "-c", script], **spec)
    mount = [{"name": "kube", "mountPath": TARGET_DIR}]
    delivery_context = {**RESTRICTED, "readOnlyRootFilesystem": True}
    if delivery_uid is not None:
        delivery_context["runAsUser"] = delivery_uid
    manifest["spec"]["initContainers"] = [
        {
            # As training-operator writes it: no command, no arguments.
            "name": "kubectl-delivery",
            "image": IMAGE,
            "imagePullPolicy": "IfNotPresent",
            "env": [{"name": "TARGET_DIR", "value": TARGET_DIR}],
            "volumeMounts": mount,
            "securityContext": delivery_context,
        }
    ]
    manifest["spec"]["containers"][0]["volumeMounts"] = mount
    manifest["spec"]["volumes"] = [{"name": "kube", "emptyDir": {}}]
    return manifest


def finished_log(cluster: E2ECluster, ns: str, pod: str) -> str:
    """The main container's log, once the pod Succeeded."""
    finished = wait_finished(cluster, ns, pod, timeout=180)
    log = pod_log(cluster, ns, pod)
    assert finished == "Succeeded", f"{cluster.get_pod(ns, pod)['status']}\n{log}"
    return log


@pytest.fixture
def ns(real_cluster: E2ECluster, namespace_factory: Callable[..., str]) -> str:
    return namespace_factory(real_cluster, restricted=True)


@pytest.mark.parametrize(
    "delivery_uid",
    [
        pytest.param(None, id="image-user"),
        pytest.param(MPIUSER, id="launcher-uid"),
        pytest.param(4242, id="other-uid"),
    ],
)
def test_init_container_delivers_kubectl_that_the_main_container_runs(
    real_cluster: E2ECluster, ns: str, delivery_uid: int | None
) -> None:
    script = f"{KUBECTL} version --client && stat -c 'mode %a uid %u' {KUBECTL}"
    real_cluster.create_pod(ns, pod_with_kubectl("kubectl", script, delivery_uid))

    log = finished_log(real_cluster, ns, "kubectl")
    assert f"Client Version: {VERSION}\n" in log, log
    uid = IMAGE_UID if delivery_uid is None else delivery_uid
    assert f"mode 755 uid {uid}\n" in log, log
    delivery_log = real_cluster.core.read_namespaced_pod_log(
        "kubectl", ns, container="kubectl-delivery"
    )
    assert delivery_log == f"deliver-kubectl: copied /bin/kubectl to {KUBECTL}\n"


def test_delivered_kubectl_execs_into_another_pod_with_its_service_account(
    real_cluster: E2ECluster, ns: str
) -> None:
    """What a kubeflow.org/v1 launcher does with it: the pod's ServiceAccount token and the
    `kubernetes` Service (in-cluster configuration, no kubeconfig) reach the API server, which
    runs a command in a worker pod."""
    rbac = k8s.RbacAuthorizationV1Api(real_cluster.api)
    real_cluster.core.create_namespaced_service_account(ns, {"metadata": {"name": "launcher"}})
    # What training-operator's launcher Role grants.
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
    ]
    rbac.create_namespaced_role(ns, {"metadata": {"name": "launcher"}, "rules": rules})
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "launcher"},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "launcher"},
            "subjects": [{"kind": "ServiceAccount", "name": "launcher", "namespace": ns}],
        },
    )
    real_cluster.create_pod(ns, plain_pod("worker", ["sleep", "600"]))
    wait_until(lambda: phase(real_cluster, ns, "worker") == "Running", 180, message="worker")

    script = f"{KUBECTL} get pod worker -o name && {KUBECTL} exec worker -- hostname"
    launcher = pod_with_kubectl("launcher", script, serviceAccountName="launcher")
    real_cluster.create_pod(ns, launcher)

    assert finished_log(real_cluster, ns, "launcher").splitlines() == ["pod/worker", "worker"]
