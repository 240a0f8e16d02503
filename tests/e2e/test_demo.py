"""`make demo`'s script, as a user runs it: its own cluster with real nodes, the pi example
computing pi in real pods, and nothing of it left afterwards."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import hack.cluster as localcluster
from hack.cluster import realnodes

from .clusters import REPO, ClusterProvider, cluster_prefix

pytestmark = [pytest.mark.e2e, pytest.mark.realnodes]

DEMO = REPO / "hack" / "demo.py"
PI_LINE = re.compile(r"^\s+pi is approximately 3\.141592\d*, error", re.MULTILINE)


def test_demo_computes_pi_in_real_pods_and_stops_everything(
    cluster_provider: ClusterProvider,
) -> None:
    if cluster_provider.provider != "local":
        pytest.skip("the demo brings up a local cluster of its own")
    name = f"{cluster_prefix()}-demo"
    try:
        demo = subprocess.run(
            [sys.executable, str(DEMO), f"--name={name}"],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
            cwd=REPO,
        )
    finally:
        # Whatever happened to the demo, its cluster goes (a no-op once the demo stopped it).
        stopped_by_test = localcluster.down(name)
    out = demo.stdout
    assert demo.returncode == 0, out + demo.stderr[-3000:]
    assert "demo: mpijob/pi: Created -> Running -> Succeeded" in out, out
    assert PI_LINE.search(out), out
    assert "demo: stopped the operator and the cluster" in out, out
    assert stopped_by_test == []
    assert not localcluster.cluster_dir(name).exists()
    left = realnodes.host_traces(name, localcluster.cluster_dir(name))
    assert left.empty(), left
