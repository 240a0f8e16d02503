"""Kueue admits MPIJobs on a real API server: its webhook creates them suspended, its
controller resumes them one at a time within the ClusterQueue's quota with the
ResourceFlavor's node labels and tolerations, and its preemption suspends a running job,
which the operator tears down and brings back once it is admitted again."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from mpi_operator.testing.wrappers import MPIJobWrapper

from .clusters import (
    COSCHEDULING,
    KUEUE_PODS_READY_TIMEOUT,
    NATIVE,
    VOLCANO,
    ClusterProvider,
    E2ECluster,
    wait_until,
)
from .operator import (
    GROUP,
    PLURAL,
    VERSION,
    OperatorProcess,
    condition,
    create_mpijob,
    event_reasons,
    finish_launcher,
    gang_min_count,
    get_mpijob,
    get_pod_group,
    operator_fixture,
    pods_of,
    sim_job,
    wait_for_condition,
)

pytestmark = pytest.mark.e2e

KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_NAMESPACE = "kueue-system"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
POOL_LABEL = "e2e.mpi-operator.dev/pool"
POOL_TAINT = "e2e.mpi-operator.dev/dedicated"
SIM_HOLD = "sim.mpi-operator.dev/hold"
# A job of 2 cpu: a 0.5-cpu launcher and two 0.75-cpu workers. The queue has room for one.
QUOTA_CPU = "3"


operator = operator_fixture("default", kueue=True)


def create_cluster_object(cluster: E2ECluster, plural: str, body: dict[str, Any]) -> None:
    body = {"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", **body}
    cluster.custom.create_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, body)


def delete_cluster_object(cluster: E2ECluster, plural: str, name: str) -> None:
    cluster.custom.delete_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, name)


def create_cluster_queue(
    c: E2ECluster, name: str, ns: str, flavour: str, quota: dict[str, str], **spec: Any
) -> None:
    """A ClusterQueue for namespace ``ns`` alone, of ``quota`` (resource -> nominal quota)
    in one flavour, with ``spec``'s further fields."""
    resources = [{"name": resource, "nominalQuota": value} for resource, value in quota.items()]
    create_cluster_object(
        c,
        "clusterqueues",
        {
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                **spec,
                "resourceGroups": [
                    {
                        "coveredResources": list(quota),
                        "flavors": [{"name": flavour, "resources": resources}],
                    }
                ],
            },
        },
    )


def create_local_queue(c: E2ECluster, ns: str, cluster_queue: str) -> None:
    """The LocalQueue ``lq`` in ``ns``, on ``cluster_queue``."""
    c.custom.create_namespaced_custom_object(
        KUEUE_GROUP,
        KUEUE_VERSION,
        ns,
        "localqueues",
        {
            "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
            "kind": "LocalQueue",
            "metadata": {"name": "lq"},
            "spec": {"clusterQueue": cluster_queue},
        },
    )


def make_queue(
    c: E2ECluster,
    ns: str,
    quota_cpu: str,
    pool: dict[str, str] | None = None,
    admission_check: str | None = None,
) -> Callable[[], None]:
    """A LocalQueue ``lq`` in ``ns`` on a ClusterQueue of ``quota_cpu`` for this namespace
    alone, whose flavour gives pods ``pool`` (node labels) and tolerates the pool's taint,
    and which admits only once ``admission_check`` passes. Returns what deletes the
    cluster-wide objects."""
    suffix = ns.rsplit("-", 1)[-1]
    flavour, cluster_queue = f"pool-{suffix}", f"cq-{suffix}"
    spec: dict[str, Any] = {}
    if pool:
        toleration = {"key": POOL_TAINT, "operator": "Equal", "effect": "NoSchedule"}
        spec = {"nodeLabels": pool, "tolerations": [{**toleration, "value": suffix}]}
    create_cluster_object(
        c,
        "resourceflavors",
        {"kind": "ResourceFlavor", "metadata": {"name": flavour}, "spec": spec},
    )
    checks = (
        {"admissionChecksStrategy": {"admissionChecks": [{"name": admission_check}]}}
        if admission_check
        else {}
    )
    create_cluster_queue(
        c,
        cluster_queue,
        ns,
        flavour,
        {"cpu": quota_cpu, "memory": "64Gi"},
        queueingStrategy="StrictFIFO",
        preemption={"withinClusterQueue": "LowerPriority"},
        **checks,
    )
    create_local_queue(c, ns, cluster_queue)

    def delete() -> None:
        for plural, name in (("clusterqueues", cluster_queue), ("resourceflavors", flavour)):
            delete_cluster_object(c, plural, name)

    return delete


