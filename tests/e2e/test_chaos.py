"""Chaos on the local cluster: the operator killed again and again, the API server killed and
started, etcd compacted under open watches, the leader killed with a standby waiting. After
each, every job has ended with exactly its children and nothing else is left.

Small bursts, so the module runs in a few minutes; ``bench/chaos.py`` runs the same scenarios
large. Its own module: no other operator may act on these jobs meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client as k8s

import hack.cluster as localcluster

from .chaos import (
    Burst,
    api_server_restarted,
    audit,
    etcd_compacted,
    job_names,
    leader_killed,
    operator_killed_repeatedly,
)
from .clusters import E2ECluster

pytestmark = pytest.mark.e2e

JOBS = 10


@pytest.mark.volcano
def test_an_operator_killed_again_and_again_leaves_each_gang_job_exactly_its_children(
    volcano_cluster: E2ECluster, namespace_factory: Callable[[E2ECluster], str], tmp_path: Path
) -> None:
    namespace = namespace_factory(volcano_cluster)
    burst = Burst(volcano_cluster, namespace, tmp_path, JOBS)
    result = operator_killed_repeatedly(burst, interval=4.0, kills=3)
    assert result.problems == []

    # The audit sees what a broken operator would leave: a stray and a missing child.
    core = volcano_cluster.core
    core.create_namespaced_service(
        namespace,
        k8s.V1Service(
            metadata=k8s.V1ObjectMeta(name="stray"),
            spec=k8s.V1ServiceSpec(ports=[k8s.V1ServicePort(port=80)]),
        ),
    )
    core.delete_namespaced_secret("job-000-ssh", namespace)
    found = audit(volcano_cluster, namespace, job_names(JOBS), gang=True)
    assert found == ["services without a controller: ['stray']", "secrets missing: ['job-000-ssh']"]


def test_the_operator_rides_out_an_api_server_restart_and_relists_on_410(
    cluster: E2ECluster, namespace: str, tmp_path: Path
) -> None:
    result = api_server_restarted(Burst(cluster, namespace, tmp_path, JOBS), after=2.0, down=3.0)
    assert result.problems == []
    assert result.figures["relists_on_410"] > 0
    info = localcluster.ClusterInfo.load(cluster.name)
    assert [p.name for p in info.processes if not p.alive()] == []


def test_etcd_compaction_under_open_watches_loses_nothing(
    cluster: E2ECluster, namespace: str, tmp_path: Path
) -> None:
    burst = Burst(cluster, namespace, tmp_path, JOBS)
    result = etcd_compacted(burst, interval=2.0, compactions=4)
    assert result.problems == []
    assert result.figures["compactions"] == 4


def test_a_standby_takes_over_from_a_killed_leader_and_finishes_every_job(
    cluster: E2ECluster, namespace: str, tmp_path: Path
) -> None:
    result = leader_killed(Burst(cluster, namespace, tmp_path, JOBS))
    assert result.problems == []
