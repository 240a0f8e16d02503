"""A fourth gang scheduler, written as docs/gang-scheduling.md's checklist says and registered
for this test alone: rendered and synced with no change outside ``gang/`` and this file.

It is the core alone: its gang is one annotation on the pods, and its verdict is read from the
pods' ``PodScheduled`` conditions.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, Final

import pytest

import gang
from gang import GangState, StoredGang, gang_objects_of, select_gang_scheduler
from mpi_operator import sdk
from mpi_operator.api.models import MPIJob
from mpi_operator.controller.plan import plan_sync
from mpi_operator.testing.wrappers import MPIJobWrapper
from tests.unit.controller.test_plan import cluster_view, context, converge, status_of, writes

NAME: Final = "badge-scheduler"
BADGE: Final = "badge.example/gang"


class BadgeScheduler:
    @property
    def scheduler_name(self) -> str:
        return NAME

    def decorate_pod_template(self, template: dict[str, Any], job: MPIJob) -> dict[str, Any]:
        marked = copy.deepcopy(template)
        marked.setdefault("metadata", {}).setdefault("annotations", {})[BADGE] = job.name
        marked.setdefault("spec", {})["schedulerName"] = NAME
        return marked

    def gang_state(self, stored: StoredGang) -> GangState:
        scheduled = [
            cond.get("status") == "True"
            for pod in stored.pods
            for cond in (pod.get("status") or {}).get("conditions") or []
            if cond.get("type") == "PodScheduled"
        ]
        if scheduled and all(scheduled):
            return GangState(True, "BadgesPlaced", "Every pod wearing the badge is placed.")
        return GangState(None, "BadgesUnseen", "")


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(gang._STRATEGIES, NAME, lambda name: BadgeScheduler())
    yield


def test_it_is_selected_by_its_name_and_needs_no_objects() -> None:
    scheduler = select_gang_scheduler(NAME)
    assert isinstance(scheduler, BadgeScheduler)
    assert gang_objects_of(scheduler) is None


def test_render_gives_every_pod_the_badge_and_the_scheduler() -> None:
    job = MPIJobWrapper("pi").workers(2).obj()
    objects = list(sdk.render(job, gang_scheduling=NAME))
    assert [o["kind"] for o in objects] == ["Service", "ConfigMap", "Secret", "Pod", "Pod", "Job"]
    pods = [o for o in objects if o["kind"] == "Pod"] + [objects[-1]["spec"]["template"]]
    assert all(p["metadata"]["annotations"][BADGE] == "pi" for p in pods)
    assert all(p["spec"]["schedulerName"] == NAME for p in pods)


def test_a_sync_creates_the_pods_and_reports_the_gang_once_they_are_placed() -> None:
    view = cluster_view()
    job = MPIJobWrapper().workers(2).obj()
    first = plan_sync(job, view, context(NAME))
    assert [w for w in writes(first) if w.split()[1] in ("pods", "jobs")] == [
        "create pods test-worker-0",
        "create pods test-worker-1",
        "create jobs test-launcher",
    ]
    job = converge(job, view, context(NAME))
    for (resource, _, _), pod in view.objects.items():
        if resource == "pods":
            pod["status"] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}
    status = status_of(plan_sync(job, view, context(NAME)))
    [placed] = [c for c in status["conditions"] if c["type"] == "GangScheduled"]
    assert (placed["status"], placed["reason"]) == ("True", "BadgesPlaced")