@pytest.fixture
def queue(
    kueue_cluster: E2ECluster,
    namespace_factory: Callable[[E2ECluster], str],
    node_factory: Callable[..., str],
) -> Iterator[tuple[str, str]]:
    """(namespace, LocalQueue) with room for one 2-cpu job, on a flavour whose node is
    labelled and tainted, so only pods given the flavour's selector and toleration fit."""
    c = kueue_cluster
    ns = namespace_factory(c)
    suffix = ns.rsplit("-", 1)[-1]
    node = node_factory(c, f"kueue-node-{suffix}", labels={POOL_LABEL: suffix})
    c.core.patch_node(
        node, {"spec": {"taints": [{"key": POOL_TAINT, "value": suffix, "effect": "NoSchedule"}]}}
    )
    delete = make_queue(c, ns, QUOTA_CPU, pool={POOL_LABEL: suffix})
    yield ns, "lq"
    delete()


def queued_job(name: str, queue_name: str, priority_class: str | None = None) -> MPIJobWrapper:
    """A 2-cpu job for the queue (at ``priority_class``, a WorkloadPriorityClass), whose
    launcher keeps running until finished."""
    labels = {QUEUE_LABEL: queue_name}
    if priority_class:
        labels[PRIORITY_LABEL] = priority_class
    return (
        sim_job(name)
        .workers(2, cpu="750m", memory="1Gi")
        .launcher(cpu="500m", memory="1Gi")
        .metadata_field("labels", labels)
        .template_annotation("Launcher", SIM_HOLD, "true")
    )


