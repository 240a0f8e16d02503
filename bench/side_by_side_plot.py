"""The side-by-side benchmark's results, run after run, and their plot.

    python bench/side_by_side_plot.py [--results docs/side-by-side.json] [--out FILE]

``bench/side_by_side.py --results FILE`` adds each run's means (jobs/s, CPU per job and peak RSS
of each operator) to FILE, in place of an earlier run of the same setting, number of jobs and
workers per job, and draws the plot next to it (FILE with the suffix ``.svg``). This command
draws the plot again from FILE alone, without running anything.

The plot has one panel per figure against the number of jobs (both axes logarithmic), jobs of
``--workers`` workers (default 2): a colour per operator, a marker and line style per setting.
The SVG is the same bytes for the same results (no date, fixed ids, text kept as text).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "side-by-side.json"
OPERATORS = ("ours", "upstream", "training-operator")
# Rounds of each operator `side_by_side.py` runs unless told otherwise.
DEFAULT_ROUNDS = 2
# Each panel: the figure's key in a run's means, its title.
PANELS = (
    ("jobs_per_second", "jobs/s (higher is better)"),
    ("cpu_ms_per_job", "CPU per job, ms (lower is better)"),
    ("peak_rss_mib", "peak RSS, MiB (lower is better)"),
)
# The other figures a run keeps, for the table of current results (bench/results_table.py).
KEPT = (
    "latency_p50_s",
    "latency_p99_s",
    "writes_per_job",
    "conflicts_per_job",
    "start_to_ready_s",
    "restart_start_to_ready_s",
    "resync_s",
    "pods_per_second",
    "pods_latency_p99_s",
    "operator_cpu_share",
)
COLOURS = {"ours": "#1f77b4", "upstream": "#ff7f0e", "training-operator": "#2ca02c"}
STYLES = (("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."), ("v", (0, (5, 1, 1, 1))))


def setting_label(
    threadiness: int,
    qps: float,
    burst: int,
    queue_rate_limit: float | None = None,
    queue_burst: int | None = None,
) -> str:
    """How the plot and the results name the flags both operators ran with."""
    if (threadiness, qps, burst, queue_rate_limit, queue_burst) == (2, 5, 10, None, None):
        return "upstream's defaults (threadiness 2, QPS 5, burst 10)"
    label = f"threadiness {threadiness}, QPS {qps:g}, burst {burst}"
    if queue_rate_limit is not None or queue_burst is not None:
        rate = "default" if queue_rate_limit is None else f"{queue_rate_limit:g}"
        label += f", queues {rate}/{'default' if queue_burst is None else queue_burst}"
    return label


def source_commit() -> str | None:
    """The commit the benchmark ran from (``-dirty`` with changes not committed)."""
    try:
        described = subprocess.run(
            ["git", "-C", str(REPO), "describe", "--always", "--dirty"],
            check=True,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return described.stdout.strip() or None


def summary(report: dict[str, Any], setting: str) -> dict[str, Any]:
    """One run of bench/side_by_side.py as the results keep it: each operator's means over its
    rounds (``None`` for a figure no round measured)."""
    run: dict[str, Any] = {
        "setting": setting,
        "jobs": report["jobs"],
        "workers_per_job": report["workers_per_job"],
        "rounds": report["rounds"],
        "api_version": report.get("api_version", "v2beta1"),
        "flags": report["flags"],
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": source_commit(),
        "machine": report["machine"],
    }
    for operator in OPERATORS:
        phases = [p for p in report["phases"] if p["operator"] == operator]
        if not phases:
            continue
        means = {}
        for key in [k for k, _ in PANELS] + list(KEPT):
            values = [p[key] for p in phases if math.isfinite(p.get(key, math.nan))]
            if values or key not in KEPT:
                means[key] = round(statistics.fmean(values), 3) if values else None
        run[operator] = means
    return run


def api_version(run: dict[str, Any]) -> str:
    """The version a run's jobs were written through (runs before it was kept: v2beta1)."""
    version: str = run.get("api_version", "v2beta1")
    return version


def same_point(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return api_version(a) == api_version(b) and all(
        a[key] == b[key] for key in ("setting", "jobs", "workers_per_job")
    )


def load(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    runs: list[dict[str, Any]] = json.loads(path.read_text())["runs"]
    return runs


def record(path: Path, run: dict[str, Any]) -> None:
    """Adds ``run`` to the results in ``path``, in place of a run of the same point."""
    runs = [r for r in load(path) if not same_point(r, run)] + [run]
    runs.sort(key=lambda r: (r["setting"], r["workers_per_job"], r["jobs"]))
    path.write_text(json.dumps({"runs": runs}, indent=2, ensure_ascii=False) + "\n")


def series(runs: Iterable[dict[str, Any]], workers: int) -> dict[str, list[dict[str, Any]]]:
    """The runs of jobs of ``workers`` workers by setting, each by number of jobs."""
    by_setting: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        if run["workers_per_job"] == workers:
            by_setting.setdefault(run["setting"], []).append(run)
    return {s: sorted(rs, key=lambda r: r["jobs"]) for s, rs in sorted(by_setting.items())}


def render(results: Path, out: Path, workers: int = 2) -> Path:
    """Draws the plot of ``results`` into ``out`` (SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, NullLocator

    def plain(value: float, _: object) -> str:
        return f"{value:g}"

    def plain_at_2_and_5(value: float, _: object) -> str:
        return f"{value:g}" if f"{value:e}"[0] in "25" else ""

    groups = series(load(results), workers)
    jobs = sorted({r["jobs"] for runs in groups.values() for r in runs})
    rc = {"svg.hashsalt": "side-by-side", "svg.fonttype": "none", "font.size": 9}
    with matplotlib.rc_context(rc):
        figure = Figure(figsize=(12, 4.4), layout="constrained")
        axes = figure.subplots(1, len(PANELS))
        for ax, (key, title) in zip(axes, PANELS, strict=True):
            for (marker, line), (_, runs) in zip(STYLES, groups.items(), strict=False):
                for operator in OPERATORS:
                    points = [
                        (r["jobs"], r[operator][key])
                        for r in runs
                        if (r.get(operator) or {}).get(key) is not None
                    ]
                    if points:
                        xs, ys = zip(*points, strict=True)
                        ax.plot(xs, ys, marker=marker, linestyle=line, color=COLOURS[operator])
            ax.set_title(title)
            ax.set_xlabel(f"jobs of {workers} workers")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xticks(jobs, [f"{n:,}" for n in jobs])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.yaxis.set_major_formatter(FuncFormatter(plain))
            ax.yaxis.set_minor_formatter(FuncFormatter(plain_at_2_and_5))
            ax.grid(True, which="both", linewidth=0.3)
        shown = [o for o in OPERATORS if any(r.get(o) for rs in groups.values() for r in rs)]
        handles = [Line2D([], [], color=COLOURS[o], linewidth=2, label=o) for o in shown]
        handles += [
            Line2D([], [], color="gray", marker=marker, linestyle=line, label=setting)
            for (marker, line), setting in zip(STYLES, groups, strict=False)
        ]
        figure.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)
        figure.suptitle(
            "This operator (ours) beside upstream's (kubeflow/mpi-operator v0.8.2, v2beta1 jobs) "
            "and training-operator v1.8.1 (v1 jobs): each point the mean of a run's rounds, "
            "bench/side_by_side.py"
        )
        figure.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, help="default: the results file with .svg")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(render(args.results, args.out or args.results.with_suffix(".svg"), args.workers))


if __name__ == "__main__":
    main()
