"""The job-time histograms: read from the job's own timestamps, once per recorded transition."""

from __future__ import annotations

import platform
from typing import Any

import pytest
from prometheus_client import REGISTRY, generate_latest

from mpi_operator import __version__
from mpi_operator.controller.execute import WriteError
from mpi_operator.controller.plan import Action
from mpi_operator.operator import metrics
from mpi_operator.operator.caches import Caches, build_caches
from mpi_operator.operator.reconciler import MPIJobReconciler, SyncError
from mpi_operator.testing.wrappers import MPIJobWrapper, owner_references
from tests.unit.process.test_caches import offline_client
from tests.unit.process.test_reconciler import CountingWriter, Recorder

RUNNING = "mpi_operator_jobs_creation_to_running_seconds"
DURATION = "mpi_operator_jobs_duration_seconds"

CREATED = "2026-01-01T00:00:00Z"
STARTED = "2026-01-01T00:00:01Z"
LAUNCHER_STARTED = "2026-01-01T00:00:30Z"  # 30 s after creation
LAUNCHER_DONE = "2026-01-01T00:10:01Z"  # 600 s after STARTED
SYNCED = "2026-01-01T01:00:01Z"  # 3600 s after STARTED


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class Histogram:
    """One histogram's count, sum and chosen buckets, to compare before and after."""

    def __init__(self, name: str, buckets: tuple[str, ...], **labels: str) -> None:
        self.name, self.buckets, self.labels = name, buckets, labels
        self.start = self.read()

    def read(self) -> dict[str, float]:
        values = {
            "count": sample(f"{self.name}_count", **self.labels),
            "sum": sample(f"{self.name}_sum", **self.labels),
        }
        for le in self.buckets:
            values[f"le={le}"] = sample(f"{self.name}_bucket", **self.labels, le=le)
        return values

    def added(self) -> dict[str, float]:
        return {key: value - self.start[key] for key, value in self.read().items()}


NOTHING = {"count": 0.0, "sum": 0.0}


def cached_job(status: dict[str, Any] | None = None) -> dict[str, Any]:
    job = MPIJobWrapper("pi").workers(1).metadata_field("creationTimestamp", CREATED).obj()
    job["metadata"]["resourceVersion"] = "10"
    if status is not None:
        job["status"] = status
    return job


def started(start_time: str = STARTED) -> dict[str, Any]:
    """The status of a job an earlier sync created and started."""
    return {
        "conditions": [
            {
                "type": "Created",
                "status": "True",
                "reason": "MPIJobCreated",
                "message": "MPIJob ns/pi is created.",
                "lastUpdateTime": CREATED,
                "lastTransitionTime": CREATED,
            }
        ],
        "startTime": start_time,
    }


def finished_launcher(condition: str) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": condition, "status": "True", "reason": "BackoffLimitExceeded"}],
        "startTime": LAUNCHER_STARTED,
    }
    if condition == "Complete":
        status["completionTime"] = LAUNCHER_DONE
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "pi-launcher",
            "namespace": "ns",
            "uid": "launcher-uid",
            "resourceVersion": "5",
            "ownerReferences": owner_references("pi"),
        },
        "spec": {},
        "status": status,
    }


class StatusRefusingWriter(CountingWriter):
    def write(self, action: Action) -> dict[str, Any] | None:
        if action.verb == "update_status":
            raise WriteError(500, "etcdserver: request timed out")
        return super().write(action)


def operator(
    job: dict[str, Any], launcher: dict[str, Any], writer: CountingWriter
) -> tuple[Caches, MPIJobReconciler]:
    caches = build_caches(offline_client(), None, None)
    caches.mpijobs.store.upsert(job)
    caches.children["jobs"].store.upsert(launcher)
    reconciler = MPIJobReconciler(caches, writer, Recorder(), None, now=lambda: SYNCED)  # type: ignore[arg-type]
    return caches, reconciler


