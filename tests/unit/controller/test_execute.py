"""Carrying out a plan: order, stopping at the first failure, and the events a failure gives."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from mpi_operator.controller.execute import MAX_CONCURRENT_WRITES, WriteError, _rounds, execute
from mpi_operator.controller.plan import WORKER_PODS, Action, Plan
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


@pytest.mark.parametrize(("uid", "done"), [("u-1", 2), (None, 0)])
def test_a_conflict_on_a_uid_bound_delete_means_that_pod_is_gone(
    uid: str | None, done: int
) -> None:
    # The name now belongs to another pod (the replacement): the failed one is gone.
    body = {"preconditions": {"uid": uid}} if uid else None
    delete = Action("delete", "pods", "ns", "w0", body)
    plan = Plan([delete, action("update_status", "mpijobs/status", "j")])
    writer = RecordingWriter({"delete pods ns/w0": WriteError(409, "Precondition failed")})
    assert run(plan, writer)[2] == done


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


class InFlightWriter(RecordingWriter):
    """Holds each worker pod create until ``together`` of them are in flight at once."""

    def __init__(self, together: int, failures: dict[str, WriteError] | None = None) -> None:
        super().__init__(failures)
        self.barrier = threading.Barrier(together, timeout=30)
        self.lock = threading.Lock()

    def write(self, action: Action) -> dict[str, Any] | None:
        if action.resource == "pods":
            self.barrier.wait()  # raises BrokenBarrierError if the creates come one by one
        with self.lock:
            return super().write(action)


def workers_and_launcher(count: int) -> Plan:
    pods = [replace(action("create", "pods", f"w{i}"), batch=WORKER_PODS) for i in range(count)]
    return Plan([*pods, action("create", "jobs", "launcher")])


def test_worker_pods_go_out_together_and_the_launcher_after_them() -> None:
    writer = InFlightWriter(together=3)
    with ThreadPoolExecutor(8) as pool:
        outcome = execute(workers_and_launcher(3), writer, lambda event: None, pool)
    assert outcome.error is None and outcome.done == 4
    assert [a.name for a in writer.seen][-1] == "launcher"
    assert sorted(a.name for a, _ in outcome.written) == ["launcher", "w0", "w1", "w2"]


def test_a_failed_worker_create_in_a_round_stops_the_plan_before_the_launcher() -> None:
    failure = {"create pods ns/w1": WriteError(500, "quota")}
    writer = InFlightWriter(together=3, failures=failure)
    events: list[Event] = []
    with ThreadPoolExecutor(8) as pool:
        outcome = execute(workers_and_launcher(3), writer, events.append, pool)
    assert outcome.error is not None and "quota" in outcome.error
    assert "launcher" not in [a.name for a in writer.seen]
    assert sorted(a.name for a, _ in outcome.written) == ["w0", "w2"]
    assert [e.message for e in events] == ["worker pod created failed: quota"]


def test_rounds_hold_at_most_the_concurrency_bound_and_never_mix_batches() -> None:
    shared = [replace(action("create", "secrets", "s"), batch="shared objects")]
    plan = Plan([*shared, *workers_and_launcher(MAX_CONCURRENT_WRITES + 2).actions])
    sizes = [len(batch) for batch in _rounds(plan.actions, concurrent=True)]
    assert sizes == [1, MAX_CONCURRENT_WRITES, 2, 1]
    assert {len(batch) for batch in _rounds(plan.actions, concurrent=False)} == {1}
