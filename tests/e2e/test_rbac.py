"""The shipped roles, bound to the shipped ServiceAccount, on a real API server: they allow what
the operator does (including the resume path's jobs/status write, which upstream's role lacks)
and refuse everything else; a gang scheduler's rules only with that scheduler, and the Lease in
the operator's lock namespace only."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from mpi_operator.api.constants import MPIJOB_RESOURCE as MPIJOBS
from mpi_operator.operator.options import Options
from mpi_operator.testing.launch import LOOPBACK, operator_command
from tests.tools import gang_scheduling_values

from .clusters import SIM, E2ECluster, sim_pod_spec, wait_until
from .rbac import allowed, bound_service_account, granted_permissions, load_manifest, typed

COSCHEDULING = "scheduler-plugins-scheduler"
# --gang-scheduling values whose roles are checked: off, and one of each strategy's.
GANG_SCHEDULERS = gang_scheduling_values()
LEASES = ("coordination.k8s.io", "leases")

pytestmark = pytest.mark.e2e

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
# Resources the operator never touches; any verb on them must be refused.
NOT_GRANTED = (
    ("", "namespaces"),
    ("", "serviceaccounts/token"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("events.k8s.io", "events"),
)


@pytest.fixture
def gang_scheduling() -> str:
    """The operator's --gang-scheduling whose rules are bound; a test parametrizes it."""
    return ""


@pytest.fixture
def lock_namespace(
    request: pytest.FixtureRequest,
    cluster: E2ECluster,
    namespace: str,
    namespace_factory: Callable[[E2ECluster], str],
) -> str:
    """Where the operator's Lease lives: its own namespace, as the Deployment puts it, or,
    parametrized indirectly with "elsewhere", a namespace of its own (the chart's
    operator.lockNamespace)."""
    if getattr(request, "param", "own") == "elsewhere":
        return namespace_factory(cluster)
    return namespace


@pytest.fixture
def operator_kubeconfig(
    cluster: E2ECluster, namespace: str, tmp_path: Path, gang_scheduling: str, lock_namespace: str
) -> Iterator[Path]:
    """A kubeconfig for the operator's ServiceAccount, bound to the shipped roles."""
    with bound_service_account(
        cluster.kubeconfig,
        cluster.api,
        namespace,
        tmp_path,
        gang_scheduling=gang_scheduling,
        lock_namespace=lock_namespace,
    ) as path:
        yield path


@pytest.fixture
def operator_api(operator_kubeconfig: Path) -> Iterator[k8s.ApiClient]:
    """An API client authenticated as the operator's ServiceAccount in ``namespace``."""
    api: k8s.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(operator_kubeconfig)
    )
    try:
        yield api
    finally:
        api.close()  # type: ignore[no-untyped-call]


def as_dict(api: k8s.ApiClient, model: object) -> dict[str, Any]:
    """A typed object as the camelCase dict the API server speaks."""
    found: dict[str, Any] = api.sanitize_for_serialization(model)  # type: ignore[no-untyped-call]
    return found


def forbidden(call: Any, *args: Any, **kwargs: Any) -> None:
    with pytest.raises(ApiException) as refused:
        call(*args, **kwargs)
    assert refused.value.status == 403, refused.value


def mpijob(name: str) -> dict[str, Any]:
    def role(container: str) -> dict[str, Any]:
        return {
            "replicas": 1,
            "template": {"spec": {"containers": [{"name": container, "image": "busybox:1.36"}]}},
        }

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {"mpiReplicaSpecs": {"Launcher": role("launcher"), "Worker": role("worker")}},
    }


def test_authenticates_as_the_service_account(operator_api: k8s.ApiClient, namespace: str) -> None:
    review = k8s.AuthenticationV1Api(operator_api).create_self_subject_review(
        k8s.V1SelfSubjectReview()
    )
    account = load_manifest("service-account.yaml")["metadata"]["name"]
    assert review.status is not None and review.status.user_info is not None
    assert review.status.user_info.username == f"system:serviceaccount:{namespace}:{account}"


