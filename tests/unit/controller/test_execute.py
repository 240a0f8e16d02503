"""Carrying out a plan: order, stopping at the first failure, and the events a failure gives."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.controller.execute import WriteError, execute
from mpi_operator.controller.plan import Action, Plan
from mpi_operator.controller.status import Event


class RecordingWriter:
    """Answers each write with the body and a new resourceVersion; fails where told."""

    def __init__(self, failures: dict[str, WriteError] | None = None) -> None:
        self.failures = failures or {}
        self.seen: list[Action] = []
        self.version = 100

    def write(self, action: Action) -> dict[str, Any] | None:
        self.seen.append(action)
        failure = self.failures.get(action.describe())
        if failure is not None:
            raise failure
        self.version += 1
        body = dict(action.body or {"metadata": {}})
        return {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}


def action(verb: str, resource: str, name: str, version: str = "1") -> Action:
    body = {"metadata": {"name": name, "resourceVersion": version}}
    return Action(verb, resource, "ns", name, None if verb == "delete" else body)  # type: ignore[arg-type]


def run(plan: Plan, writer: RecordingWriter) -> tuple[list[Event], str | None, int]:
    events: list[Event] = []
    outcome = execute(plan, writer, events.append)
    return events, outcome.error, outcome.done


def test_writes_run_in_plan_order_and_all_succeed() -> None:
    plan = Plan([action("create", "services", "a"), action("create", "pods", "b")])
    writer = RecordingWriter()
    _, error, done = run(plan, writer)
    assert [a.name for a in writer.seen] == ["a", "b"]
    assert (error, done) == (None, 2)


def test_the_first_failed_write_stops_the_rest() -> None:
    plan = Plan([action("create", "pods", "w0"), action("create", "jobs", "launcher")])
    writer = RecordingWriter({"create pods ns/w0": WriteError(500, "boom")})
    events, error, done = run(plan, writer)
    assert [a.name for a in writer.seen] == ["w0"]
    assert done == 0 and error is not None and "boom" in error
    assert [(e.reason, e.message) for e in events] == [
        ("MPIJobFailed", "worker pod created failed: boom")
    ]


def test_already_exists_on_create_retries_quietly() -> None:
    plan = Plan([action("create", "pods", "w0")])
    writer = RecordingWriter({"create pods ns/w0": WriteError(409, "exists")})
    events, error, _ = run(plan, writer)
    assert events == [] and error is not None


def test_a_failure_with_a_reason_becomes_a_warning_event_of_that_reason() -> None:
    plan = Plan([action("create", "configmaps", "c")])
    failure = WriteError(409, 'Resource "c" of Kind "ConfigMap" already exists', reason="X")
    events, _, _ = run(plan, RecordingWriter({"create configmaps ns/c": failure}))
    assert [(e.type, e.reason) for e in events] == [("Warning", "X")]


def test_deleting_what_is_already_gone_counts_as_done() -> None:
    plan = Plan([action("delete", "pods", "w0"), action("update_status", "mpijobs/status", "j")])
    writer = RecordingWriter({"delete pods ns/w0": WriteError(404, "not found")})
    _, error, done = run(plan, writer)
    assert (error, done) == (None, 2)


def test_a_second_write_of_one_object_carries_the_version_the_first_returned() -> None:
    plan = Plan(
        [action("update_status", "jobs/status", "l", "7"), action("update", "jobs", "l", "7")]
    )
    writer = RecordingWriter()
    run(plan, writer)
    second = writer.seen[1].body
    assert second is not None and second["metadata"]["resourceVersion"] == "101"
    # The planned body itself is left as planned.
    assert plan.actions[1].body["metadata"]["resourceVersion"] == "7"  # type: ignore[index]


@pytest.mark.parametrize("error", ["cut short", None])
def test_events_are_announced_even_when_a_write_fails(error: str | None) -> None:
    plan = Plan([action("create", "services", "s")], events=[Event("Normal", "R", "m")])
    failures = {"create services ns/s": WriteError(500, error)} if error else {}
    events, _, _ = run(plan, RecordingWriter(failures))
    assert events[0] == Event("Normal", "R", "m")
