"""The local cluster is real: Jobs run through the Job controller, schedulers
refuse what does not fit, gangs bind all-or-nothing, and `down` leaves no
process behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

import hack.cluster as localcluster

from .clusters import (
    COSCHEDULING,
    KOORDINATOR,
    NATIVE,
    NATIVE_PODGROUP,
    REPO,
    VOLCANO,
    ClusterProvider,
    E2ECluster,
    cluster_prefix,
    run_cluster_tool,
    sim_pod_spec,
    wait_until,
)

pytestmark = pytest.mark.e2e

FLAVOURS = [pytest.param("default", id="default"), VOLCANO, COSCHEDULING, KOORDINATOR, NATIVE]

VOLCANO_PG = ("scheduling.volcano.sh", "v1beta1", "podgroups")
COSCHED_PG = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")


@pytest.fixture(params=FLAVOURS)
def flavoured(
    request: pytest.FixtureRequest,
    local_cluster: Callable[[str], E2ECluster],
    namespace_factory: Callable[[E2ECluster], str],
) -> tuple[E2ECluster, str]:
    """A fresh namespace on the cluster of each flavour, or of the flavours a test names."""
    c = local_cluster(request.param)
    return c, namespace_factory(c)


def job_body(
    name: str, annotations: dict[str, str], spec: dict[str, Any], backoff_limit: int = 0
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {"metadata": {"annotations": annotations}, "spec": spec},
        },
    }


def job_condition(c: E2ECluster, ns: str, name: str) -> tuple[str, str] | None:
    job = c.get_job(ns, name)
    for cond in job.get("status", {}).get("conditions") or []:
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return cond["type"], cond.get("reason", "")
    return None


def pods_of_job(c: E2ECluster, ns: str, name: str) -> list[dict[str, Any]]:
    return c.list_pods(ns, label_selector=f"job-name={name}")


def pod_condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond["type"] == kind:
            return dict(cond)
    return None


def exit_code(pod: dict[str, Any]) -> int:
    return int(pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"])


def describe_pods(c: E2ECluster, ns: str) -> str:
    lines = []
    for p in c.list_pods(ns):
        conds = [
            (x["type"], x["status"], x.get("reason")) for x in p["status"].get("conditions") or []
        ]
        node = p["spec"].get("nodeName")
        lines.append(f"{p['metadata']['name']}: {p['status'].get('phase')} node={node} {conds}")
    return "\n".join(lines) or "(no pods)"


def test_job_runs_to_complete(flavoured: tuple[E2ECluster, str]) -> None:
    c, ns = flavoured
    annotations, spec = sim_pod_spec(scheduler_name=c.scheduler_name)
    c.create_job(ns, job_body("ok", annotations, spec))

    result = wait_until(
        lambda: job_condition(c, ns, "ok"), 60, message=lambda: describe_pods(c, ns)
    )
    assert result[0] == "Complete"
    assert c.get_job(ns, "ok")["status"]["succeeded"] == 1
    (pod,) = pods_of_job(c, ns, "ok")
    assert pod["status"]["phase"] == "Succeeded"
    assert pod["spec"].get("nodeName"), "the pod completed without being bound to a node"
    assert exit_code(pod) == 0


def test_job_with_exit_code_fails_after_backoff_limit(flavoured: tuple[E2ECluster, str]) -> None:
    c, ns = flavoured
    annotations, spec = sim_pod_spec(exit_code=3, scheduler_name=c.scheduler_name)
    c.create_job(ns, job_body("bad", annotations, spec, backoff_limit=1))

    # The Job controller waits ~10s before replacing the first failed pod.
    result = wait_until(
        lambda: job_condition(c, ns, "bad"), 90, message=lambda: describe_pods(c, ns)
    )
    assert result == ("Failed", "BackoffLimitExceeded")
    assert c.get_job(ns, "bad")["status"]["failed"] == 2, "backoffLimit 1: one retry, two pods"
    pods = pods_of_job(c, ns, "bad")
    assert [exit_code(p) for p in pods] == [3, 3]
    assert all(p["status"]["phase"] == "Failed" for p in pods)


def test_job_on_failure_restarts_count_against_backoff_limit(
    cluster: E2ECluster, namespace: str
) -> None:
    annotations, spec = sim_pod_spec(exit_code=2, restart_policy="OnFailure")
    cluster.create_job(namespace, job_body("crashloop", annotations, spec, backoff_limit=2))
    result = wait_until(
        lambda: job_condition(cluster, namespace, "crashloop"),
        90,
        message=lambda: describe_pods(cluster, namespace),
    )
    assert result == ("Failed", "BackoffLimitExceeded")


def test_held_pod_keeps_running_until_annotated(cluster: E2ECluster, namespace: str) -> None:
    cluster.require_simulation()
    annotations, spec = sim_pod_spec(hold=True)
    cluster.create_job(namespace, job_body("held", annotations, spec))

    def running_pod() -> dict[str, Any] | None:
        pods = pods_of_job(cluster, namespace, "held")
        return pods[0] if pods and pods[0]["status"].get("phase") == "Running" else None

    pod = wait_until(running_pod, 30, message="the held pod to run")
    name = pod["metadata"]["name"]
    # Unheld Job pods finish after 1s; this one must still be running after 3s.
    with pytest.raises(pytest.fail.Exception):
        wait_until(lambda: job_condition(cluster, namespace, "held"), 3)
    assert cluster.get_pod(namespace, name)["status"]["phase"] == "Running"

    cluster.core.patch_namespaced_pod(
        name, namespace, {"metadata": {"annotations": {"sim.mpi-operator.dev/exit-code": "0"}}}
    )
    assert wait_until(lambda: job_condition(cluster, namespace, "held"), 30)[0] == "Complete"


@pytest.mark.parametrize("replacement", ["TerminatingOrFailed", "Failed"])
def test_a_namespace_deleted_while_a_held_job_pod_runs_goes_away(
    cluster: E2ECluster, namespace_factory: Callable[[E2ECluster], str], replacement: str
) -> None:
    cluster.require_simulation()
    namespace = namespace_factory(cluster)
    annotations, spec = sim_pod_spec(hold=True)
    body = job_body("held", annotations, spec)
    # With "Failed" (as the MPIJob launcher has) the Job controller keeps its tracking
    # finalizer on a deleted pod until the pod is terminal.
    body["spec"]["podReplacementPolicy"] = replacement
    cluster.create_job(namespace, body)

    def running() -> bool:
        pods = pods_of_job(cluster, namespace, "held")
        return bool(pods) and all(p["status"].get("phase") == "Running" for p in pods)

    wait_until(running, 30, message="the held pod to run")
    cluster.core.delete_namespace(namespace)

    def namespace_gone() -> bool:
        try:
            cluster.core.read_namespace(namespace)
        except ApiException as error:
            return error.status == 404
        return False

    wait_until(
        namespace_gone,
        60,
        message=lambda: f"namespace {namespace} gone\n{describe_pods(cluster, namespace)}",
    )


def test_run_for_keeps_a_pod_running_then_succeeds(cluster: E2ECluster, namespace: str) -> None:
    annotations, spec = sim_pod_spec(run_for="4s")
    cluster.create_pod(
        namespace, {"metadata": {"name": "timed", "annotations": annotations}, "spec": spec}
    )

    def phase() -> str:
        return str(cluster.get_pod(namespace, "timed")["status"].get("phase"))

    wait_until(lambda: phase() == "Running", 30, message="pod to run")
    started = time.monotonic()
    wait_until(lambda: phase() == "Succeeded", 30, message=lambda: f"pod to succeed ({phase()})")
    assert time.monotonic() - started >= 2.5, "run-for 4s finished far too early"


def test_pod_larger_than_any_node_stays_pending(flavoured: tuple[E2ECluster, str]) -> None:
    c, ns = flavoured
    annotations, spec = sim_pod_spec(cpu="1000", scheduler_name=c.scheduler_name)
    c.create_pod(ns, {"metadata": {"name": "huge", "annotations": annotations}, "spec": spec})

    def unschedulable() -> dict[str, Any] | None:
        cond = pod_condition(c.get_pod(ns, "huge"), "PodScheduled")
        return cond if cond and cond["status"] == "False" else None

    cond = wait_until(unschedulable, 60, message=lambda: describe_pods(c, ns))
    assert cond["reason"] == "Unschedulable"
    pod = c.get_pod(ns, "huge")
    assert pod["status"]["phase"] == "Pending"
    assert not pod["spec"].get("nodeName")
    reasons = [e.get("reason") for e in c.events_for(ns, "huge")]
    assert "FailedScheduling" in reasons, reasons


def gang_pods(
    c: E2ECluster, ns: str, group: str, node_label: dict[str, str], cpu: str
) -> list[str]:
    names = []
    for i in range(3):
        annotations, spec = sim_pod_spec(cpu=cpu, scheduler_name=c.scheduler_name)
        spec["nodeSelector"] = node_label
        labels: dict[str, str] = {}
        if c.flavour == "volcano":
            annotations["scheduling.k8s.io/group-name"] = group
        else:
            labels["scheduling.x-k8s.io/pod-group"] = group
        name = f"{group}-{i}"
        meta = {"name": name, "annotations": annotations, "labels": labels}
        c.create_pod(ns, {"metadata": meta, "spec": spec})
        names.append(name)
    return names


def bound(c: E2ECluster, ns: str, names: list[str]) -> list[str]:
    return [n for n in names if c.get_pod(ns, n)["spec"].get("nodeName")]


def all_running(c: E2ECluster, ns: str, names: list[str]) -> bool:
    pods = [c.get_pod(ns, n) for n in names]
    return all(p["spec"].get("nodeName") and p["status"].get("phase") == "Running" for p in pods)


def pod_unschedulable(c: E2ECluster, ns: str, name: str) -> bool:
    cond = pod_condition(c.get_pod(ns, name), "PodScheduled")
    return cond is not None and cond["status"] == "False"


def create_pod_group(
    c: E2ECluster, ns: str, pod_group: tuple[str, str, str], name: str, spec: dict[str, Any]
) -> None:
    api_group, version, plural = pod_group
    body = {
        "apiVersion": f"{api_group}/{version}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }
    c.create_custom(api_group, version, ns, plural, body)


def gang_scenario(
    c: E2ECluster,
    ns: str,
    node_factory: Callable[..., str],
    pod_group: tuple[str, str, str],
    pod_group_spec: dict[str, Any],
    rejected: Callable[[str, list[str]], bool],
    after_capacity: Callable[[str], None] | None = None,
) -> None:
    """3 pods of 3 cpu in a gang of 3 on two 4-cpu nodes: none may bind; a third
    node lets all of them bind. The nodes carry a per-test label so that pods
    of other tests never compete for them."""
    tag = uuid.uuid4().hex[:8]
    label = {"e2e-gang": tag}
    for i in range(2):
        node_factory(c, f"gang-{tag}-{i}", cpu="4", memory="8Gi", labels=label)
    group = f"gang-{tag}"
    create_pod_group(c, ns, pod_group, group, pod_group_spec)
    names = gang_pods(c, ns, group, label, cpu="3")

    # Wait until the scheduler has looked at the gang and turned it down, then
    # check that it did not bind part of it.
    wait_until(lambda: rejected(group, names), 60, message=lambda: describe_pods(c, ns))
    assert bound(c, ns, names) == []
    assert all(c.get_pod(ns, n)["status"]["phase"] == "Pending" for n in names)

    node_factory(c, f"gang-{tag}-2", cpu="4", memory="8Gi", labels=label)
    # Repeated every 5 s: one touch can be lost to the coscheduling plugin's own PodGroup
    # cache, which may not hold the update yet when the scheduler retries the gang.
    last_touch = -5.0

    def running() -> bool:
        nonlocal last_touch
        if all_running(c, ns, names):
            return True
        if after_capacity and time.monotonic() - last_touch >= 5:
            after_capacity(group)
            last_touch = time.monotonic()
        return False

    wait_until(running, 90, message=lambda: describe_pods(c, ns))
    nodes = {c.get_pod(ns, n)["spec"]["nodeName"] for n in names}
    assert len(nodes) == 3, f"3-cpu pods on 4-cpu nodes must spread: {nodes}"


@pytest.mark.parametrize("flavoured", [VOLCANO], indirect=True)
def test_volcano_gang_is_all_or_nothing(
    flavoured: tuple[E2ECluster, str], node_factory: Callable[..., str]
) -> None:
    c, ns = flavoured

    def rejected(group: str, names: list[str]) -> bool:
        pg = c.get_custom(*VOLCANO_PG[:2], ns, VOLCANO_PG[2], group)
        conds = pg.get("status", {}).get("conditions") or []
        return any(x.get("type") == "Unschedulable" and x.get("status") == "True" for x in conds)

    spec = {"minMember": 3, "queue": "default"}
    gang_scenario(c, ns, node_factory, VOLCANO_PG, spec, rejected)


@pytest.mark.parametrize("flavoured", [COSCHEDULING], indirect=True)
def test_coscheduling_gang_is_all_or_nothing(
    flavoured: tuple[E2ECluster, str], node_factory: Callable[..., str]
) -> None:
    c, ns = flavoured

    def rejected(group: str, names: list[str]) -> bool:
        return all(pod_unschedulable(c, ns, n) for n in names)

    def touch_group(group: str) -> None:
        # Coscheduling requeues a rejected gang only on a Pod add or a PodGroup
        # add/update, not on a Node add (upstream behaviour; otherwise the
        # scheduler's periodic flush retries it after up to 5 minutes).
        c.custom.patch_namespaced_custom_object(
            *COSCHED_PG[:2],
            ns,
            COSCHED_PG[2],
            group,
            {"metadata": {"annotations": {"e2e.mpi-operator.dev/retry": str(time.time())}}},
        )

    spec = {"minMember": 3, "scheduleTimeoutSeconds": 10}
    gang_scenario(c, ns, node_factory, COSCHED_PG, spec, rejected, touch_group)


@pytest.mark.parametrize("flavoured", [NATIVE], indirect=True)
def test_native_gang_binds_no_pod_until_min_count_pods_join(
    flavoured: tuple[E2ECluster, str],
) -> None:
    """kube-scheduler alone, through the gates and API version of the 1.37 profile: a
    scheduling.k8s.io/v1beta1 PodGroup of minCount 3 holds two joined pods back although
    the nodes have room for them, and the third lets all three bind."""
    c, ns = flavoured
    group = f"gang-{uuid.uuid4().hex[:8]}"
    create_pod_group(c, ns, NATIVE_PODGROUP, group, {"schedulingPolicy": {"gang": {"minCount": 3}}})

    def join(name: str) -> str:
        annotations, spec = sim_pod_spec(cpu="100m", scheduler_name=c.scheduler_name)
        spec["schedulingGroup"] = {"podGroupName": group}
        c.create_pod(ns, {"metadata": {"name": name, "annotations": annotations}, "spec": spec})
        stored = c.get_pod(ns, name)["spec"].get("schedulingGroup")
        assert stored == {"podGroupName": group}, "the API server dropped spec.schedulingGroup"
        return name

    names = [join(f"{group}-{i}") for i in range(2)]
    # The gang plugin holds an incomplete gang's pods before the queue, where they get no
    # condition and no event. A pod outside the gang, created after them and of the same
    # priority, is queued behind them: once it is bound, the scheduler had the two and kept
    # them back.
    annotations, spec = sim_pod_spec(cpu="100m", scheduler_name=c.scheduler_name)
    c.create_pod(ns, {"metadata": {"name": "after", "annotations": annotations}, "spec": spec})
    wait_until(lambda: bound(c, ns, ["after"]), 60, message=lambda: describe_pods(c, ns))
    assert bound(c, ns, names) == []

    names.append(join(f"{group}-2"))
    wait_until(lambda: all_running(c, ns, names), 60, message=lambda: describe_pods(c, ns))


def test_down_leaves_no_process_behind(cluster_provider: ClusterProvider) -> None:
    if cluster_provider.provider != "local":
        pytest.skip(f"the {cluster_provider.provider} provider does not start local processes")
    name = f"e2e-down-{uuid.uuid4().hex[:6]}"
    # Volcano: the flavour with the most processes of our own beside kwokctl's.
    up = run_cluster_tool("up", "--scheduler=volcano", f"--name={name}", timeout=600)
    info = localcluster.ClusterInfo.load(name)
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        assert up.stdout.strip().splitlines()[-1] == f"export KUBECONFIG={info.kubeconfig}"
        procs = list(info.processes)
        names = {p.name for p in procs}
        assert {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} <= names
        assert {"kwok-controller", "vc-scheduler", "vc-controller-manager"} <= names
        assert all(p.alive() for p in procs)
    finally:
        down = run_cluster_tool("down", "--name", name, timeout=120)
    assert down.returncode == 0, down.stderr
    still = [p for p in procs if localcluster.proc_start_time(p.pid) == p.start_time]
    assert still == [], f"processes left behind: {still}"
    assert not localcluster.cluster_dir(name).exists()


def test_a_second_session_with_the_same_cluster_names_stops_before_touching_them(
    cluster_provider: ClusterProvider, cluster: E2ECluster
) -> None:
    if cluster_provider.provider != "local":
        pytest.skip("only local clusters are named by the session")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["E2E_CLUSTER_PREFIX"] = cluster_prefix()
    second = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            f"{__file__}::test_held_pod_keeps_running_until_annotated",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert second.returncode == pytest.ExitCode.USAGE_ERROR, second.stdout[-3000:]
    holder = f"belong to another test session (pid {os.getpid()}, started "
    assert f"the clusters named {cluster_prefix()}-* {holder}" in second.stdout + second.stderr
    # Its cluster answers still: the second session stopped before starting or stopping any.
    assert cluster.core.read_namespace("default").metadata.name == "default"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_every_component_listens_on_loopback_only(
    flavour: str, local_cluster: Callable[[str], E2ECluster]
) -> None:
    c = local_cluster(flavour)
    if c.provider != "local":
        pytest.skip("only the local provider records its processes")
    procs = localcluster.ClusterInfo.load(c.name).processes
    assert procs and all(p.alive() for p in procs)
    listening = {p.name: localcluster.listening_addresses(p.pid) for p in procs}
    assert listening["kube-apiserver"], "the API server must be listening"
    exposed = {
        name: addrs
        for name, addrs in listening.items()
        if any(ip not in ("127.0.0.1", "::1") for ip, _ in addrs)
    }
    assert exposed == {}, f"listening beyond loopback: {exposed}"


def test_gpu_pods_land_only_on_gpu_nodes(
    cluster: E2ECluster, namespace: str, node_factory: Callable[..., str]
) -> None:
    gpu_node = node_factory(cluster, f"gpu-{uuid.uuid4().hex[:8]}", cpu="8", gpu=2)
    for name, gpus in (("one-gpu", 1), ("three-gpus", 3)):
        annotations, spec = sim_pod_spec(gpu=gpus)
        cluster.create_pod(
            namespace, {"metadata": {"name": name, "annotations": annotations}, "spec": spec}
        )

    def placed() -> bool:
        pod = cluster.get_pod(namespace, "one-gpu")
        return bool(pod["status"].get("phase") == "Running")

    wait_until(placed, 30, message=lambda: describe_pods(cluster, namespace))
    assert cluster.get_pod(namespace, "one-gpu")["spec"]["nodeName"] == gpu_node
    wait_until(
        lambda: pod_unschedulable(cluster, namespace, "three-gpus"),
        30,
        message=lambda: describe_pods(cluster, namespace),
    )
    cond = pod_condition(cluster.get_pod(namespace, "three-gpus"), "PodScheduled")
    assert cond is not None and "nvidia.com/gpu" in cond.get("message", ""), cond
