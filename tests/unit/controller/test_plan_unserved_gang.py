"""Syncs while the gang scheduler's CRD is not installed: jobs that need gang objects wait with
a condition naming it and nothing written that would fail; every other job runs."""

from __future__ import annotations

import dataclasses

import pytest

from gang import gang_kinds_of, select_gang_scheduler
from mpi_operator.controller.plan import SyncContext, plan_sync
from mpi_operator.testing.view import MemoryView
from mpi_operator.testing.wrappers import MPIJobWrapper
from tests.unit.controller.test_plan import (
    CREATE_SHARED_OBJECTS,
    LATER,
    conditions,
    context,
    converge,
    status_of,
    worker_writes,
    writes,
)

COSCHEDULING = "scheduler-plugins-scheduler"


def without_crds(gang: str, now: str = LATER) -> SyncContext:
    """A sync under ``gang`` on a cluster that serves none of its kinds."""
    return dataclasses.replace(
        context(gang, now=now), unserved=gang_kinds_of(select_gang_scheduler(gang))
    )


@pytest.mark.parametrize(
    ("gang", "reason", "message"),
    [
        (
            "volcano",
            "PodGroupCRDMissing",
            "podgroups.scheduling.volcano.sh and queues.scheduling.volcano.sh are not served by "
            "the API server: install Volcano's CRDs. The gang's objects and pods are created "
            "once they are served.",
        ),
        (
            COSCHEDULING,
            "PodGroupCRDMissing",
            "podgroups.scheduling.x-k8s.io is not served by the API server: install "
            "scheduler-plugins's CRDs. The gang's objects and pods are created once it is "
            "served.",
        ),
    ],
    ids=["volcano", "coscheduling"],
)
def test_a_gang_job_without_its_crd_waits_with_a_condition_naming_it(
    gang: str, reason: str, message: str
) -> None:
    obj = MPIJobWrapper().workers(2).obj()
    plan = plan_sync(obj, MemoryView(), without_crds(gang))
    # Nothing of the gang's kind, nothing placed in the gang: no write that would fail.
    assert writes(plan) == [*CREATE_SHARED_OBJECTS, "update_status mpijobs/status test"]
    status = status_of(plan)
    assert ("GangScheduled", "False", reason) in conditions(status)
    [condition] = [c for c in status["conditions"] if c["type"] == "GangScheduled"]
    assert condition["message"] == message
    [event] = [e for e in plan.events if e.reason == reason]
    assert (event.type, event.message) == ("Warning", message)


def test_a_waiting_gang_job_is_told_once() -> None:
    view = MemoryView()
    obj = converge(MPIJobWrapper().workers(2).obj(), view, without_crds("volcano"))
    assert plan_sync(obj, view, without_crds("volcano")).actions == []


def test_a_job_that_needs_no_gang_objects_runs_without_the_crd() -> None:
    # Koordinator's gang is marks on the pods: no kind of its own to be served.
    assert gang_kinds_of(select_gang_scheduler("koord-scheduler")) == ()
    obj = MPIJobWrapper().workers(2).obj()
    plan = plan_sync(obj, MemoryView(), without_crds("koord-scheduler"))
    assert writes(plan) == [
        *CREATE_SHARED_OBJECTS,
        *worker_writes("create", 2),
        "create jobs test-launcher",
        "update_status mpijobs/status test",
    ]


def test_a_suspended_job_needs_no_gang_and_is_synced_as_if_the_crd_were_there() -> None:
    obj = MPIJobWrapper().workers(2).suspend().obj()
    plan = plan_sync(obj, MemoryView(), without_crds("volcano"))
    served = plan_sync(obj, MemoryView(), context("volcano", now=LATER))
    assert "create jobs test-launcher" in writes(plan)
    assert writes(plan) == writes(served)
    assert status_of(plan) == status_of(served)
    assert ("Suspended", "True", "MPIJobSuspended") in conditions(status_of(plan))


def test_a_resumed_job_does_not_start_its_launcher_while_the_crd_is_missing() -> None:
    view = MemoryView()
    obj = converge(MPIJobWrapper().workers(2).suspend().obj(), view, without_crds("volcano"))
    obj["spec"]["runPolicy"]["suspend"] = False
    plan = plan_sync(obj, view, without_crds("volcano"))
    assert writes(plan) == ["update_status mpijobs/status test"]
    assert ("GangScheduled", "False", "PodGroupCRDMissing") in conditions(status_of(plan))


@pytest.mark.parametrize("gang", ["volcano", COSCHEDULING])
def test_once_the_crd_is_served_the_gang_is_created_and_the_condition_goes(gang: str) -> None:
    view = MemoryView({"kind": "Queue", "metadata": {"name": "default"}})
    obj = converge(MPIJobWrapper().workers(2).obj(), view, without_crds(gang))
    plan = plan_sync(obj, view, context(gang, now=LATER))
    assert writes(plan) == [
        "create podgroups test",
        *worker_writes("create", 2),
        "create jobs test-launcher",
        "update_status mpijobs/status test",
    ]
    # The scheduler has not reported on the new PodGroup: no verdict, as for any new gang.
    assert all(c["type"] != "GangScheduled" for c in status_of(plan)["conditions"])


def test_a_running_job_whose_crd_goes_keeps_its_pods_and_says_so() -> None:
    view = MemoryView({"kind": "Queue", "metadata": {"name": "default"}})
    obj = converge(MPIJobWrapper().workers(2).obj(), view, context("volcano"))
    view.objects = {key: o for key, o in view.objects.items() if key[0] != "podgroups"}
    plan = plan_sync(obj, view, without_crds("volcano"))
    # Nothing deleted or created: the pods stay, only the status says why the gang waits.
    assert writes(plan) == ["update_status mpijobs/status test"]
    status = status_of(plan)
    assert ("GangScheduled", "False", "PodGroupCRDMissing") in conditions(status)
    assert status["replicaStatuses"] == obj["status"]["replicaStatuses"]
