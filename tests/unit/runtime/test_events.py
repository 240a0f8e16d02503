"""EventRecorder: Event bodies, client-go style aggregation, and never blocking the caller."""

from __future__ import annotations

import threading
from typing import Any

from mpi_operator.runtime.client import ApiError
from mpi_operator.runtime.clock import FakeClock
from mpi_operator.runtime.events import EVENTS_DROPPED, MAX_MESSAGE_LENGTH, EventRecorder

JOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "pi", "namespace": "team", "uid": "u-1", "resourceVersion": "7"},
}


class FakeSink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.created: list[dict[str, Any]] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.fail_patch: ApiError | None = None
        self.fail_create: Exception | None = None
        self.gate: threading.Event | None = None
        # The gate holds only this object's events when set, every event otherwise.
        self.gated_name: str | None = None
        self.entered = threading.Event()

    def create(self, namespace: str, event: dict[str, Any]) -> dict[str, Any]:
        if self.gated_name in (None, event["involvedObject"]["name"]):
            self.entered.set()
            if self.gate is not None:
                self.gate.wait(5)
        self.calls.append(("create", namespace, event["reason"]))
        if self.fail_create is not None:
            raise self.fail_create
        self.created.append(event)
        return event

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch", namespace, name))
        if self.fail_patch is not None:
            raise self.fail_patch
        self.patches.append((name, patch))
        return patch


def recorder(sink: FakeSink, clock: FakeClock | None = None, **kwargs: Any) -> EventRecorder:
    return EventRecorder(
        sink, "mpi-job-controller", host="node-1", clock=clock or FakeClock(), **kwargs
    )


def test_event_body() -> None:
    sink = FakeSink()
    rec = recorder(sink)
    rec.normal(JOB, "MPIJobCreated", "MPIJob team/pi is created.")
    assert rec.flush()
    (event,) = sink.created
    assert event["metadata"]["namespace"] == "team"
    assert event["metadata"]["name"].startswith("pi.")
    assert event["involvedObject"] == {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "namespace": "team",
        "name": "pi",
        "uid": "u-1",
        "resourceVersion": "7",
    }
    assert event["type"] == "Normal"
    assert event["reason"] == "MPIJobCreated"
    assert event["message"] == "MPIJob team/pi is created."
    assert event["source"] == {"component": "mpi-job-controller", "host": "node-1"}
    assert event["count"] == 1
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-01-01T00:00:00Z"
    rec.stop()


def test_repeated_event_is_patched_not_recreated() -> None:
    sink = FakeSink()
    clock = FakeClock()
    rec = recorder(sink, clock)
    rec.warning(JOB, "ErrResourceExists", "pod exists")
    rec.flush()
    clock.advance(30)
    rec.warning(JOB, "ErrResourceExists", "pod exists")
    rec.flush()
    clock.advance(30)
    rec.warning(JOB, "ErrResourceExists", "pod exists")
    rec.flush()
    name = sink.created[0]["metadata"]["name"]
    assert [call[0] for call in sink.calls] == ["create", "patch", "patch"]
    assert sink.patches == [
        (name, {"count": 2, "lastTimestamp": "2026-01-01T00:00:30Z", "message": "pod exists"}),
        (name, {"count": 3, "lastTimestamp": "2026-01-01T00:01:00Z", "message": "pod exists"}),
    ]
    rec.stop()


def test_different_message_type_or_object_creates_new_events() -> None:
    sink = FakeSink()
    rec = recorder(sink)
    other = {**JOB, "metadata": {**JOB["metadata"], "name": "other", "uid": "u-2"}}
    rec.warning(JOB, "R", "one")
    rec.warning(JOB, "R", "two")
    rec.normal(JOB, "R", "one")
    rec.warning(other, "R", "one")
    rec.flush()
    assert [call[0] for call in sink.calls] == ["create"] * 4
    assert len({event["metadata"]["name"] for event in sink.created}) == 4
    rec.stop()


def test_aggregation_window_is_ten_minutes() -> None:
    sink = FakeSink()
    clock = FakeClock()
    rec = recorder(sink, clock)
    rec.normal(JOB, "R", "m")
    rec.flush()
    clock.advance(600)
    rec.normal(JOB, "R", "m")  # exactly at the window: still aggregated
    rec.flush()
    clock.advance(601)
    rec.normal(JOB, "R", "m")
    rec.flush()
    assert [call[0] for call in sink.calls] == ["create", "patch", "create"]
    assert sink.created[1]["count"] == 1
    rec.stop()


