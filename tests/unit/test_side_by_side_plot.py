"""The side-by-side benchmark's kept results and their plot (bench/side_by_side_plot.py)."""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


@pytest.fixture(scope="module")
def plot() -> ModuleType:
    # The benchmarks import their siblings by plain name, as scripts run from bench/ do.
    if str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))
    return importlib.import_module("side_by_side_plot")


def run(setting: str, jobs: int, workers: int = 2, cpu: float = 10.0) -> dict[str, Any]:
    figures = {"jobs_per_second": 5.0, "cpu_ms_per_job": cpu, "peak_rss_mib": 80.0}
    return {
        "setting": setting,
        "jobs": jobs,
        "workers_per_job": workers,
        "ours": figures,
        "upstream": {**figures, "jobs_per_second": None},
    }


def test_a_run_replaces_the_earlier_run_of_the_same_point(plot: ModuleType, tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    plot.record(results, run("a", 200, cpu=1.0))
    plot.record(results, run("a", 1000))
    plot.record(results, run("a", 200, workers=200))
    plot.record(results, run("a", 200, cpu=2.0))
    kept = json.loads(results.read_text())["runs"]
    assert [(r["jobs"], r["workers_per_job"], r["ours"]["cpu_ms_per_job"]) for r in kept] == [
        (200, 2, 2.0),
        (1000, 2, 10.0),
        (200, 200, 10.0),
    ]


def test_a_run_keeps_each_operators_means_over_its_rounds(plot: ModuleType) -> None:
    def phase(operator: str, jobs_per_second: float, cpu: float) -> dict[str, Any]:
        return {
            "operator": operator,
            "jobs_per_second": jobs_per_second,
            "cpu_ms_per_job": cpu,
            "peak_rss_mib": 100.0,
        }

    report = {
        "jobs": 200,
        "workers_per_job": 2,
        "rounds": 2,
        "flags": ["--threadiness=16"],
        "machine": "2 cores",
        "phases": [
            phase("ours", 30.0, 10.0),
            phase("upstream", math.nan, 20.0),
            phase("upstream", math.nan, 30.0),
            phase("ours", 20.0, 11.0),
        ],
    }
    kept = plot.summary(report, "threadiness 16")
    assert kept["ours"] == {"jobs_per_second": 25.0, "cpu_ms_per_job": 10.5, "peak_rss_mib": 100.0}
    assert kept["upstream"] == {
        "jobs_per_second": None,
        "cpu_ms_per_job": 25.0,
        "peak_rss_mib": 100.0,
    }
    assert (kept["setting"], kept["jobs"], kept["rounds"]) == ("threadiness 16", 200, 2)
    json.dumps(kept, allow_nan=False)


def test_settings_are_named_by_their_flags(plot: ModuleType) -> None:
    assert plot.setting_label(2, 5, 10).startswith("upstream's defaults")
    assert plot.setting_label(16, 1000, 2000) == "threadiness 16, QPS 1000, burst 2000"
    assert plot.setting_label(16, 1000, 2000, 1000.0, 2000) == (
        "threadiness 16, QPS 1000, burst 2000, queues 1000/2000"
    )


def test_the_plot_is_the_same_bytes_for_the_same_results(plot: ModuleType, tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    for each in (run("first", 200), run("first", 1000), run("second", 200), run("wide", 50, 200)):
        plot.record(results, each)
    one, two = tmp_path / "one.svg", tmp_path / "two.svg"
    plot.render(results, one)
    plot.render(results, two)
    svg = one.read_text()
    assert svg == two.read_text()
    assert "first" in svg and "second" in svg and "wide" not in svg
    assert "<dc:date>" not in svg


def test_the_committed_plot_is_drawn_from_the_committed_results(
    plot: ModuleType, tmp_path: Path
) -> None:
    drawn = plot.render(DOCS / "side-by-side.json", tmp_path / "side-by-side.svg")
    assert drawn.read_bytes() == (DOCS / "side-by-side.svg").read_bytes(), (
        "docs/side-by-side.svg is not the plot of docs/side-by-side.json: "
        "run .venv/bin/python bench/side_by_side_plot.py"
    )


@pytest.fixture(scope="module")
def results_table(plot: ModuleType) -> ModuleType:
    return importlib.import_module("results_table")


def test_a_v1_run_is_a_point_of_its_own_beside_training_operator(
    plot: ModuleType, results_table: ModuleType, tmp_path: Path
) -> None:
    results = tmp_path / "results.json"
    v2 = {**run("a", 100), "date": "today", "flags": []}
    v1 = {**run("a", 100), "api_version": "v1", "date": "today"}
    v1["flags"] = ["--namespace=<ns>", "--threadiness=1"]
    v1["training-operator"] = v1.pop("upstream")
    plot.record(results, v2)
    plot.record(results, v1)
    kept = json.loads(results.read_text())["runs"]
    assert [plot.api_version(r) for r in kept] == ["v2beta1", "v1"]
    row = results_table.table(kept).splitlines()[-1]
    assert "| v1 | training-operator |" in row
    assert f"| 5.00 / {results_table.DASH} |" in row  # its jobs/s was not measured
    # A run kept without its rounds was one round: the bench runs two unless told.
    assert "`bench/side_by_side.py --jobs 100 --rounds 1 --operators ours training-operator" in row
    assert "--api-version v1 --threadiness 1`" in row
    assert "--rounds" not in results_table.command({**v1, "rounds": plot.DEFAULT_ROUNDS})


def test_performance_md_opens_with_the_table_of_the_committed_results(
    results_table: ModuleType,
) -> None:
    doc = (DOCS / "performance.md").read_text()
    current = results_table.rewrite(
        doc, results_table.table(results_table.side_by_side_plot.load(DOCS / "side-by-side.json"))
    )
    assert current == doc, "run .venv/bin/python bench/results_table.py"
    assert doc.index(results_table.BEGIN) < doc.index("## Method")
