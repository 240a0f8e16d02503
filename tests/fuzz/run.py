"""The long fuzz run: ``make fuzz`` (``python -m fuzz.run`` with ``tests`` on the path).

Draws ``--examples`` manifests from ``jobs.examples()`` with a fixed ``--seed``, runs each
through render and the operator's sync with a per-example time limit, and prints the counts by
category and path. Failing examples are written to ``--out`` (one YAML file each, with the
flags and what went wrong) so they can be replayed with ``mpi-operator render``. Exits 1 on
any traceback, hang or accepted-but-invalid output.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings

from .harness import CATEGORIES, FAILURES, Tally, run_example
from .jobs import Example, examples


def main() -> int:
    parser = argparse.ArgumentParser(prog="make fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per example")
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"))
    args = parser.parse_args()

    tally = Tally()
    drawn = 0

    @seed(args.seed)
    @settings(
        max_examples=args.examples,
        database=None,
        deadline=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )
    @given(examples())
    def each(example: Example) -> None:
        nonlocal drawn
        drawn += 1
        for outcome in run_example(example, args.time_limit):
            tally.add(example, outcome)
        if drawn % 1000 == 0:
            print(f"  {drawn} examples ...", file=sys.stderr, flush=True)

    started = time.monotonic()
    each()
    elapsed = time.monotonic() - started

    print(
        f"seed {args.seed}: {drawn} examples, {sum(tally.counts.values())} runs "
        f"(render and operator) in {elapsed:.0f} s"
    )
    print(f"{'category':<22} {'render':>8} {'operator':>9} {'total':>8}")
    for category in CATEGORIES:
        render = tally.by_path[("render", category)]
        operator = tally.by_path[("operator", category)]
        print(f"{category:<22} {render:>8} {operator:>9} {render + operator:>8}")
    if tally.failures:
        args.out.mkdir(parents=True, exist_ok=True)
        for number, (example, outcome) in enumerate(tally.failures):
            record = {
                "path": outcome.path,
                "category": outcome.category,
                "detail": outcome.detail,
                "flags": example.flags(),
                "manifest": example.text,
            }
            (args.out / f"{number:04}.yaml").write_text(yaml.safe_dump(record, sort_keys=False))
        print(f"{len(tally.failures)} failing runs written to {args.out}/")
    return 1 if any(tally.counts[c] for c in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())
