"""When a stored PodGroup must be updated, and the object sent to update it (the spec side of
acceptance item 35, and the Volcano default-queue churn upstream suffers)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gang import GangScheduler
from gang.coscheduling import CoschedulingScheduler
from gang.volcano import VolcanoScheduler
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.testing.wrappers import MPIJobWrapper

VOLCANO = VolcanoScheduler()
COSCHEDULING = CoschedulingScheduler("scheduler-plugins-scheduler")


def j(workers: int) -> MPIJobWrapper:
    return (
        MPIJobWrapper("test", "ns")
        .launcher(cpu="1", memory="2Gi")
        .workers(workers, cpu="10", memory="20Gi")
    )


def desired(scheduler: GangScheduler, job: MPIJobWrapper) -> dict[str, Any]:
    return scheduler.gang_objects(job.job(), ClusterFacts())[0]


def stored(pod_group: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """``pod_group`` as read back from the API server, with these spec fields replaced
    (None removes a field)."""
    result = copy.deepcopy(pod_group)
    result["metadata"].update(resourceVersion="42", uid="pg-uid", generation=3)
    result["status"] = {"phase": "Running", "running": 3}
    for key, value in spec.items():
        if value is None:
            result["spec"].pop(key, None)
        else:
            result["spec"][key] = value
    return result


@pytest.mark.parametrize(
    ("scheduler", "job", "stored_spec", "update"),
    [
        (VOLCANO, j(2), {}, False),
        (COSCHEDULING, j(2), {}, False),
        (VOLCANO, j(2), {"minResources": {"cpu": "21000m", "memory": "43008Mi"}}, False),
        (COSCHEDULING, j(2), {"minResources": {"cpu": 21, "memory": "0.041015625Ti"}}, False),
        (VOLCANO, j(2), {"minResources": {"cpu": "22", "memory": "42Gi"}}, True),
        (VOLCANO, j(2), {"queue": "default"}, False),
        (VOLCANO, j(2), {"queue": "project-x"}, True),
        (
            VOLCANO,
            j(2).scheduling_policy(queue="queue-for-mpijob", minAvailable=2),
            {"queue": "default", "minMember": 2},
            True,
        ),
        (VOLCANO, j(2).scheduling_policy(queue="default"), {"queue": None}, True),
        (VOLCANO, j(2), {"minMember": 2}, True),
        (
            VOLCANO,
            MPIJobWrapper().workers(2),
            {"minResources": None},
            True,
        ),
        (
            VOLCANO,
            MPIJobWrapper().workers(2).scheduling_policy(minAvailable=0),
            {"minResources": {}},
            True,
        ),
        (
            COSCHEDULING,
            MPIJobWrapper().workers(2),
            {"minResources": {}},
            False,
        ),
        (
            COSCHEDULING,
            j(2).scheduling_policy(scheduleTimeoutSeconds=10),
            {"scheduleTimeoutSeconds": 900},
            True,
        ),
        (COSCHEDULING, j(2), {"scheduleTimeoutSeconds": None}, True),
        (COSCHEDULING, j(2).scheduling_policy(minAvailable=0), {"minMember": 0}, False),
        (
            VOLCANO,
            j(2),
            {"minResources": {"cpu": "100", "memory": "512Gi"}},
            True,
        ),
        (VOLCANO, j(2), {"minTaskMember": {}}, False),
        (VOLCANO, j(2), {"minTaskMember": {"worker": 1}}, True),
    ],
    ids=[
        "volcano: the same spec",
        "coscheduling: the same spec",
        "volcano: quantities compare by value",
        "coscheduling: quantities compare by value, whatever the spelling",
        "volcano: a different amount",
        "volcano: the CRD's default queue equals no queue (no churn)",
        "volcano: a queue set by someone else is reset",
        "volcano: minAvailable and queue changed on the job (item 35)",
        "volcano: asking for the default queue by name when none is stored",
        "volcano: minMember changed",
        "volcano: a missing minResources differs from an empty one",
        "volcano: an empty minResources differs from a missing one",
        "coscheduling: an empty minResources equals a missing one",
        "coscheduling: scheduleTimeoutSeconds changed (item 35)",
        "coscheduling: a missing scheduleTimeoutSeconds differs from 0",
        "coscheduling: minMember 0 equals a missing one",
        "volcano: a removed policy minResources is replaced by the computed one (item 35)",
        "volcano: an empty map equals a missing one",
        "volcano: a field the operator never sets is reset",
    ],
)
def test_needs_update(
    scheduler: GangScheduler,
    job: MPIJobWrapper,
    stored_spec: dict[str, Any],
    update: bool,
) -> None:
    want = desired(scheduler, job)
    current = stored(want, **stored_spec)
    assert scheduler.needs_update(current, want) is update


@pytest.mark.parametrize("scheduler", [VOLCANO, COSCHEDULING], ids=["volcano", "coscheduling"])
def test_metadata_and_status_never_cause_an_update(scheduler: GangScheduler) -> None:
    want = desired(scheduler, j(2))
    current = stored(want)
    current["metadata"]["labels"] = {"added": "by-someone"}
    current["status"] = {"phase": "Pending"}
    assert scheduler.needs_update(current, want) is False


@pytest.mark.parametrize("scheduler", [VOLCANO, COSCHEDULING], ids=["volcano", "coscheduling"])
def test_the_update_is_the_stored_object_with_the_desired_spec(scheduler: GangScheduler) -> None:
    current = stored(desired(scheduler, j(2)), minMember=7)
    before = copy.deepcopy(current)
    want = desired(scheduler, j(2).scheduling_policy(minAvailable=2))

    updated = scheduler.updated_object(current, want)

    assert updated["spec"] == want["spec"]
    assert updated["metadata"] == current["metadata"]
    assert updated["status"] == current["status"]
    assert current == before
    updated["spec"]["minMember"] = 99
    updated["metadata"]["ownerReferences"][0]["name"] = "changed"
    assert current == before
    assert want["spec"]["minMember"] == 2
