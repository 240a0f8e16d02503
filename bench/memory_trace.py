"""Run the operator with tracemalloc on, for benchmarks only (never in the product).

    python bench/memory_trace.py FILE [operator flags]

Starts tracemalloc before the operator is imported, then runs ``mpi-operator`` with the flags
given. A thread samples every 0.1 s the traced memory now and its peak since the last sample,
with the process's RSS (VmRSS) and peak (VmHWM). On exit it writes to FILE, as JSON: that
timeline (seconds since start), the largest peak and where the memory alive at the end was
allocated (top sites by size), and the garbage collector's counts. tracemalloc slows the
operator down severalfold: the timeline shows where memory goes, not how fast.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

SAMPLE_SECONDS = 0.1
TOP_SITES = 25


def vm_mib(pid: int) -> dict[str, float]:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(value.split()[0]) / 1024
    return values


def sample(timeline: list[dict[str, Any]], start: float, stop: threading.Event) -> None:
    pid = os.getpid()
    while not stop.wait(SAMPLE_SECONDS):
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        timeline.append(
            {
                "t": round(time.monotonic() - start, 2),
                "traced_mib": round(current / 2**20, 2),
                "traced_peak_mib": round(peak / 2**20, 2),
                **vm_mib(pid),
            }
        )


def report(timeline: list[dict[str, Any]]) -> dict[str, Any]:
    snapshot = tracemalloc.take_snapshot()
    sites = snapshot.statistics("lineno")[:TOP_SITES]
    return {
        "largest_traced_peak_mib": max((s["traced_peak_mib"] for s in timeline), default=0.0),
        "alive_at_exit_by_site": [
            {"site": str(stat.traceback), "mib": round(stat.size / 2**20, 2), "blocks": stat.count}
            for stat in sites
        ],
        "gc_counts": gc.get_count(),
        "gc_stats": gc.get_stats(),
        "timeline": timeline,
    }


def main() -> int:
    out = Path(sys.argv[1])
    tracemalloc.start()
    start = time.monotonic()
    timeline: list[dict[str, Any]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(timeline, start, stop), daemon=True)
    sampler.start()
    from mpi_operator.cli import main as operator_main

    try:
        return operator_main(sys.argv[2:])
    finally:
        stop.set()
        sampler.join()
        out.write_text(json.dumps(report(timeline), indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
