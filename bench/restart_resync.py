"""Benchmark: a restart over N settled jobs, this operator and upstream's (v0.8.2) side by side.

    python bench/restart_resync.py [--jobs 1000] [--workers 2] [--rounds 2]
        [--threadiness 2] [--kube-api-qps 5] [--kube-api-burst 10] [--out FILE]
        [--operators ours upstream] [--trace-memory]

Nothing changes while the operator is away, so a correct resync writes nothing, and the audit log
cannot tell when it is done. Both operators log one line per finished sync, with the time and
the job's key: upstream ``Successfully synced '<ns>/<name>'`` (klog, at its default verbosity),
this operator ``reconciled: success`` with ``"mpijob": "<ns>/<name>"`` (at ``--v=4``; it logs
nothing else per sync at that level). The resync time is from the process's start to the line
that completes the set of N keys, read from the operator's own log: the same measure for both.

One fresh local cluster (bench/side_by_side.py's, with the audit policy) holds both operators'
jobs, each operator's in a namespace of its own:

1. set-up, once per operator: start it with the limits raised (``--create-*`` flags: its queue's
   too, so that creating N jobs takes a minute, not N / 10 s), create N MPIJobs of W workers,
   wait until every one shows Running and the operator has written nothing for 5 s, note its
   RSS, stop it;
2. rounds, interleaved (ours, upstream; upstream, ours; ...): delete the Lease (upstream does not
   hand it back), start the operator with the flags measured (default: upstream's defaults, QPS 5,
   burst 10, threadiness 2), take start to ready (the Lease's ``acquireTime``) and start to
   resynced (above), wait until no write has followed for 5 s, then read its requests since its
   start from the audit log (by verb and resource, Lease requests apart), its CPU seconds, its
   peak RSS (VmHWM) and its RSS then (VmRSS), and stop it.

Exits 1 when this operator breaks the ``restart_resync`` limits of bench/thresholds.yaml (writes
during a resync; seconds to resync, per 1,000 jobs above 1,000) or did not resync every job.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import create_jobs
import side_by_side
import yaml
from memory_trace import vm_mib
from side_by_side import Bench, Flags, Operator

MEMORY_TRACE = Path(__file__).resolve().parent / "memory_trace.py"

# A sync that finished, and the key it was of, in each operator's log.
UPSTREAM_SYNCED = re.compile(
    r"^I(?P<month>\d\d)(?P<day>\d\d) (?P<time>\d\d:\d\d:\d\d\.\d+)\s.*"
    r"Successfully synced '(?P<key>[^']+)'"
)
OURS_SYNCED = "reconciled: success"


def synced_at(label: str, line: str) -> tuple[str, float] | None:
    """(key, wall-clock time) of a finished sync in a line of ``label``'s log, else None."""
    if label == "upstream":
        match = UPSTREAM_SYNCED.match(line)
        if match is None:
            return None
        # klog stamps local time without the year.
        stamp = f"{datetime.now().year}-{match['month']}-{match['day']}T{match['time']}"
        return match["key"], datetime.fromisoformat(stamp).timestamp()
    if OURS_SYNCED not in line or not line.startswith("{"):
        return None
    record = json.loads(line)
    if OURS_SYNCED not in record.get("msg", "") or "mpijob" not in record:
        return None
    return record["mpijob"], datetime.fromisoformat(record["ts"]).timestamp()


def wait_synced(
    label: str, log_path: Path, keys: set[str], operator: Operator, timeout: float
) -> dict[str, float]:
    """First sync time of each of ``keys`` in the operator's log, until all or timeout."""
    first: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    position = 0
    pending = b""
    while len(first) < len(keys) and time.monotonic() < deadline:
        operator.check_alive()
        with log_path.open("rb") as log:
            log.seek(position)
            data = log.read()
        position += len(data)
        lines = (pending + data).split(b"\n")
        pending = lines.pop()
        for raw in lines:
            found = synced_at(label, raw.decode(errors="replace"))
            if found is not None and found[0] in keys:
                first.setdefault(found[0], found[1])
        time.sleep(0.2)
    return first


def rss_mib(pid: int) -> tuple[float, float]:
    """Peak (VmHWM) and current (VmRSS) resident memory, MiB."""
    memory = vm_mib(pid)
    return memory["VmHWM"], memory["VmRSS"]


