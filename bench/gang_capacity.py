"""How soon a waiting gang starts once capacity appears: the figures of docs/gang-scheduling.md.

    python bench/gang_capacity.py [--runs 3] [--limit 420] [--mode MODE ...] [--out FILE]

Brings up local clusters (named ``<E2E_CLUSTER_PREFIX or "capacity">-<scheduler>``, two kwok
nodes of 8 cpu), and per mode and run: creates an MPIJob whose gang needs four such nodes (a
launcher and four 4.5-cpu workers), waits until the scheduler has turned every pod down, adds two
nodes (each waited for until Ready), and measures the seconds from the second node being Ready to
every pod of the gang being bound, or ``--limit`` if it never is. Nothing touches the PodGroup.

Modes: ``volcano`` (the operator as shipped, with Volcano), ``coscheduling`` (as shipped, with the
coscheduling plugin: it nudges the gang) and ``coscheduling-unnudged`` (the same, under a role
without nodes: the operator cannot see nodes come, so nothing nudges the gang) and ``koordinator``
(as shipped, with koord-scheduler, which a node add wakes). Prints one JSON document; nothing is
asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# The clusters, the operator process and the job builders are the e2e tests' own.
from hack.cluster import RECIPES  # noqa: E402
from tests.e2e.clusters import ClusterProvider, E2ECluster  # noqa: E402
from tests.e2e.operator import (  # noqa: E402
    GROUP,
    PLURAL,
    VERSION,
    OperatorProcess,
    create_mpijob,
    pods_of,
    sim_job,
)
from tests.e2e.rbac import delete_service_account_binding, service_account_kubeconfig  # noqa: E402

# Mode -> (cluster flavour, resources the operator's role leaves out).
MODES = {
    "volcano": ("volcano", ()),
    "coscheduling": ("scheduler-plugins", ()),
    "coscheduling-unnudged": ("scheduler-plugins", ("nodes",)),
    "koordinator": ("koordinator", ()),
}
WORKERS = 4
POLL = 0.2


def turned_down(pod: Any) -> bool:
    return any(
        c.type == "PodScheduled" and c.status == "False" for c in pod.status.conditions or []
    )


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(POLL)


def one_run(cluster: E2ECluster, namespace: str, limit: float) -> dict[str, Any]:
    # A name per run: the last run's job may still be on its way out.
    name = f"big-{uuid.uuid4().hex[:6]}"
    job = sim_job(name, workers=WORKERS).workers(WORKERS, cpu="4500m").obj()
    create_mpijob(cluster, namespace, job)

    def all_turned_down() -> bool:
        pods = pods_of(cluster, namespace, name)
        return len(pods) == WORKERS + 1 and all(turned_down(p) for p in pods)

    wait_for(all_turned_down, 120, "the gang to be turned down")
    nodes = [f"capacity-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    added = time.monotonic()
    for node in nodes:
        cluster.add_node(node, cpu="8", memory="32Gi")
    ready = time.monotonic()

    def bound() -> bool:
        pods = pods_of(cluster, namespace, name)
        return len(pods) == WORKERS + 1 and all(p.spec.node_name for p in pods)

    try:
        wait_for(bound, limit, "the gang to bind")
        seconds: float | None = round(time.monotonic() - ready, 1)
    except TimeoutError:
        seconds = None
    finally:
        cluster.custom.delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, propagation_policy="Foreground"
        )
        wait_for(lambda: not pods_of(cluster, namespace, name), 120, "the gang's pods to go")
        for node in nodes:
            cluster.delete_node(node)
    return {
        "bound_after_second_node_ready_s": seconds,
        "nodes_added_in_s": round(ready - added, 1),
    }


def run_mode(
    provider: ClusterProvider, mode: str, runs: int, limit: float, workdir: Path
) -> dict[str, Any]:
    flavour, without = MODES[mode]
    cluster = provider.get(flavour)
    cluster.require_simulation()
    namespace = cluster.create_namespace(f"capacity-{mode}-{uuid.uuid4().hex[:6]}")
    kubeconfig = service_account_kubeconfig(
        cluster.kubeconfig,
        namespace,
        workdir / mode,
        without=without,
        gang_scheduling=RECIPES[flavour].gang_scheduling,
    )
    operator = OperatorProcess(
        cluster, workdir / mode, name=mode, kubeconfig=kubeconfig, lock_namespace=namespace
    )
    samples = []
    try:
        # The binding takes effect a moment after it is made.
        time.sleep(2)
        operator.start()
        for _ in range(runs):
            samples.append(one_run(cluster, namespace, limit))
            print(json.dumps({"mode": mode, **samples[-1]}), file=sys.stderr, flush=True)
        nudges = operator.metric("mpi_operator_gang_capacity_nudges_total")
    finally:
        operator.stop()
        delete_service_account_binding(cluster.kubeconfig, namespace)
        cluster.delete_namespace(namespace)
    seconds = [s["bound_after_second_node_ready_s"] for s in samples]
    measured = [s for s in seconds if s is not None]
    return {
        "mode": mode,
        "runs": samples,
        "median_s": statistics.median(measured) if measured else None,
        "not_bound_within_limit": len(seconds) - len(measured),
        "nudges": nudges,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--limit", type=float, default=420.0, help="seconds to wait at most")
    parser.add_argument("--mode", action="append", choices=sorted(MODES))
    parser.add_argument("--out", type=Path, help="also write the result as JSON here")
    args = parser.parse_args()
    os.environ.setdefault("E2E_CLUSTER_PREFIX", "capacity")
    provider = ClusterProvider()
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="capacity-") as workdir:
            for mode in args.mode or list(MODES):
                results.append(run_mode(provider, mode, args.runs, args.limit, Path(workdir)))
    finally:
        provider.close()
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "load": os.getloadavg(),
            "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
        },
        "command": " ".join(sys.argv),
        "results": results,
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