def suspended(job: dict[str, Any]) -> bool:
    return bool(((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"))


def workload_of(cluster: E2ECluster, ns: str, job_name: str) -> dict[str, Any] | None:
    workloads = cluster.custom.list_namespaced_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, ns, "workloads"
    )["items"]
    for workload in workloads:
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o["kind"] == "MPIJob" and o["name"] == job_name for o in owners):
            return dict(workload)
    return None


def workload_condition_of(
    cluster: E2ECluster, ns: str, job_name: str, kind: str
) -> dict[str, Any] | None:
    return condition(workload_of(cluster, ns, job_name) or {}, kind)


def workload_condition(cluster: E2ECluster, ns: str, job_name: str, kind: str) -> str | None:
    cond = workload_condition_of(cluster, ns, job_name, kind)
    return None if cond is None else str(cond["status"])


def running_pods(cluster: E2ECluster, ns: str, job_name: str) -> list[Any]:
    return [p for p in pods_of(cluster, ns, job_name) if p.status.phase == "Running"]


def wait_running(cluster: E2ECluster, ns: str, job_name: str, operator: OperatorProcess) -> None:
    wait_for_condition(cluster, ns, job_name, "Running", timeout=120, operator=operator)
    wait_until(
        lambda: len(running_pods(cluster, ns, job_name)) == 3,
        90,
        message=f"three running pods of {job_name}",
    )


def test_jobs_are_admitted_one_at_a_time_within_quota_onto_the_flavours_nodes(
    kueue_cluster: E2ECluster, queue: tuple[str, str], operator: OperatorProcess
) -> None:
    c = kueue_cluster
    ns, lq = queue
    first = create_mpijob(c, ns, queued_job("first", lq).obj())
    second = create_mpijob(c, ns, queued_job("second", lq).obj())
    # Kueue's webhook suspends a queued job at creation, before the operator sees it.
    assert suspended(first) and suspended(second), (first["spec"], second["spec"])

    wait_running(c, ns, "first", operator)
    assert workload_condition(c, ns, "first", "Admitted") == "True"
    assert suspended(get_mpijob(c, ns, "second"))
    assert workload_condition(c, ns, "second", "QuotaReserved") != "True"
    assert pods_of(c, ns, "second") == []

    # The flavour's node labels and tolerations reached every pod, which landed on its node.
    labels = kueue_cluster.core.read_node(
        next(iter(p.spec.node_name for p in pods_of(c, ns, "first")))
    ).metadata.labels
    for pod in pods_of(c, ns, "first"):
        assert pod.spec.node_selector and POOL_LABEL in pod.spec.node_selector, pod.spec
        assert pod.spec.node_selector[POOL_LABEL] == labels[POOL_LABEL]
        assert any(t.key == POOL_TAINT for t in pod.spec.tolerations or []), pod.spec

    # Finishing the first frees its quota: the second is admitted and runs.
    finish_launcher(c, ns, "first")
    wait_for_condition(c, ns, "first", "Succeeded", operator=operator)
    # Kueue saw the job finish. (It then deletes the Workload rather than keep it Finished:
    # once quota is released, the job's templates, which still hold the flavour's
    # tolerations, no longer match it.)
    wait_until(
        lambda: "FinishedWorkload" in event_reasons(c, ns, "first"),
        60,
        message=lambda: f"Kueue's FinishedWorkload event: {event_reasons(c, ns, 'first')}",
    )
    wait_running(c, ns, "second", operator)
    finish_launcher(c, ns, "second")
    wait_for_condition(c, ns, "second", "Succeeded", operator=operator)


def test_a_job_written_through_kubeflow_org_v1_is_queued_and_admitted_the_same_way(
    kueue_cluster: E2ECluster, queue: tuple[str, str], operator: OperatorProcess
) -> None:
    """Kueue's webhook and controller know only v2beta1 MPIJobs; a v1 job (Flyte's) is the
    same stored object, so it is suspended at creation and resumed when admitted too."""
    c = kueue_cluster
    ns, lq = queue
    job = queued_job("flyte", lq).v1().obj()
    job["metadata"]["namespace"] = ns
    created = c.custom.create_namespaced_custom_object(GROUP, "v1", ns, PLURAL, job)
    assert suspended(created), created["spec"]
    wait_running(c, ns, "flyte", operator)
    assert workload_condition(c, ns, "flyte", "Admitted") == "True"
    assert get_mpijob(c, ns, "flyte")["spec"]["transport"] == "KubectlExec"
    finish_launcher(c, ns, "flyte")
    wait_for_condition(c, ns, "flyte", "Succeeded", operator=operator)


def test_a_higher_priority_job_preempts_a_running_one_which_comes_back_after_it(
    kueue_cluster: E2ECluster, queue: tuple[str, str], operator: OperatorProcess
) -> None:
    c = kueue_cluster
    ns, lq = queue
    suffix = ns.rsplit("-", 1)[-1]
    low_class, high_class = f"low-{suffix}", f"high-{suffix}"
    for name, value in ((low_class, 10), (high_class, 1000)):
        create_cluster_object(
            c,
            "workloadpriorityclasses",
            {"kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value},
        )
    try:
        create_mpijob(c, ns, queued_job("low", lq, priority_class=low_class).obj())
        wait_running(c, ns, "low", operator)

        create_mpijob(c, ns, queued_job("high", lq, priority_class=high_class).obj())

        # Kueue evicts the low job by suspending it; the operator removes its workers and
        # suspends its launcher, which frees the quota for the high one.
        wait_for_condition(c, ns, "low", "Suspended", timeout=120, operator=operator)
        assert workload_condition(c, ns, "low", "Preempted") == "True", workload_of(c, ns, "low")
        wait_until(
            lambda: not running_pods(c, ns, "low"),
            90,
            message="the preempted job's pods gone",
        )
        wait_running(c, ns, "high", operator)
        low_now = get_mpijob(c, ns, "low")
        assert suspended(low_now)
        running = condition(low_now, "Running")
        assert running is None or running["status"] == "False", low_now["status"]

        finish_launcher(c, ns, "high")
        wait_for_condition(c, ns, "high", "Succeeded", operator=operator)
        # Readmitted, the low job starts again from scratch and can still succeed.
        wait_running(c, ns, "low", operator)
        finish_launcher(c, ns, "low")
        wait_for_condition(c, ns, "low", "Succeeded", operator=operator)
    finally:
        for name in (low_class, high_class):
            delete_cluster_object(c, "workloadpriorityclasses", name)


@pytest.fixture(params=[VOLCANO, COSCHEDULING, NATIVE])
def gang_with_kueue(
    request: pytest.FixtureRequest,
    cluster_provider: ClusterProvider,
    tmp_path: Path,
) -> Iterator[tuple[E2ECluster, OperatorProcess]]:
    """A gang scheduler's cluster (two 8-cpu fake nodes) where Kueue admits with
    waitForPodsReady, and the operator creating that scheduler's PodGroups."""
    cluster = cluster_provider.get(request.param, kueue=True)
    cluster.require_simulation()
    process = OperatorProcess(cluster, tmp_path).start()
    yield cluster, process
    assert process.stop() == 0, process.log_tail()


def test_kueue_evicts_a_gang_that_cannot_start_whole_and_admits_the_next_job(
    gang_with_kueue: tuple[E2ECluster, OperatorProcess],
    namespace_factory: Callable[[E2ECluster], str],
) -> None:
    c, operator = gang_with_kueue
    ns = namespace_factory(c)
    # Quota for both jobs, but the nodes hold only two of the big job's 6-cpu workers: Kueue
    # admits it, the gang scheduler binds none of it, and Kueue's waitForPodsReady evicts it.
    delete = make_queue(c, ns, "40")
    try:
        create_mpijob(c, ns, queued_job("big", "lq").workers(3, cpu="6", memory="1Gi").obj())
        wait_until(
            lambda: workload_condition(c, ns, "big", "Admitted") == "True",
            60,
            message=lambda: f"big admitted: {workload_of(c, ns, 'big')}",
        )
        # Blocked behind the admitted job until its pods are ready or it is evicted.
        create_mpijob(c, ns, queued_job("small", "lq").obj())

        pod_group = wait_until(lambda: get_pod_group(c, ns, "big"), 60, message="big's PodGroup")
        assert gang_min_count(pod_group) == 4, pod_group

        def evicted_for_pods_ready_timeout() -> bool:
            # Read in this order: the small job is admitted only after big's eviction.
            small_admitted = workload_condition(c, ns, "small", "Admitted") == "True"
            assert not [p for p in pods_of(c, ns, "big") if p.spec.node_name], "big half-placed"
            workload = workload_of(c, ns, "big") or {}
            requeued = ((workload.get("status") or {}).get("requeueState") or {}).get("count")
            assert requeued or not small_admitted, "small admitted while big held its turn"
            return bool(requeued)

        wait_until(
            evicted_for_pods_ready_timeout,
            KUEUE_PODS_READY_TIMEOUT + 60,
            message=lambda: f"big evicted by PodsReadyTimeout: {workload_of(c, ns, 'big')}",
        )
        assert "MPIJobSuspended" in event_reasons(c, ns, "big"), event_reasons(c, ns, "big")
        # The small job, whole on the nodes big no longer claims, becomes ready in Kueue's
        # eyes (the MPIJob's Running condition) and finishes.
        wait_running(c, ns, "small", operator)
        wait_until(
            lambda: workload_condition(c, ns, "small", "PodsReady") == "True",
            60,
            message=lambda: f"small PodsReady: {workload_of(c, ns, 'small')}",
        )
        finish_launcher(c, ns, "small")
        wait_for_condition(c, ns, "small", "Succeeded", operator=operator)
        assert not [p for p in pods_of(c, ns, "big") if p.spec.node_name], "big half-placed"
    finally:
        c.custom.delete_collection_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, propagation_policy="Background"
        )
        delete()


def inline_kubeconfig(path: str) -> str:
    """The kubeconfig with its certificate files inlined, as MultiKueue accepts it."""
    config = yaml.safe_load(Path(path).read_text())
    for entry, fields in (("clusters", ("certificate-authority",)), ("users", FILE_FIELDS)):
        for item in config[entry]:
            body = item["cluster" if entry == "clusters" else "user"]
            for name in fields:
                if name in body:
                    data = Path(body.pop(name)).read_bytes()
                    body[f"{name}-data"] = base64.b64encode(data).decode()
    return str(yaml.safe_dump(config))


FILE_FIELDS = ("client-certificate", "client-key")


def test_multikueue_runs_the_job_on_a_worker_cluster_and_the_operator_leaves_its_copy_alone(
    kueue_cluster: E2ECluster,
    cluster_provider: ClusterProvider,
    namespace_factory: Callable[[E2ECluster], str],
    operator: OperatorProcess,
    tmp_path: Path,
) -> None:
    manager = kueue_cluster
    worker = cluster_provider.get("volcano", kueue=True)
    worker.require_simulation()
    ns = namespace_factory(manager)
    suffix = ns.rsplit("-", 1)[-1]
    # MultiKueue creates the job in the namespace of the same name on the worker.
    worker.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
    deletes = [make_queue(worker, ns, "40")]
    secret, config, check = f"worker-{suffix}", f"mk-{suffix}", f"ac-{suffix}"
    manager.core.create_namespaced_secret(
        KUEUE_NAMESPACE,
        k8s.V1Secret(
            metadata=k8s.V1ObjectMeta(name=secret),
            string_data={"kubeconfig": inline_kubeconfig(worker.kubeconfig)},
        ),
    )
    kube_config = {"locationType": "Secret", "location": secret}
    for plural, body in (
        (
            "multikueueclusters",
            {
                "kind": "MultiKueueCluster",
                "metadata": {"name": secret},
                "spec": {"clusterSource": {"kubeConfig": kube_config}},
            },
        ),
        (
            "multikueueconfigs",
            {
                "kind": "MultiKueueConfig",
                "metadata": {"name": config},
                "spec": {"clusters": [secret]},
            },
        ),
        (
            "admissionchecks",
            {
                "kind": "AdmissionCheck",
                "metadata": {"name": check},
                "spec": {
                    "controllerName": MULTIKUEUE,
                    "parameters": {
                        "apiGroup": KUEUE_GROUP,
                        "kind": "MultiKueueConfig",
                        "name": config,
                    },
                },
            },
        ),
    ):
        create_cluster_object(manager, plural, body)
    deletes.append(make_queue(manager, ns, "40", admission_check=check))
    worker_operator = OperatorProcess(worker, tmp_path, name="worker-operator").start()
    try:
        create_mpijob(
            manager, ns, queued_job("remote", "lq").run_policy(managedBy=MULTIKUEUE).obj()
        )

        # The worker's operator runs the copy Kueue made there, gang-scheduled by Volcano.
        wait_until(
            lambda: worker.custom.get_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, "remote"
            ),
            90,
            message=lambda: f"the copy on the worker: {workload_of(manager, ns, 'remote')}",
        )
        wait_running(worker, ns, "remote", worker_operator)
        assert get_pod_group(worker, ns, "remote") is not None
        # Kueue copies the worker's status back; the manager's operator creates nothing.
        wait_for_condition(manager, ns, "remote", "Running", timeout=90, operator=operator)
        finish_launcher(worker, ns, "remote")
        wait_for_condition(worker, ns, "remote", "Succeeded", operator=worker_operator)
        wait_for_condition(manager, ns, "remote", "Succeeded", timeout=90, operator=operator)
        assert pods_of(manager, ns, "remote") == []
        assert manager.batch.list_namespaced_job(ns).items == []
        assert "MPIJobCreated" not in event_reasons(manager, ns, "remote")
    finally:
        assert worker_operator.stop() == 0, worker_operator.log_tail()
        worker.core.delete_namespace(ns)
        for delete in deletes:
            delete()
        for plural, name in (
            ("admissionchecks", check),
            ("multikueueconfigs", config),
            ("multikueueclusters", secret),
        ):
            delete_cluster_object(manager, plural, name)