def test_lists_mpijobs_everywhere_and_manages_pods(
    cluster: E2ECluster, operator_api: k8s.ApiClient, namespace: str
) -> None:
    cluster.create_custom(*MPIJOBS[:2], namespace, MPIJOBS[2], mpijob("probe"))
    listed: dict[str, Any] = k8s.CustomObjectsApi(  # type: ignore[assignment]
        operator_api
    ).list_cluster_custom_object(*MPIJOBS)
    names = {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed["items"]}
    assert (namespace, "probe") in names

    core = k8s.CoreV1Api(operator_api)
    annotations, spec = sim_pod_spec(hold=True)
    manifest = {"metadata": {"name": "worker", "annotations": annotations}, "spec": spec}
    core.create_namespaced_pod(namespace, typed(k8s.V1Pod, manifest))
    pod = as_dict(operator_api, core.read_namespaced_pod("worker", namespace))
    assert pod["metadata"]["name"] == "worker"
    core.delete_namespaced_pod("worker", namespace, grace_period_seconds=0)


@pytest.mark.parametrize("gang_scheduling", ["", COSCHEDULING])
def test_nodes_are_listed_and_nothing_else(
    cluster: E2ECluster, operator_api: k8s.ApiClient, gang_scheduling: str
) -> None:
    # Listed in every setting: the hostfile's network-topology order reads the nodes' labels
    # (the coscheduling nudge reads their capacity); no other verb on a node.
    nodes = cluster.to_dict(cluster.core.list_node())["items"]
    node = nodes[0]["metadata"]["name"]
    core = k8s.CoreV1Api(operator_api)
    assert node in {n.metadata.name for n in core.list_node().items}
    forbidden(core.read_node, node)
    forbidden(core.patch_node, node, {"spec": {"unschedulable": True}})
    forbidden(core.delete_node, node)
    assert "deletionTimestamp" not in cluster.to_dict(cluster.core.read_node(node))["metadata"]


def test_resume_path_clears_the_launcher_start_time(
    cluster: E2ECluster, operator_api: k8s.ApiClient, namespace: str
) -> None:
    """Suspend a started Job, clear its status.startTime (jobs/status), then change its pod
    template and resume it: what the operator does to the launcher Job on resume."""
    batch = k8s.BatchV1Api(operator_api)

    def read() -> dict[str, Any]:
        return as_dict(operator_api, batch.read_namespaced_job("launcher", namespace))

    def start_time() -> str | None:
        status: dict[str, str] = read().get("status", {})
        return status.get("startTime")

    annotations, spec = sim_pod_spec(hold=True)
    manifest = {
        "metadata": {"name": "launcher"},
        "spec": {
            "backoffLimit": 0,
            "template": {"metadata": {"annotations": annotations}, "spec": spec},
        },
    }
    batch.create_namespaced_job(namespace, typed(k8s.V1Job, manifest))
    wait_until(start_time, 30, message="the Job to start")

    suspended = read()
    suspended["spec"]["suspend"] = True
    batch.replace_namespaced_job("launcher", namespace, typed(k8s.V1Job, suspended))

    def clear_start_time() -> bool:
        current = read()
        del current["status"]["startTime"]
        try:
            batch.replace_namespaced_job_status("launcher", namespace, typed(k8s.V1Job, current))
        except ApiException as error:
            # The Job controller writes the status too (Suspended condition): retry conflicts.
            if error.status == 409:
                return False
            pytest.fail(f"updating jobs/status: {error.status} {error.reason}: {error.body}")
        return True

    wait_until(clear_start_time, 30, message="status.startTime to be cleared")
    assert start_time() is None

    # The API server takes a new pod template only while the Job is suspended and unstarted.
    resumed = read()
    resumed["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/os": "linux"}
    resumed["spec"]["suspend"] = False
    batch.replace_namespaced_job("launcher", namespace, typed(k8s.V1Job, resumed))
    wait_until(start_time, 30, message="the resumed Job to start again")
    forbidden(batch.delete_namespaced_job, "launcher", namespace)