def show_status_write(caches: Caches, writer: CountingWriter) -> None:
    """The job's cache catches up with the status the API server answered."""
    [answer] = [body for resource, body in writer.answers if resource == "mpijobs/status"]
    writer.answers.clear()
    job = caches.mpijobs.store.get("ns/pi")
    assert job is not None
    metadata = {**job["metadata"], "resourceVersion": answer["metadata"]["resourceVersion"]}
    caches.mpijobs.store.upsert({**job, "metadata": metadata, "status": answer["status"]})


def test_a_job_seen_running_then_succeeded_is_observed_once_each_from_its_own_timestamps() -> None:
    running = Histogram(RUNNING, ("10.0", "30.0"))
    succeeded = Histogram(DURATION, ("300.0", "600.0"), outcome="succeeded")
    failed = Histogram(DURATION, (), outcome="failed")
    writer = CountingWriter()
    caches, reconciler = operator(cached_job(started()), finished_launcher("Complete"), writer)

    # A launcher that finished between two syncs: Running is recorded first, dated when the
    # launcher started, not when the operator noticed.
    assert reconciler("ns/pi") is None
    assert running.added() == {"count": 1.0, "sum": 30.0, "le=10.0": 0.0, "le=30.0": 1.0}
    assert succeeded.added()["count"] == 0.0
    show_status_write(caches, writer)

    assert reconciler("ns/pi") is None
    assert succeeded.added() == {"count": 1.0, "sum": 600.0, "le=300.0": 0.0, "le=600.0": 1.0}
    assert running.added()["count"] == 1.0
    show_status_write(caches, writer)

    # The finished job syncs again (a resync, a restarted operator): nothing is new.
    writes = len(writer.writes)
    assert reconciler("ns/pi") is None
    assert running.added()["count"] == 1.0 and succeeded.added()["count"] == 1.0
    assert failed.added() == NOTHING
    assert len(writer.writes) == writes


def test_a_failed_launcher_is_observed_under_failed_from_start_to_completion() -> None:
    failed = Histogram(DURATION, ("1800.0", "3600.0"), outcome="failed")
    succeeded = Histogram(DURATION, (), outcome="succeeded")
    writer = CountingWriter()
    caches, reconciler = operator(cached_job(started()), finished_launcher("Failed"), writer)
    assert reconciler("ns/pi") is None
    stored = [body["status"] for resource, body in writer.answers if resource == "mpijobs/status"]
    assert stored[0]["completionTime"] == SYNCED
    assert failed.added() == {"count": 1.0, "sum": 3600.0, "le=1800.0": 0.0, "le=3600.0": 1.0}
    assert succeeded.added() == NOTHING
    show_status_write(caches, writer)
    assert reconciler("ns/pi") is None
    assert failed.added()["count"] == 1.0


def test_nothing_is_observed_until_the_status_write_lands() -> None:
    running = Histogram(RUNNING, ())
    succeeded = Histogram(DURATION, (), outcome="succeeded")
    job, launcher = cached_job(started()), finished_launcher("Complete")
    _, refused = operator(job, launcher, StatusRefusingWriter())
    for _ in range(2):  # retried with backoff, refused again
        with pytest.raises(SyncError):
            refused("ns/pi")
    assert running.added() == NOTHING and succeeded.added() == NOTHING
    # The write goes through on a later retry, after an operator restart say.
    _, reconciler = operator(job, launcher, CountingWriter())
    assert reconciler("ns/pi") is None
    assert running.added() == {"count": 1.0, "sum": 30.0}


def test_a_start_time_that_is_no_time_loses_the_observation_not_the_sync() -> None:
    failed = Histogram(DURATION, (), outcome="failed")
    writer = CountingWriter()
    _, reconciler = operator(cached_job(started("soon")), finished_launcher("Failed"), writer)
    assert reconciler("ns/pi") is None
    assert "update_status mpijobs/status pi" in writer.writes
    assert failed.added() == NOTHING


