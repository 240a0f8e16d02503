"""The operator started with ``--gang-scheduling volcano`` on a cluster without Volcano's CRDs:
it becomes ready, syncs the jobs that need no gang, tells gang jobs which CRD is missing, and
runs them once the CRDs are installed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

import hack.cluster as localcluster
from hack.cluster.binaries import module_dirs

from .clusters import KWOK_NODE_ANNOTATION, E2ECluster, wait_until
from .operator import (
    CONDITION_GANG_SCHEDULED,
    OperatorProcess,
    condition,
    create_mpijob,
    event_reasons,
    get_mpijob,
    pods_of,
    sim_job,
    wait_for_condition,
)

pytestmark = [pytest.mark.e2e]

VOLCANO_CRDS = ("podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh")
MISSING = "podgroups.scheduling.volcano.sh and queues.scheduling.volcano.sh are not served"
# The operator checks again every 30 s, then lists everything again: a generous bound.
NOTICED_WITHIN = 120


@pytest.fixture
def without_volcano(cluster: E2ECluster) -> Iterator[E2ECluster]:
    """The default cluster, which has no Volcano; the CRDs a test installs go afterwards."""
    if cluster.provider != "local":
        pytest.skip("installs Volcano's CRDs from the pinned module, on a local cluster only")
    assert not any(cluster.has_crd(name) for name in VOLCANO_CRDS)
    yield cluster
    extensions = k8s.ApiextensionsV1Api(cluster.api)
    for name in VOLCANO_CRDS:
        with contextlib.suppress(ApiException):
            extensions.delete_custom_resource_definition(name)
    wait_until(
        lambda: not any(cluster.has_crd(name) for name in VOLCANO_CRDS),
        60,
        message="Volcano's CRDs gone",
    )


def install_volcano_crds(cluster: E2ECluster) -> None:
    bins = localcluster.bin_dir(build=False)
    bases = module_dirs(bins)["volcano.sh/volcano"] / "config" / "crd" / "volcano" / "bases"
    tool = localcluster.Cluster(localcluster.ClusterInfo.load(cluster.name), bins)
    files = [bases / f"scheduling.volcano.sh_{plural}.yaml" for plural in ("podgroups", "queues")]
    localcluster.apply_crds(tool, files)


def kwok_node(cluster: E2ECluster) -> str:
    for node in cluster.core.list_node().items:
        if (node.metadata.annotations or {}).get(KWOK_NODE_ANNOTATION):
            return str(node.metadata.name)
    raise AssertionError("the default cluster has no kwok node")


def bind_unbound(cluster: E2ECluster, namespace: str, job: str, node: str) -> None:
    """Place the job's pods on ``node``, as a scheduler binds them."""
    for pod in pods_of(cluster, namespace, job):
        if pod.spec.node_name:
            continue
        binding = k8s.V1Binding(
            metadata=k8s.V1ObjectMeta(name=pod.metadata.name),
            target=k8s.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        # The generated client cannot read the answer back into a V1Binding.
        cluster.core.create_namespaced_binding(namespace, binding, _preload_content=False)


def test_without_volcanos_crds_only_gang_jobs_wait_and_they_run_once_installed(
    without_volcano: E2ECluster, namespace: str, tmp_path: Path
) -> None:
    cluster = without_volcano
    operator = OperatorProcess(cluster, tmp_path, gang_scheduling="volcano", name="no-crd")
    # Polls /readyz until it answers ok; before, the caches never synced here.
    operator.start()
    try:
        assert operator.log_path.read_text().count(MISSING) == 1, operator.log_tail()

        # A suspended job gets no gang objects: it is synced as on any cluster.
        create_mpijob(cluster, namespace, sim_job("held").suspend().obj())
        wait_for_condition(cluster, namespace, "held", "Suspended", operator=operator)

        create_mpijob(cluster, namespace, sim_job("pi").obj())
        job = wait_for_condition(
            cluster, namespace, "pi", CONDITION_GANG_SCHEDULED, "False", operator=operator
        )
        waiting = condition(job, CONDITION_GANG_SCHEDULED)
        assert waiting is not None and waiting["reason"] == "PodGroupCRDMissing"
        assert waiting["message"].startswith(MISSING), waiting
        assert "install Volcano's CRDs" in waiting["message"]
        wait_until(
            lambda: "PodGroupCRDMissing" in event_reasons(cluster, namespace, "pi"),
            30,
            message="the PodGroupCRDMissing event",
        )
        # Nothing placed in a gang that cannot exist yet, and no write that failed.
        assert pods_of(cluster, namespace, "pi") == []
        assert "reconcile failed" not in operator.log_path.read_text(), operator.log_tail()

        install_volcano_crds(cluster)
        # The queue Volcano's scheduler would create; with no status it reads as Open.
        cluster.custom.create_cluster_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            "queues",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "default"},
                "spec": {"weight": 1},
            },
        )
        wait_until(
            lambda: cluster.get_custom(
                "scheduling.volcano.sh", "v1beta1", namespace, "podgroups", "pi"
            ),
            NOTICED_WITHIN,
            message=lambda: f"the PodGroup once the CRD is served:\n{operator.log_tail()}",
        )
        pods = wait_until(
            lambda: (found := pods_of(cluster, namespace, "pi")) and len(found) == 3 and found,
            60,
            message="the launcher's and the workers' pods",
        )
        assert {pod.spec.scheduler_name for pod in pods} == {"volcano"}
        waiting = condition(get_mpijob(cluster, namespace, "pi"), CONDITION_GANG_SCHEDULED)
        assert waiting is None or waiting["reason"] != "PodGroupCRDMissing", waiting

        # This cluster runs no Volcano scheduler: the test binds the gang's pods in its place.
        node = kwok_node(cluster)
        bind_unbound(cluster, namespace, "pi", node)
        wait_for_condition(cluster, namespace, "pi", "Succeeded", timeout=120, operator=operator)
    finally:
        assert operator.stop() == 0, operator.log_tail()
