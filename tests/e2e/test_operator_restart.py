"""An operator killed while it creates a job's pods, and its successor, on a real cluster.

Its own module: no other operator may run meanwhile, or it would finish the job itself.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from .clusters import E2ECluster, wait_until
from .operator import OperatorProcess, create_mpijob, pods_of, sim_job, wait_for_condition

pytestmark = pytest.mark.e2e


def test_a_restart_in_the_middle_of_creating_a_job_leaves_no_duplicates(
    cluster: E2ECluster, namespace: str, tmp_path: Path
) -> None:
    first = OperatorProcess(cluster, tmp_path, name="first", extra_args=["--leader-elect=false"])
    first.start()
    create_mpijob(cluster, namespace, sim_job("restart", workers=8).obj())
    wait_until(lambda: pods_of(cluster, namespace, "restart"), 60, message="first pods")
    first.stop(signal.SIGKILL)
    second = OperatorProcess(
        cluster, tmp_path, name="second", extra_args=["--leader-elect=false"]
    ).start()
    try:
        wait_for_condition(cluster, namespace, "restart", "Succeeded", operator=second)
        workers = pods_of(cluster, namespace, "restart", "worker")
        assert sorted(p.metadata.name for p in workers) == [f"restart-worker-{i}" for i in range(8)]
        jobs = cluster.batch.list_namespaced_job(namespace).items
        assert [j.metadata.name for j in jobs] == ["restart-launcher"]
    finally:
        assert second.stop() == 0, second.log_tail()