def with_running(since: Any) -> dict[str, Any]:
    status = started()
    running = {"type": "Running", "status": "True", "reason": "MPIJobRunning"}
    status["conditions"].append({**running, "lastTransitionTime": since})
    return status


def with_outcome(start: Any, completion: Any) -> dict[str, Any]:
    return {
        "conditions": [{"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded"}],
        "startTime": start,
        "completionTime": completion,
    }


@pytest.mark.parametrize(
    ("created", "since"),
    [
        (CREATED, "half past nine"),
        ("", LAUNCHER_STARTED),
        (CREATED, None),
        (CREATED, 1767225600),
        (CREATED, "2026-01-01T00:00:30"),  # no zone
        (CREATED, "2026-02-30T00:00:00Z"),
        (LAUNCHER_STARTED, CREATED),  # before the job existed
    ],
)
def test_a_running_transition_with_unusable_times_is_skipped(created: Any, since: Any) -> None:
    running = Histogram(RUNNING, ())
    metrics.observe_transitions({"creationTimestamp": created}, started(), with_running(since))
    assert running.added() == NOTHING


@pytest.mark.parametrize(
    ("start", "completion"),
    [
        (None, LAUNCHER_DONE),
        (STARTED, "tomorrow"),
        (["2026"], LAUNCHER_DONE),
        (LAUNCHER_DONE, STARTED),  # finished before it started
    ],
)
def test_a_finished_transition_with_unusable_times_is_skipped(start: Any, completion: Any) -> None:
    succeeded = Histogram(DURATION, (), outcome="succeeded")
    metrics.observe_transitions(
        {"creationTimestamp": CREATED}, started(), with_outcome(start, completion)
    )
    assert succeeded.added() == NOTHING


def test_usable_times_in_the_same_statuses_are_observed() -> None:
    """The skipped cases above fail only on their times: these, with good ones, count."""
    running = Histogram(RUNNING, ())
    succeeded = Histogram(DURATION, (), outcome="succeeded")
    metadata = {"creationTimestamp": CREATED}
    metrics.observe_transitions(metadata, started(), with_running("2026-01-01T00:00:30.5+00:00"))
    metrics.observe_transitions(metadata, started(), with_outcome(STARTED, LAUNCHER_DONE))
    assert running.added() == {"count": 1.0, "sum": 30.5}
    assert succeeded.added() == {"count": 1.0, "sum": 600.0}


def test_a_status_that_already_showed_the_transition_is_not_observed_again() -> None:
    running = Histogram(RUNNING, ())
    succeeded = Histogram(DURATION, (), outcome="succeeded")
    metadata = {"creationTimestamp": CREATED}
    metrics.observe_transitions(
        metadata, with_running(LAUNCHER_STARTED), with_running(LAUNCHER_STARTED)
    )
    done = with_outcome(STARTED, LAUNCHER_DONE)
    metrics.observe_transitions(metadata, done, done)
    assert running.added() == NOTHING and succeeded.added() == NOTHING


def test_no_created_series_is_exposed_as_no_go_operator_exposes_one() -> None:
    metrics.JOBS_CREATED.inc(0)
    exposed = generate_latest(REGISTRY).decode()
    assert "mpi_operator_jobs_created_total" in exposed
    assert [line for line in exposed.splitlines() if "_created " in line] == []


def test_build_info_names_the_version_and_python_once() -> None:
    exposition = generate_latest(REGISTRY).decode()
    lines = [line for line in exposition.splitlines() if line.startswith("mpi_operator_build_info")]
    version, python = __version__, platform.python_version()
    assert lines == [f'mpi_operator_build_info{{python="{python}",version="{version}"}} 1.0']
    assert "# TYPE mpi_operator_build_info gauge" in exposition
    assert "mpi_operator_build_info_created" not in exposition