def test_patch_of_vanished_event_creates_a_new_one() -> None:
    sink = FakeSink()
    rec = recorder(sink)
    rec.normal(JOB, "R", "m")
    rec.flush()
    sink.fail_patch = ApiError(404, "NotFound", "events not found")
    rec.normal(JOB, "R", "m")
    rec.flush()
    sink.fail_patch = None
    rec.normal(JOB, "R", "m")
    rec.flush()
    assert [call[0] for call in sink.calls] == ["create", "patch", "create", "patch"]
    assert sink.patches[0][0] == sink.created[1]["metadata"]["name"]
    rec.stop()


def test_long_messages_are_truncated_and_unknown_types_refused() -> None:
    sink = FakeSink()
    rec = recorder(sink)
    rec.event(JOB, "Critical", "R", "not a valid type")
    rec.normal(JOB, "R", "x" * 5000)
    rec.flush()
    (event,) = sink.created
    assert len(event["message"]) == MAX_MESSAGE_LENGTH
    rec.stop()


def test_sink_failures_never_reach_the_caller() -> None:
    sink = FakeSink()
    sink.fail_create = ApiError(403, "Forbidden", "events is forbidden")
    rec = recorder(sink)
    rec.normal(JOB, "R", "m")
    assert rec.flush()
    sink.fail_create = RuntimeError("bug in the sink")
    rec.normal(JOB, "R", "m2")
    assert rec.flush()
    # Still working afterwards.
    sink.fail_create = None
    rec.normal(JOB, "R", "m3")
    assert rec.flush()
    assert [event["message"] for event in sink.created] == ["m3"]
    rec.stop()


def test_transient_failures_are_retried() -> None:
    sink = FakeSink()
    failures = [ApiError(503, "ServiceUnavailable", "later"), ApiError(0, "Reset", "conn")]
    original = sink.create

    def flaky(namespace: str, event: dict[str, Any]) -> dict[str, Any]:
        if failures:
            raise failures.pop(0)
        return original(namespace, event)

    sink.create = flaky  # type: ignore[method-assign]
    rec = recorder(sink, FakeClock(auto_advance=True), attempts=3)
    rec.normal(JOB, "R", "m")
    assert rec.flush()
    assert len(sink.created) == 1
    rec.stop()


def test_full_queue_drops_instead_of_blocking() -> None:
    sink = FakeSink()
    sink.gate = threading.Event()  # the writer blocks on the first event
    rec = recorder(sink, queue_size=1)
    rec.normal(JOB, "R", "first")
    assert sink.entered.wait(5)  # the writer took it off the queue and is stuck writing
    rec.normal(JOB, "R", "second")  # fills the queue
    dropped_before = EVENTS_DROPPED.value()
    rec.normal(JOB, "R", "third")  # dropped, immediately
    assert rec.dropped == 1
    assert EVENTS_DROPPED.value() == dropped_before + 1
    sink.gate.set()
    assert rec.flush()
    assert [event["message"] for event in sink.created] == ["first", "second"]
    rec.stop()


def test_events_after_stop_are_ignored() -> None:
    sink = FakeSink()
    rec = recorder(sink)
    rec.normal(JOB, "R", "m")
    rec.stop()
    rec.normal(JOB, "R", "late")
    assert rec.flush(0.1)
    assert [event["message"] for event in sink.created] == ["m"]


def named(name: str) -> dict[str, Any]:
    return {**JOB, "metadata": {**JOB["metadata"], "name": name, "uid": f"u-{name}"}}


def test_a_slow_write_holds_up_only_the_events_of_objects_on_its_writer() -> None:
    sink = FakeSink()
    sink.gate = threading.Event()
    sink.gated_name = "a"
    rec = recorder(sink, writers=4)
    rec.normal(named("a"), "R", "stuck")
    assert sink.entered.wait(5)
    rec.normal(named("b"), "R", "through")  # "team/b" goes to another writer than "team/a"
    assert not rec.flush(0.5)
    assert [event["message"] for event in sink.created] == ["through"]
    sink.gate.set()
    assert rec.flush()
    assert sorted(event["message"] for event in sink.created) == ["stuck", "through"]
    rec.stop()


def test_one_objects_events_are_written_in_the_order_recorded() -> None:
    sink = FakeSink()
    rec = recorder(sink, writers=4)
    for step in range(20):
        for name in "abcdefgh":
            rec.normal(named(name), "R", f"{name}{step}")
    assert rec.flush()
    for name in "abcdefgh":
        written = [
            event["message"] for event in sink.created if event["involvedObject"]["name"] == name
        ]
        assert written == [f"{name}{step}" for step in range(20)]
    rec.stop()