@pytest.mark.parametrize("gang_scheduling", GANG_SCHEDULERS)
def test_server_grants_exactly_the_shipped_roles(
    operator_api: k8s.ApiClient, namespace: str, gang_scheduling: str
) -> None:
    granted = granted_permissions(gang_scheduling)
    # Every resource any scheduler's rules name: those of other schedulers must be refused.
    every = set().union(*(granted_permissions(name) for name in GANG_SCHEDULERS))
    resources = {(group, resource) for group, resource, _ in every} | set(NOT_GRANTED)
    wrong = [
        f"{verb} {group or 'core'}/{resource}: {'allowed' if answer else 'refused'}"
        for group, resource in sorted(resources)
        for verb in VERBS
        if (answer := allowed(operator_api, group, resource, verb, namespace))
        != ((group, resource, verb) in granted)
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("gang_scheduling", GANG_SCHEDULERS)
def test_leases_only_in_the_lock_namespace(
    cluster: E2ECluster,
    operator_api: k8s.ApiClient,
    namespace: str,
    namespace_factory: Callable[[E2ECluster], str],
    gang_scheduling: str,
) -> None:
    """The Lease Role is bound in the lock namespace alone: no Lease of kube-system's (the
    control plane's leaders), of another namespace or of the whole cluster can be read or
    written with the operator's token, whatever the gang scheduler."""
    lock = namespace
    elsewhere = namespace_factory(cluster)
    may = {verb: allowed(operator_api, *LEASES, verb, lock) for verb in VERBS}
    assert {verb for verb, answer in may.items() if answer} == {"get", "create", "update"}
    for other in ("kube-system", "default", elsewhere, ""):
        granted = [verb for verb in VERBS if allowed(operator_api, *LEASES, verb, other)]
        assert not granted, f"{granted} on leases in {other or 'every namespace'}"
    # The same question asked by an admin on the ServiceAccount's behalf.
    account = load_manifest("service-account.yaml")["metadata"]["name"]
    for other, expected in (("kube-system", False), (elsewhere, False), (lock, True)):
        assert subject_may(cluster, namespace, account, "update", other) is expected, other
    # A real write: refused in kube-system, accepted in the lock namespace.
    coordination = k8s.CoordinationV1Api(operator_api)
    lease = {"metadata": {"name": "rbac-probe"}, "spec": {"holderIdentity": "rbac-probe"}}
    forbidden(coordination.create_namespaced_lease, "kube-system", typed(k8s.V1Lease, lease))
    forbidden(coordination.read_namespaced_lease, "kube-scheduler", "kube-system")
    coordination.create_namespaced_lease(lock, typed(k8s.V1Lease, lease))
    probe = coordination.read_namespaced_lease("rbac-probe", lock)
    assert probe.spec.holder_identity == "rbac-probe"


@pytest.mark.parametrize("lock_namespace", ["elsewhere"], indirect=True)
def test_the_lease_role_follows_a_lock_namespace_elsewhere(
    operator_api: k8s.ApiClient, namespace: str, lock_namespace: str
) -> None:
    """With --lock-namespace elsewhere (the chart's operator.lockNamespace), the Lease is
    granted there and not in the operator's own namespace."""
    for verb in ("get", "create", "update"):
        assert allowed(operator_api, *LEASES, verb, lock_namespace), verb
        assert not allowed(operator_api, *LEASES, verb, namespace), verb


def subject_may(cluster: E2ECluster, namespace: str, account: str, verb: str, where: str) -> bool:
    """A SubjectAccessReview for the ServiceAccount, asked with the admin's credentials."""
    review = k8s.V1SubjectAccessReview(
        spec=k8s.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{namespace}:{account}",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
            resource_attributes=k8s.V1ResourceAttributes(
                group=LEASES[0], resource=LEASES[1], verb=verb, namespace=where
            ),
        )
    )
    answer = k8s.AuthorizationV1Api(cluster.api).create_subject_access_review(review)
    return bool(answer.status and answer.status.allowed)


