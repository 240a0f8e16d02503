"""Fixtures for the end-to-end tests; the machinery lives in clusters.py.

``local_cluster("volcano")`` returns the session's cluster of a flavour
(started on first use, stopped at session end); ``cluster``,
``volcano_cluster`` and ``coscheduling_cluster`` are shortcuts, and ``real_cluster`` is a
separate default-scheduler cluster with real nodes only (``real_operator`` serves it). Each
test gets fresh namespaces from ``namespace_factory`` (or ``namespace`` on the default
cluster) and fake nodes from ``node_factory``; both are deleted afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .clusters import ClusterProvider, E2ECluster
from .operator import operator_fixture

# --- fixtures ---------------------------------------------------------------


@pytest.fixture(scope="session")
def cluster_provider() -> Iterator[ClusterProvider]:
    provider = ClusterProvider()
    try:
        yield provider
    finally:
        provider.close()


@pytest.fixture(scope="session")
def local_cluster(cluster_provider: ClusterProvider) -> Callable[[str], E2ECluster]:
    """Factory: ``local_cluster("volcano")`` returns the session's cluster of that flavour."""
    return cluster_provider.get


# The operator on the default cluster, one process per test module (a module that needs other
# flags or another cluster defines its own).
operator = operator_fixture("default")


@pytest.fixture
def cluster(local_cluster: Callable[[str], E2ECluster]) -> E2ECluster:
    return local_cluster("default")


@pytest.fixture
def volcano_cluster(local_cluster: Callable[[str], E2ECluster]) -> E2ECluster:
    return local_cluster("volcano")


@pytest.fixture
def coscheduling_cluster(local_cluster: Callable[[str], E2ECluster]) -> E2ECluster:
    return local_cluster("scheduler-plugins")


@pytest.fixture
def native_cluster(local_cluster: Callable[[str], E2ECluster]) -> E2ECluster:
    """Kubernetes 1.37, whose kube-scheduler gang-schedules scheduling.k8s.io PodGroups; no
    other scheduler runs."""
    return local_cluster("native")


@pytest.fixture
def real_cluster(cluster_provider: ClusterProvider) -> E2ECluster:
    """The default-scheduler cluster whose nodes are real (kubelet, containerd), not kwok's."""
    return cluster_provider.get("default", real_nodes=True)


@pytest.fixture(scope="module")
def real_node_cluster(cluster_provider: ClusterProvider) -> E2ECluster:
    """The real-node cluster where the operator runs in-cluster, from the image the nodes
    imported."""
    cluster = cluster_provider.get("default", real_nodes=True)
    if cluster.provider != "local":
        pytest.skip("the operator image is imported into the local cluster's real nodes")
    return cluster


# The operator on the real-node cluster, one process per test module.
real_operator = operator_fixture("default", name="real_operator", real_nodes=True)


@pytest.fixture
def kueue_cluster(cluster_provider: ClusterProvider) -> E2ECluster:
    """A default-scheduler cluster (fake nodes) where Kueue admits the jobs naming a queue."""
    return cluster_provider.get("default", kueue=True)


@pytest.fixture
def namespace_factory(request: pytest.FixtureRequest) -> Iterator[Callable[[E2ECluster], str]]:
    """Creates a fresh namespace in a cluster (``restricted=True``: under the restricted Pod
    Security Standard); every one is deleted after the test."""
    created: list[tuple[E2ECluster, str]] = []

    def make(c: E2ECluster, restricted: bool = False) -> str:
        base = request.node.name.lower()
        base = "".join(ch if ch.isalnum() else "-" for ch in base).strip("-")[:40].strip("-")
        name = f"{base}-{uuid.uuid4().hex[:6]}"
        created.append((c, c.create_namespace(name, restricted)))
        return name

    yield make
    for c, name in created:
        c.delete_namespace(name)


@pytest.fixture
def namespace(cluster: E2ECluster, namespace_factory: Callable[[E2ECluster], str]) -> str:
    return namespace_factory(cluster)


@pytest.fixture
def node_factory() -> Iterator[Callable[..., str]]:
    """``node_factory(cluster, name, cpu=..., ...)``: a fake node deleted after the test."""
    created: list[tuple[E2ECluster, str]] = []

    def make(c: E2ECluster, name: str, **kwargs: Any) -> str:
        created.append((c, name))
        return c.add_node(name, **kwargs)

    yield make
    for c, name in created:
        c.delete_node(name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here) and not item.get_closest_marker("e2e"):
            raise pytest.UsageError(f"{item.nodeid}: every test under tests/e2e must be marked e2e")
