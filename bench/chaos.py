"""Chaos run: the figures of docs/reliability.md ("Chaos").

    python bench/chaos.py [--scheduler volcano] [--jobs 200] [--workers 2]
        [--kill-interval 10] [--kills 6] [--api-server-after 5] [--api-server-down 2]
        [--compaction-interval 2] [--compactions 10] [--scenario NAME ...] [--out FILE]

Brings up a local cluster (named ``chaos-<scheduler>``, with enough kwok nodes for every pod),
runs each scenario of ``tests/e2e/chaos.py`` on a burst of ``--jobs`` MPIJobs in a fresh
namespace, and stops the cluster at the end. Every loop is bounded, so the run stops by itself.
Prints one JSON document: per scenario its figures and every problem the audit found (a job
without exactly its children, a stray object, a job that did not end). Exits 1 if any scenario
found a problem or failed.

Scenarios: ``kill`` (the operator SIGKILLed every --kill-interval seconds, --kills times, and
started again), ``api-server`` (the API server SIGKILLed --api-server-after seconds into the
burst and started again --api-server-down seconds later), ``compaction`` (etcd compacted to its
current revision every --compaction-interval seconds, --compactions times, then etcd
restarted) and ``leader`` (two replicas with leader election; the leader SIGKILLed while it
works). Keep --api-server-down short on a shared machine: while the API server is down its port
is free, and a cluster created meanwhile may take it (the restart then fails and says so).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# The scenarios and the cluster handling are the e2e tests' own, run here with larger sizes.
from tests.e2e import chaos  # noqa: E402
from tests.e2e.clusters import ClusterProvider  # noqa: E402

PODS_PER_NODE = 100
# A burst -> what the scenario did and found.
Scenario = Callable[[chaos.Burst], chaos.ChaosResult]
SCENARIOS = ("kill", "api-server", "compaction", "leader")


def scenarios(args: argparse.Namespace) -> dict[str, Scenario]:
    return {
        "kill": partial(
            chaos.operator_killed_repeatedly, interval=args.kill_interval, kills=args.kills
        ),
        "api-server": partial(
            chaos.api_server_restarted, after=args.api_server_after, down=args.api_server_down
        ),
        "compaction": partial(
            chaos.etcd_compacted,
            interval=args.compaction_interval,
            compactions=args.compactions,
        ),
        "leader": chaos.leader_killed,
    }


def run_one(name: str, scenario: Scenario, burst: chaos.Burst) -> dict[str, Any]:
    started = time.monotonic()
    try:
        outcome = asdict(scenario(burst))
    except (Exception, pytest.fail.Exception) as error:
        outcome = {"scenario": name, "problems": [f"failed: {error}"]}
    finally:
        # A scenario that broke the cluster must still leave a report behind.
        with contextlib.suppress(Exception):
            burst.cluster.delete_namespace(burst.namespace)
    outcome["wall_seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(outcome), file=sys.stderr, flush=True)
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scheduler", choices=("default", "volcano", "scheduler-plugins"), default="volcano"
    )
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--kill-interval", type=float, default=10.0)
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--api-server-after", type=float, default=5.0)
    parser.add_argument("--api-server-down", type=float, default=2.0)
    parser.add_argument("--compaction-interval", type=float, default=2.0)
    parser.add_argument("--compactions", type=int, default=10)
    parser.add_argument("--scenario", action="append", choices=SCENARIOS)
    parser.add_argument("--out", type=Path, help="also write the result as JSON here")
    args = parser.parse_args()
    selected = args.scenario or list(SCENARIOS)

    os.environ.setdefault("E2E_CLUSTER_PREFIX", "chaos")
    provider = ClusterProvider()
    results: list[dict[str, Any]] = []
    try:
        cluster = provider.get(args.scheduler)
        pods = args.jobs * (args.workers + 1)
        # Room for every pod of a burst, and some to spare while the last namespace empties.
        for index in range(pods // PODS_PER_NODE + 2):
            cluster.add_node(f"chaos-node-{index}", cpu="64", memory="256Gi")
        run_all = scenarios(args)
        with tempfile.TemporaryDirectory(prefix="chaos-") as workdir:
            for name in selected:
                (Path(workdir) / name).mkdir()
                namespace = cluster.create_namespace(f"chaos-{name}")
                burst = chaos.Burst(
                    cluster, namespace, Path(workdir) / name, args.jobs, args.workers
                )
                results.append(run_one(name, run_all[name], burst))
    finally:
        provider.close()
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
        },
        "command": " ".join(sys.argv),
        "scheduler": args.scheduler,
        "results": results,
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if any(result.get("problems") for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
