"""kubeflow.org/v1 and v2beta1 served from the same stored MPIJobs, on a real API server: no
field lost through either version, and a v1 job's launcher allowed to exec into its own
workers only, only while the job runs."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from kubernetes import client as k8s

from .clusters import E2ECluster, wait_until
from .installs import kubectl
from .operator import (
    GROUP,
    PLURAL,
    SIM,
    OperatorProcess,
    finish_launcher,
    sim_job,
    wait_for_condition,
)

# Every test takes the operator: starting it installs the CRD from crds/.
pytestmark = pytest.mark.e2e

V1 = "v1"
V2BETA1 = "v2beta1"
# Keeps a simulated launcher pod running until finish_launcher ends it.
HOLD = SIM + "hold"


def create(cluster: E2ECluster, version: str, namespace: str, job: dict[str, Any]) -> None:
    job["apiVersion"] = f"{GROUP}/{version}"
    job["metadata"]["namespace"] = namespace
    cluster.custom.create_namespaced_custom_object(GROUP, version, namespace, PLURAL, job)


def read(cluster: E2ECluster, version: str, namespace: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
        GROUP, version, namespace, PLURAL, name
    )
    return obj


def v1_job(name: str) -> dict[str, Any]:
    """A v1 job as Flyte writes them, with v1's own fields and restart policies."""
    job = sim_job(name).obj()
    job["spec"]["mainContainer"] = "worker"
    job["spec"]["cleanPodPolicy"] = "All"
    for role, policy in (("Launcher", "Never"), ("Worker", "ExitCode")):
        job["spec"]["mpiReplicaSpecs"][role]["restartPolicy"] = policy
    return job


def v2beta1_job(name: str) -> dict[str, Any]:
    """A v2beta1 job using every field v1 lacks (managed elsewhere, so nothing runs)."""
    return (
        sim_job(name)
        .implementation("Intel")
        .ssh_auth_mount_path("/home/mpiuser/.ssh")
        .launcher_creation_policy("WaitForWorkersReady")
        .run_launcher_as_worker()
        .run_policy(managedBy="kueue.x-k8s.io/multikueue")
        .obj()
    )


def test_both_versions_serve_the_same_jobs_each_with_its_creators_transport(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    create(cluster, V1, namespace, v1_job("from-v1"))
    create(cluster, V2BETA1, namespace, v2beta1_job("from-v2beta1"))
    for version in (V1, V2BETA1):
        listed = cluster.custom.list_namespaced_custom_object(GROUP, version, namespace, PLURAL)
        transports = {j["metadata"]["name"]: j["spec"]["transport"] for j in listed["items"]}
        assert transports == {"from-v1": "KubectlExec", "from-v2beta1": "SSH"}, version
    # Plain kubectl goes through the preferred version, v1, and shows both.
    names = kubectl(cluster, "get", "mpijobs", "-n", namespace, "-o", "name").split()
    assert sorted(names) == [
        f"mpijob.{GROUP}/from-v1",
        f"mpijob.{GROUP}/from-v2beta1",
    ]
    shown = kubectl(cluster, "get", f"mpijobs.{V2BETA1}.{GROUP}", "-n", namespace)
    assert "from-v1" in shown and "from-v2beta1" in shown


def test_a_v2beta1_job_survives_kubectl_label_annotate_and_patch_through_v1(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    create(cluster, V2BETA1, namespace, v2beta1_job("pi"))
    before = read(cluster, V2BETA1, namespace, "pi")["spec"]
    kubectl(cluster, "label", "mpijob", "pi", "team=ml", "-n", namespace)
    kubectl(cluster, "annotate", "mpijob", "pi", "note=kept", "-n", namespace)
    kubectl(
        cluster,
        "patch",
        "mpijob",
        "pi",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"runPolicy":{"backoffLimit":3}}}',
    )
    after = read(cluster, V2BETA1, namespace, "pi")
    expected = copy.deepcopy(before)
    expected["runPolicy"]["backoffLimit"] = 3
    assert after["spec"] == expected
    assert after["metadata"]["labels"]["team"] == "ml"
    assert read(cluster, V1, namespace, "pi")["spec"] == expected