def test_operator_drives_a_job_under_the_role(
    cluster: E2ECluster,
    operator_kubeconfig: Path,
    operator_api: k8s.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    """The operator itself, authenticated as its ServiceAccount: create, suspend, resume
    (clearing the launcher's start time), scale down, succeed and clean up, with no request
    refused along the way."""
    cluster.require_simulation()
    log_path = tmp_path / "operator.log"
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBEFLOW_NAMESPACE")}
    with log_path.open("w") as log:
        options = Options(
            kubeconfig=str(operator_kubeconfig),
            # Scoped to the test's namespace: operators of other tests may share the cluster.
            namespace=namespace,
            lock_namespace=namespace,
            bind_address=LOOPBACK,
            health_port=0,
            # Only what a line says is searched for a refusal, not its time or source line.
            log_format="json",
        )
        operator = subprocess.Popen(
            operator_command(options),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        run_job_through_its_life(cluster, namespace, log_path)
    finally:
        operator.terminate()
        try:
            operator.wait(15)
        except subprocess.TimeoutExpired:
            operator.kill()
            operator.wait()
    said = [what_a_line_says(line) for line in log_path.read_text().splitlines()]
    refused = [text for text in said if re.search(r"\b403\b|forbidden", text, re.I)]
    assert not refused, "\n".join(refused)


def what_a_line_says(line: str) -> str:
    """A log line's message and error; a line that is not the operator's JSON, whole."""
    if not line.startswith("{"):
        return line
    logged = json.loads(line)
    return f"{logged.get('msg', '')} {logged.get('error', '')}"


def run_job_through_its_life(cluster: E2ECluster, namespace: str, log_path: Path) -> None:
    group, version, plural = MPIJOBS

    def job() -> dict[str, Any]:
        return cluster.get_custom(group, version, namespace, plural, "pi")

    def condition(kind: str) -> str | None:
        for found in job().get("status", {}).get("conditions") or []:
            if found["type"] == kind:
                return str(found["status"])
        return None

    def pods(role: str) -> list[dict[str, Any]]:
        selector = f"training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role={role}"
        return [
            p
            for p in cluster.list_pods(namespace, selector)
            if "deletionTimestamp" not in p["metadata"]
        ]

    def patch(body: dict[str, Any]) -> None:
        cluster.custom.patch_namespaced_custom_object(group, version, namespace, plural, "pi", body)

    def state() -> str:
        log = log_path.read_text().splitlines()[-20:]
        return f"MPIJob status {job().get('status')}\noperator log tail:\n" + "\n".join(log)

    launcher_annotations, launcher = sim_pod_spec(hold=True)
    worker_annotations, worker = sim_pod_spec()
    for spec in (launcher, worker):
        spec.pop("restartPolicy")  # the replica specs' restartPolicy decides

    def role(replicas: int, annotations: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "template": {"metadata": {"annotations": annotations}, "spec": spec},
        }

    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": role(1, launcher_annotations, launcher),
                "Worker": role(2, worker_annotations, worker),
            },
        },
    }
    cluster.create_custom(group, version, namespace, plural, body)
    wait_until(
        lambda: condition("Running") == "True" and len(pods("worker")) == 2, 60, message=state
    )

    patch({"spec": {"runPolicy": {"suspend": True}}})
    wait_until(lambda: condition("Suspended") == "True" and not pods("worker"), 60, message=state)

    patch({"spec": {"runPolicy": {"suspend": False}}})
    wait_until(
        lambda: (
            condition("Suspended") == "False"
            and not cluster.get_job(namespace, "pi-launcher")["spec"].get("suspend")
            and len(pods("worker")) == 2
            and len(pods("launcher")) == 1
        ),
        60,
        message=state,
    )

    patch({"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 1}}}})
    wait_until(lambda: len(pods("worker")) == 1, 60, message=state)

    launcher_pod = pods("launcher")[0]["metadata"]["name"]
    cluster.core.patch_namespaced_pod(
        launcher_pod, namespace, {"metadata": {"annotations": {f"{SIM}exit-code": "0"}}}
    )
    wait_until(lambda: condition("Succeeded") == "True" and not pods("worker"), 60, message=state)