def create_settled_jobs(
    label: str, command: Callable[[str], list[str]], namespace: str, bench: Bench
) -> dict[str, Any]:
    """N jobs created and settled by ``label`` (with the creation flags); its RSS then."""
    cluster, audit, args = bench.cluster, bench.audit, bench.args
    cluster.create_namespace(namespace)
    names = side_by_side.job_names(args.jobs)
    print(f"--- {label}: creating {len(names)} jobs in {namespace}", file=sys.stderr)
    operator = Operator(label, command(namespace), args.work / f"{namespace}-create.log")
    try:
        cluster.lease_acquired_at(namespace, args.ready_timeout)
        start = time.monotonic()
        offset = audit.offset()
        cluster.submit_jobs(namespace, names, args.workers)
        running = cluster.wait_running(namespace, len(names), args.timeout)
        audit.settle(offset, args.settle_timeout)
        operator.check_alive()
        peak, current = rss_mib(operator.process.pid)
        return {
            "operator": label,
            "jobs": len(names),
            "jobs_running": running,
            "create_to_settled_s": time.monotonic() - start,
            "peak_rss_mib": peak,
            "rss_mib": current,
        }
    finally:
        operator.stop()


def restart(
    label: str, command: Callable[[str], list[str]], namespace: str, bench: Bench, round_number: int
) -> dict[str, Any]:
    """One restart over the namespace's settled jobs, measured."""
    cluster, audit, args = bench.cluster, bench.audit, bench.args
    keys = {f"{namespace}/{name}" for name in side_by_side.job_names(args.jobs)}
    cluster.delete_lease(namespace)
    log_path = args.work / f"{namespace}-restart-{round_number}.log"
    print(f"--- {label}: restart {round_number} over {namespace}", file=sys.stderr)
    time.sleep(1)
    offset = audit.offset()
    operator = Operator(label, command(namespace), log_path)
    try:
        ready_at = cluster.lease_acquired_at(namespace, args.ready_timeout)
        first = wait_synced(label, log_path, keys, operator, args.resync_timeout)
        requests, cpu, peak = side_by_side.settled_usage(
            operator, audit, offset, args.settle_timeout
        )
        current = vm_mib(operator.process.pid)["VmRSS"]
    finally:
        operator.stop()
    return {
        "operator": label,
        "round": round_number,
        "jobs": len(keys),
        "synced_jobs": len(first),
        "start_to_ready_s": ready_at - operator.started,
        "start_to_resynced_s": (
            max(first.values()) - operator.started if len(first) == len(keys) else float("nan")
        ),
        "writes": sum(requests.writes.values()),
        "reads": sum(requests.reads.values()),
        "writes_by_kind": dict(sorted(requests.writes.items())),
        "reads_by_kind": dict(sorted(requests.reads.items())),
        "cpu_seconds": cpu,
        "peak_rss_mib": peak,
        "rss_mib": current,
    }


ROWS: tuple[side_by_side.Row, ...] = (
    ("restart: start to ready (s)", "start_to_ready_s", "{:.2f}"),
    ("restart: start to every job synced once (s)", "start_to_resynced_s", "{:.2f}"),
    ("restart: API writes", "writes", "{:.0f}"),
    ("restart: API reads (lists and watches)", "reads", "{:.0f}"),
    ("restart: CPU, start to settled (s)", "cpu_seconds", "{:.1f}"),
    ("restart: peak RSS (MiB)", "peak_rss_mib", "{:.0f}"),
    ("restart: RSS once settled (MiB)", "rss_mib", "{:.0f}"),
)
SETUP_ROWS: tuple[side_by_side.Row, ...] = (
    ("first run (created them): peak RSS (MiB)", "peak_rss_mib", "{:.0f}"),
    ("first run (created them): RSS once settled (MiB)", "rss_mib", "{:.0f}"),
)


def table(setup: list[dict[str, Any]], restarts: list[dict[str, Any]]) -> str:
    return "\n".join(
        [
            *side_by_side.comparison_header(),
            *side_by_side.comparison_rows(restarts, ROWS),
            *side_by_side.comparison_rows(setup, SETUP_ROWS),
        ]
    )