def test_a_v1_job_keeps_its_v1_fields_through_v2beta1(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    create(cluster, V1, namespace, v1_job("flyte"))
    before = read(cluster, V1, namespace, "flyte")["spec"]
    assert before["mainContainer"] == "worker" and before["cleanPodPolicy"] == "All"
    assert before["mpiReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"
    patch = {"metadata": {"labels": {"through": "v2beta1"}}}
    cluster.custom.patch_namespaced_custom_object(GROUP, V2BETA1, namespace, PLURAL, "flyte", patch)
    assert read(cluster, V1, namespace, "flyte")["spec"] == before


def test_a_v1_job_over_ssh_may_restart_as_v1_allows(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    """The restart policies follow the version the API server admits a job at, not its
    transport: the operator runs what v1 admitted."""
    job = v1_job("ssh-always")
    job["spec"]["transport"] = "SSH"
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] = "Always"
    create(cluster, V1, namespace, job)
    wait_for_condition(cluster, namespace, "ssh-always", "Created", operator=operator)
    launcher = wait_until(
        lambda: cluster.batch.list_namespaced_job(namespace).items, 30, message="launcher Job"
    )
    assert [j.metadata.name for j in launcher] == ["ssh-always-launcher"]
    assert launcher[0].spec.template.spec.restart_policy == "OnFailure"


def test_the_transport_cannot_change(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    create(cluster, V1, namespace, v1_job("fixed"))
    with pytest.raises(k8s.ApiException) as refused:
        cluster.custom.patch_namespaced_custom_object(
            GROUP, V1, namespace, PLURAL, "fixed", {"spec": {"transport": "SSH"}}
        )
    assert refused.value.status == 422
    assert "spec.transport: Invalid value" in str(refused.value.body)
    assert "transport is immutable" in str(refused.value.body)


# -- the launcher's exec access -------------------------------------------------------------


def exec_rights(cluster: E2ECluster, namespace: str, account: str, pod: str) -> tuple[bool, bool]:
    """Whether the API server lets ``account``'s pods exec into ``pod`` (``create`` on
    ``pods/exec``, what kubectl's exec needs) and read it (kubectl reads the pod first)."""
    user = f"system:serviceaccount:{namespace}:{account}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    allowed = []
    for verb, subresource in (("create", "exec"), ("get", "")):
        review = k8s.V1SubjectAccessReview(
            spec=k8s.V1SubjectAccessReviewSpec(
                user=user,
                groups=groups,
                resource_attributes=k8s.V1ResourceAttributes(
                    namespace=namespace,
                    verb=verb,
                    resource="pods",
                    subresource=subresource,
                    name=pod,
                ),
            )
        )
        answer = k8s.AuthorizationV1Api(cluster.api).create_subject_access_review(review)
        allowed.append(bool(answer.status.allowed))
    return allowed[0], allowed[1]


BOTH, NEITHER = (True, True), (False, False)


def await_rights(
    cluster: E2ECluster, namespace: str, account: str, pod: str, rights: tuple[bool, bool]
) -> None:
    """Wait for ``rights``: the API server's authorizer sees a new or deleted Role or binding
    through a cache of its own, a moment after the write (and the Role and binding go one
    after the other)."""
    wait_until(
        lambda: exec_rights(cluster, namespace, account, pod) == rights,
        30,
        message=lambda: (
            f"{account} on {pod}: {exec_rights(cluster, namespace, account, pod)}, want {rights}"
        ),
    )


def held_v1_job(name: str) -> dict[str, Any]:
    job = v1_job(name)
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    launcher.setdefault("metadata", {})["annotations"] = {HOLD: "true"}
    return job


def test_a_v1_launcher_may_exec_into_its_own_workers_only_while_the_job_runs(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    create(cluster, V1, namespace, held_v1_job("mine"))
    create(cluster, V1, namespace, held_v1_job("other"))
    bystander = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="bystander"),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="c", image="busybox")]),
    )
    cluster.core.create_namespaced_pod(namespace, bystander)
    running = wait_for_condition(cluster, namespace, "mine", "Running", operator=operator)
    wait_for_condition(cluster, namespace, "other", "Running", operator=operator)
    assert running["status"]["startTime"]

    launcher_pod = cluster.batch.read_namespaced_job("mine-launcher", namespace).spec.template
    assert launcher_pod.spec.service_account_name == "mine-launcher"
    await_rights(cluster, namespace, "mine-launcher", "mine-worker-0", BOTH)
    await_rights(cluster, namespace, "mine-launcher", "mine-worker-1", BOTH)
    assert exec_rights(cluster, namespace, "mine-launcher", "other-worker-0") == NEITHER
    assert exec_rights(cluster, namespace, "mine-launcher", "bystander") == NEITHER
    # The template's account, shared by everything else in the namespace, gains nothing.
    assert exec_rights(cluster, namespace, "default", "mine-worker-0") == NEITHER

    finish_launcher(cluster, namespace, "mine")
    wait_for_condition(cluster, namespace, "mine", "Succeeded", operator=operator)
    # The finished job's launcher loses its exec access; the other job's keeps its own.
    await_rights(cluster, namespace, "mine-launcher", "mine-worker-0", NEITHER)
    assert exec_rights(cluster, namespace, "other-launcher", "other-worker-0") == BOTH


