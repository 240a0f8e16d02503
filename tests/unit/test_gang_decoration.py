"""Pod templates handed to a gang scheduler: acceptance items 30 and 31 and kubeflow/mpi-operator's
TestDecoratePodTemplateSpec."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gang import GangScheduler
from gang.coscheduling import CoschedulingScheduler
from gang.volcano import VolcanoScheduler
from mpi_operator.api.models import MPIJob
from mpi_operator.testing.wrappers import MPIJobWrapper

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def user_job() -> MPIJob:
    return (
        MPIJobWrapper("test", "ns")
        .workers(2, cpu="1")
        .pod_spec_field("Launcher", "schedulerName", "foo")
        .pod_spec_field("Worker", "schedulerName", "foo")
        .template_label("Worker", "team", "ml")
        .template_annotation("Launcher", "note", "kept")
        .job()
    )


def template(job: MPIJob, replica_type: str) -> dict[str, Any]:
    replica = job.replica_spec(replica_type)
    assert replica is not None and replica.template is not None
    return replica.template


@pytest.mark.parametrize("replica_type", ["Launcher", "Worker"])
def test_volcano_places_every_template_in_the_group_by_annotation(replica_type: str) -> None:
    job = user_job()
    decorated = VolcanoScheduler().decorate_pod_template(template(job, replica_type), job)
    assert decorated["spec"]["schedulerName"] == "volcano"
    assert decorated["metadata"]["annotations"][GROUP_NAME_ANNOTATION] == "test"
    assert POD_GROUP_LABEL not in (decorated["metadata"].get("labels") or {})


@pytest.mark.parametrize(
    "scheduler_name",
    ["scheduler-plugins-scheduler", "scheduler-plugins", "default-scheduler"],
)
@pytest.mark.parametrize("replica_type", ["Launcher", "Worker"])
def test_coscheduling_places_every_template_in_the_group_by_label(
    scheduler_name: str, replica_type: str
) -> None:
    job = user_job()
    scheduler = CoschedulingScheduler(scheduler_name)
    decorated = scheduler.decorate_pod_template(template(job, replica_type), job)
    assert decorated["spec"]["schedulerName"] == scheduler_name
    assert decorated["metadata"]["labels"][POD_GROUP_LABEL] == "test"
    assert GROUP_NAME_ANNOTATION not in (decorated["metadata"].get("annotations") or {})


@pytest.mark.parametrize(
    ("scheduler", "expected"),
    [
        (
            VolcanoScheduler(),
            {
                "metadata": {"annotations": {GROUP_NAME_ANNOTATION: "test-mpijob"}},
                "spec": {"schedulerName": "volcano"},
            },
        ),
        (
            CoschedulingScheduler("default-scheduler"),
            {
                "metadata": {"labels": {POD_GROUP_LABEL: "test-mpijob"}},
                "spec": {"schedulerName": "default-scheduler"},
            },
        ),
    ],
    ids=["volcano", "coscheduling"],
)
def test_an_empty_template_gets_exactly_the_scheduler_and_group(
    scheduler: GangScheduler, expected: dict[str, Any]
) -> None:
    job = MPIJobWrapper("test-mpijob").job()
    assert scheduler.decorate_pod_template({}, job) == expected


@pytest.mark.parametrize(
    "scheduler",
    [VolcanoScheduler(), CoschedulingScheduler("scheduler-plugins-scheduler")],
    ids=["volcano", "coscheduling"],
)
def test_decoration_keeps_the_users_fields_and_never_changes_the_input(
    scheduler: GangScheduler,
) -> None:
    job = user_job()
    original = template(job, "Worker")
    before = copy.deepcopy(original)
    decorated = scheduler.decorate_pod_template(original, job)
    assert original == before
    assert decorated["metadata"]["labels"]["team"] == "ml"
    assert decorated["spec"]["containers"] == before["spec"]["containers"]
    decorated["spec"]["containers"][0]["name"] = "changed"
    assert original == before


def test_volcano_keeps_the_users_annotations() -> None:
    job = user_job()
    decorated = VolcanoScheduler().decorate_pod_template(template(job, "Launcher"), job)
    assert decorated["metadata"]["annotations"] == {
        "note": "kept",
        GROUP_NAME_ANNOTATION: "test",
    }
