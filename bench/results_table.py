"""The table of current results that opens docs/performance.md, from the results file.

    python bench/results_table.py [--results docs/side-by-side.json] [--doc docs/performance.md]

Every run ``bench/side_by_side.py --results FILE`` keeps (one per setting, number of jobs,
workers per job and API version, the latest) becomes one row: this operator's figure beside its
peer's in each column (upstream's for kubeflow.org/v2beta1 jobs, training-operator's for v1),
and the one command that measures the row again. The table replaces what stands between the
two markers in the document; ``--check`` only says whether it is current (exit 1 when not).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import side_by_side_plot

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "performance.md"
BEGIN = "<!-- results table: bench/results_table.py writes what follows -->"
END = "<!-- end of the results table -->"
# Each column: its title, the figure's key in a run's means, its format.
COLUMNS = (
    ("jobs/s", "jobs_per_second", "{:.2f}"),
    ("p99 submit→launcher (s)", "latency_p99_s", "{:.2f}"),
    ("writes/job", "writes_per_job", "{:.1f}"),
    ("409s/job", "conflicts_per_job", "{:.2f}"),
    ("CPU/job (ms)", "cpu_ms_per_job", "{:.1f}"),
    ("peak RSS (MiB)", "peak_rss_mib", "{:.0f}"),
    ("start→ready (s)", "start_to_ready_s", "{:.2f}"),
    ("restart: resync (s)", "resync_s", "{:.2f}"),
    ("pods/s", "pods_per_second", "{:.0f}"),
    ("p99 submit→all pods (s)", "pods_latency_p99_s", "{:.1f}"),
    ("operator's CPU share", "operator_cpu_share", "{:.0%}"),
)
DASH, TIMES = "\u2013", "\u00d7"
# The flags every run sets per phase, not part of its command.
PER_PHASE = ("--namespace=", "--lock-namespace=", "--monitoring-port=")


def peer(run: dict[str, Any]) -> str:
    return next((o for o in side_by_side_plot.OPERATORS[1:] if run.get(o)), "upstream")


def cell(run: dict[str, Any], key: str, fmt: str) -> str:
    """``ours / peer``, a dash for a figure that run did not measure."""
    figures = [(run.get(who) or {}).get(key) for who in ("ours", peer(run))]
    return " / ".join(DASH if f is None else fmt.format(f) for f in figures)


def command(run: dict[str, Any]) -> str:
    """The command that measures the run again, as many rounds as it had."""
    parts = ["bench/side_by_side.py", f"--jobs {run['jobs']}"]
    if run["workers_per_job"] != 2:
        parts.append(f"--workers {run['workers_per_job']}")
    # Runs kept before the file recorded rounds were one round each.
    if (rounds := run.get("rounds", 1)) != side_by_side_plot.DEFAULT_ROUNDS:
        parts.append(f"--rounds {rounds}")
    if peer(run) != "upstream":
        parts.append(f"--operators ours {peer(run)}")
    if side_by_side_plot.api_version(run) != "v2beta1":
        parts.append(f"--api-version {side_by_side_plot.api_version(run)}")
    parts += [flag.replace("=", " ", 1) for flag in run["flags"] if not flag.startswith(PER_PHASE)]
    if not any(key in (run.get("ours") or {}) for key in ("resync_s", "pods_per_second")):
        return " ".join(parts)  # kept before restarts and pods were measured
    if (run.get("ours") or {}).get("resync_s") is None:
        parts.append("--no-restart")
    return " ".join([*parts, "--ceiling-clients", "--results docs/side-by-side.json"])


def table(runs: list[dict[str, Any]]) -> str:
    header = [f"jobs {TIMES} workers", "API", "peer", "setting", *[c[0] for c in COLUMNS]]
    header += ["date", "command"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    ordered = sorted(
        runs,
        key=lambda r: (
            side_by_side_plot.api_version(r) != "v2beta1",
            r["workers_per_job"],
            r["jobs"],
            r["setting"],
        ),
    )
    for run in ordered:
        cells = [
            f"{run['jobs']:,} {TIMES} {run['workers_per_job']:,}",
            side_by_side_plot.api_version(run),
            peer(run),
            run["setting"],
            *[cell(run, key, fmt) for _, key, fmt in COLUMNS],
            run["date"],
            f"`{command(run)}`",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rewrite(doc: str, generated: str) -> str:
    """``doc`` with ``generated`` between the markers."""
    head, found, rest = doc.partition(BEGIN)
    _, closed, tail = rest.partition(END)
    if not (found and closed):
        raise SystemExit(f"the document lacks the markers {BEGIN!r} and {END!r}")
    return f"{head}{BEGIN}\n{generated}\n{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=side_by_side_plot.RESULTS)
    parser.add_argument("--doc", type=Path, default=DOC)
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is not current")
    args = parser.parse_args()
    doc = args.doc.read_text()
    current = rewrite(doc, table(side_by_side_plot.load(args.results)))
    if args.check:
        if current != doc:
            print(f"{args.doc} does not hold the table of {args.results}: run {__file__}")
            return 1
        return 0
    args.doc.write_text(current)
    return 0


if __name__ == "__main__":
    sys.exit(main())