def printed(output: str) -> dict[str, dict[str, str]]:
    """kubectl's table by row name and column, read by the header's column offsets (an empty
    cell leaves only spaces)."""
    header, *rows = output.splitlines()
    starts = [match.start() for match in re.finditer(r"\S+", header)]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    table = {}
    for row in rows:
        cells = {
            name: row[start:end].strip()
            for name, (start, end) in zip(header.split(), bounds, strict=True)
        }
        table[cells["NAME"]] = cells
    return table


def states(cluster: E2ECluster, namespace: str) -> dict[str, dict[str, str]]:
    """The State column of each job as ``kubectl get`` prints it through each version: v1,
    the preferred one, and v2beta1."""
    found = {}
    for version, resource in ((V1, "mpijobs"), (V2BETA1, f"mpijobs.{V2BETA1}.{GROUP}")):
        table = printed(kubectl(cluster, "get", resource, "-n", namespace))
        for row in table.values():
            assert list(row) == ["NAME", "STATE", "GANG", "WORKERS", "AGE"], version
        found[version] = {name: row["STATE"] for name, row in table.items()}
    return found


def test_kubectl_get_prints_each_jobs_state_through_both_versions(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    create(cluster, V1, namespace, held_v1_job("from-v1"))
    held = sim_job("from-v2beta1").template_annotation("Launcher", HOLD, "true")
    create(cluster, V2BETA1, namespace, held.obj())
    create(cluster, V2BETA1, namespace, sim_job("parked").suspend().obj())
    for name in ("from-v1", "from-v2beta1"):
        wait_for_condition(cluster, namespace, name, "Running", operator=operator)
    # Suspended=True comes before Running=False in upstream's order; the state goes last.
    wait_for_condition(cluster, namespace, "parked", "Suspended", operator=operator)
    running = {"from-v1": "Running", "from-v2beta1": "Running", "parked": "Suspended"}
    assert states(cluster, namespace) == {V1: running, V2BETA1: running}

    for name in ("from-v1", "from-v2beta1"):
        finish_launcher(cluster, namespace, name)
        wait_for_condition(cluster, namespace, name, "Succeeded", operator=operator)
    finished = {**running, "from-v1": "Succeeded", "from-v2beta1": "Succeeded"}
    assert states(cluster, namespace) == {V1: finished, V2BETA1: finished}