def check(setup: list[dict[str, Any]], restarts: list[dict[str, Any]]) -> list[str]:
    """Breaches of bench/thresholds.yaml's ``restart_resync`` limits (ours, every round)."""
    limits = yaml.safe_load(create_jobs.THRESHOLDS.read_text())["restart_resync"]
    breaches = [
        f"{s['operator']}: {s['jobs_running']} of {s['jobs']} jobs running"
        for s in setup
        if s["jobs_running"] < s["jobs"]
    ]
    for r in restarts:
        if r["synced_jobs"] < r["jobs"]:
            breaches.append(f"{r['operator']} round {r['round']}: {r['synced_jobs']} synced")
        if r["operator"] != "ours":
            continue
        if r["writes"] > limits["max_writes"]:
            breaches.append(f"ours round {r['round']} wrote during a resync: {r['writes_by_kind']}")
        # Up to 1,000 jobs the limit stands as it is (start-up dominates a small N); above,
        # it grows with N.
        limit = limits["max_resync_seconds_per_1000_jobs"] * max(1.0, r["jobs"] / 1000)
        if not r["start_to_resynced_s"] <= limit:
            breaches.append(
                f"ours round {r['round']}: resynced in {r['start_to_resynced_s']:.1f} s > "
                f"{limit:.1f} s for {r['jobs']} jobs"
            )
    return breaches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2, help="restarts of each operator")
    side_by_side.add_job_and_operator_flags(parser)
    parser.add_argument("--create-threadiness", type=int, default=16)
    parser.add_argument("--create-kube-api-qps", type=int, default=1000)
    parser.add_argument("--create-kube-api-burst", type=int, default=2000)
    parser.add_argument("--create-queue-rate-limit", type=float, default=1000)
    parser.add_argument("--create-queue-burst", type=int, default=2000)
    side_by_side.add_bench_flags(parser, "restart-resync")
    parser.add_argument("--resync-timeout", type=float, default=900)
    parser.add_argument("--out", type=Path, help="also write every figure as JSON here")
    parser.add_argument(
        "--trace-memory",
        action="store_true",
        help="run ours under bench/memory_trace.py (slow): <log dir>/<namespace>-<n>.memory.json",
    )
    args = parser.parse_args()

    binary = args.upstream_binary or side_by_side.built(side_by_side.BUILD_UPSTREAM)
    create_jobs.compile_operator()
    measured = Flags(args.threadiness, args.kube_api_qps, args.kube_api_burst, None, None)
    creating = Flags(
        args.create_threadiness,
        args.create_kube_api_qps,
        args.create_kube_api_burst,
        args.create_queue_rate_limit,
        args.create_queue_burst,
    )
    args.work = side_by_side.work_dir("restart-resync-")
    setup: list[dict[str, Any]] = []
    restarts: list[dict[str, Any]] = []
    nodes = 2 * args.jobs * (args.workers + 1) // 100 + 2
    with side_by_side.audited_cluster(args.cluster_name, nodes, args.work) as (cluster, audit):
        kubeconfig = cluster.operator_kubeconfig
        bench = Bench(cluster, audit, args)
        runs = itertools.count()

        def ours(namespace: str, flags: Flags, verbose: bool) -> list[str]:
            command = side_by_side.ours_command(kubeconfig, namespace, flags)
            if args.trace_memory:
                trace = args.work / f"{namespace}-{next(runs)}.memory.json"
                command[1:3] = [str(MEMORY_TRACE), str(trace)]  # instead of -m mpi_operator
            return [*command, *(["--v=4"] if verbose else [])]

        def command(label: str, flags: Flags, verbose: bool) -> Callable[[str], list[str]]:
            if label == "ours":
                return lambda ns: ours(ns, flags, verbose)
            return lambda ns: side_by_side.upstream_command(binary, kubeconfig, ns, flags)

        for label in args.operators:
            created = create_settled_jobs(label, command(label, creating, False), label, bench)
            print(json.dumps(created), file=sys.stderr)
            setup.append(created)
        for round_number, label in side_by_side.interleaved(args.operators, args.rounds):
            result = restart(label, command(label, measured, True), label, bench, round_number)
            print(json.dumps(result), file=sys.stderr)
            restarts.append(result)
    load = os.getloadavg()
    report = {
        "flags": measured.common("<namespace>"),
        "create_flags": creating.common("<namespace>"),
        "jobs": args.jobs,
        "workers_per_job": args.workers,
        "upstream_binary": str(binary),
        "machine": side_by_side.machine(),
        "load_average_1_5_15": load,
        "setup": setup,
        "restarts": restarts,
    }
    heading = (
        f"restart over N={args.jobs} settled jobs x {args.workers} workers, "
        f"{args.rounds} rounds (interleaved)"
    )
    side_by_side.publish(report, args.out, heading, measured)
    if restarts:
        print(table(setup, restarts))
        print()
        print(
            side_by_side.by_kind_table(
                restarts, "request", ["writes_by_kind", "reads_by_kind"], "{:.1f}"
            )
        )
    return create_jobs.exit_code(check(setup, restarts))


if __name__ == "__main__":
    sys.exit(main())
