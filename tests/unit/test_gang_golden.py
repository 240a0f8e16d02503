"""Complete PodGroups, compared as text with tests/unit/golden/gang/*.yaml.

After an intended change, ``UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_gang_golden.py``
rewrites the files; review their diff like code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from gang import GangScheduler
from gang.coscheduling import CoschedulingScheduler
from gang.volcano import VolcanoScheduler
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.testing.wrappers import MPIJobWrapper

GOLDEN_DIR = Path(__file__).parent / "golden" / "gang"


def assert_matches_golden(name: str, obj: dict[str, Any]) -> None:
    text = yaml.safe_dump(obj, sort_keys=False)
    path = GOLDEN_DIR / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"{path} is missing: run with UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{path} differs: run with UPDATE_GOLDEN=1 and review"


def job() -> MPIJobWrapper:
    return (
        MPIJobWrapper("test", "ns")
        .annotation("scheduling.volcano.sh/queue-name", "project-x")
        .launcher(cpu="1", memory="2Gi")
        .priority_class("Launcher", "high")
        .workers(2, cpu="10", memory="20Gi")
    )


@pytest.mark.parametrize(
    ("scheduler", "golden"),
    [
        (VolcanoScheduler(), "volcano-podgroup.yaml"),
        (CoschedulingScheduler("scheduler-plugins-scheduler"), "coscheduling-podgroup.yaml"),
    ],
    ids=["volcano", "coscheduling"],
)
def test_pod_group_matches_golden(scheduler: GangScheduler, golden: str) -> None:
    facts = ClusterFacts(priority_classes={"high": 1000})
    assert_matches_golden(golden, scheduler.pod_group(job().job(), facts))
