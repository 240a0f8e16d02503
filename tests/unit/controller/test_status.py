"""Status computation and condition semantics, as users of kubeflow/mpi-operator see them."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.controller.conditions import set_condition
from mpi_operator.controller.failures import WorkerFailures
from mpi_operator.controller.status import (
    WORKER_COUNTS_HOLD,
    Event,
    Observed,
    compute_status,
    mark_created,
    worker_counts_hold,
)
from mpi_operator.testing.wrappers import MPIJobWrapper

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:01:00Z"
T2 = "2026-01-01T00:02:00Z"


def pod(name: str, phase: str, created: str = T0, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "status": {"phase": phase, **status},
    }


def launcher_job(
    condition: str | None = None, cond: dict[str, str] | None = None, **status: Any
) -> dict[str, Any]:
    if condition:
        status["conditions"] = [{"type": condition, "status": "True", **(cond or {})}]
    return {"metadata": {"name": "test-launcher"}, "status": status}


def workers(*phases: str) -> list[dict[str, Any]]:
    return [pod(f"test-worker-{i}", phase) for i, phase in enumerate(phases)]


def summary(conditions: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(cond["type"], cond["status"], cond["reason"]) for cond in conditions]


JOB = MPIJobWrapper().workers(2).job()
CREATED = {
    "conditions": [
        {
            "type": "Created",
            "status": "True",
            "reason": "MPIJobCreated",
            "message": "MPIJob ns/test is created.",
            "lastUpdateTime": T0,
            "lastTransitionTime": T0,
        }
    ]
}


class TestSetCondition:
    def test_same_status_and_reason_is_a_no_op_even_with_a_new_message(self) -> None:
        conditions = [dict(CREATED["conditions"][0])]
        assert not set_condition(conditions, "Created", "True", "MPIJobCreated", "other", T1)
        assert conditions == CREATED["conditions"]

    def test_new_reason_keeps_transition_time_and_moves_to_the_end(self) -> None:
        conditions: list[dict[str, Any]] = []
        set_condition(conditions, "Running", "True", "A", "m", T0)
        set_condition(conditions, "Created", "True", "C", "m", T0)
        assert set_condition(conditions, "Running", "True", "B", "m2", T1)
        assert [c["type"] for c in conditions] == ["Created", "Running"]
        assert conditions[-1]["lastTransitionTime"] == T0
        assert conditions[-1]["lastUpdateTime"] == T1

    def test_terminal_condition_turns_running_and_failed_false(self) -> None:
        conditions: list[dict[str, Any]] = []
        set_condition(conditions, "Running", "True", "MPIJobRunning", "m", T0)
        set_condition(conditions, "Failed", "True", "MPIJobEvicted", "m", T0)
        set_condition(conditions, "Succeeded", "True", "MPIJobSucceeded", "m", T1)
        assert summary(conditions) == [
            ("Running", "False", "MPIJobRunning"),
            ("Failed", "False", "MPIJobEvicted"),
            ("Succeeded", "True", "MPIJobSucceeded"),
        ]

    def test_restarting_replaces_running(self) -> None:
        conditions: list[dict[str, Any]] = []
        set_condition(conditions, "Running", "True", "R", "m", T0)
        set_condition(conditions, "Restarting", "True", "X", "m", T1)
        assert [c["type"] for c in conditions] == ["Restarting"]


def test_first_sync_adds_created_once() -> None:
    status: dict[str, Any] = {}
    event = mark_created(JOB, status, T0)
    assert event == Event("Normal", "MPIJobCreated", "MPIJob ns/test is created.")
    assert summary(status["conditions"]) == [("Created", "True", "MPIJobCreated")]
    assert mark_created(JOB, status, T1) is None


@pytest.mark.parametrize(
    ("seen", "conditions", "replicas", "events"),
    [
        (
            Observed(launcher=None, launcher_pods=[], workers=workers(), suspended=False),
            [("Created", "True", "MPIJobCreated")],
            {"Worker": {}},
            [],
        ),
        (
            Observed(
                launcher=launcher_job(),
                launcher_pods=[pod("l", "Running")],
                workers=workers("Pending", "Pending"),
                suspended=False,
            ),
            [("Created", "True", "MPIJobCreated")],
            {"Launcher": {"active": 1}, "Worker": {}},
            [],
        ),
        (
            Observed(
                launcher=launcher_job(),
                launcher_pods=[pod("l", "Running")],
                workers=workers("Running", "Running"),
                suspended=False,
            ),
            [("Created", "True", "MPIJobCreated"), ("Running", "True", "MPIJobRunning")],
            {"Launcher": {"active": 1}, "Worker": {"active": 2}},
            [Event("Normal", "MPIJobRunning", "MPIJob ns/test is running")],
        ),
        (
            Observed(
                launcher=None,
                launcher_pods=[],
                workers=workers("Running", "Running"),
                suspended=False,
            ),
            [("Created", "True", "MPIJobCreated")],
            {"Worker": {"active": 2}},
            [],
        ),
        (
            Observed(
                launcher=launcher_job("Complete", completionTime=T1),
                launcher_pods=[pod("l", "Succeeded")],
                workers=workers("Running", "Running"),
                suspended=False,
            ),
            [("Created", "True", "MPIJobCreated"), ("Running", "True", "MPIJobRunning")],
            {"Launcher": {"succeeded": 1}, "Worker": {"active": 2}},
            [Event("Normal", "MPIJobRunning", "MPIJob ns/test is running")],
        ),
        (
            Observed(
                launcher=launcher_job("Complete", completionTime=T1),
                launcher_pods=[pod("l", "Running")],
                workers=workers(),
                suspended=False,
            ),
            [("Created", "True", "MPIJobCreated"), ("Running", "True", "MPIJobRunning")],
            {"Launcher": {"succeeded": 1}, "Worker": {}},
            [Event("Normal", "MPIJobRunning", "MPIJob ns/test is running")],
        ),
        (
            Observed(launcher=launcher_job(), launcher_pods=[], workers=[], suspended=True),
            [
                ("Created", "True", "MPIJobCreated"),
                ("Suspended", "True", "MPIJobSuspended"),
                ("Running", "False", "MPIJobSuspended"),
            ],
            {"Launcher": {}, "Worker": {}},
            [Event("Normal", "MPIJobSuspended", "MPIJob suspended")],
        ),
    ],
    ids=[
        "no launcher yet: only Created",
        "launcher running, workers pending: no Running",
        "launcher and every worker running: Running",
        "workers running without launcher: no Running",
        "launcher complete before a sync saw it run: Running first",
        "launcher complete while its pod still shows Running: Running first",
        "suspended at creation",
    ],
)
def test_status_follows_launcher_and_workers(
    seen: Observed,
    conditions: list[tuple[str, str, str]],
    replicas: dict[str, Any],
    events: list[Event],
) -> None:
    out = compute_status(JOB, CREATED, seen, T2)
    assert summary(out.status["conditions"]) == conditions
    assert out.status["replicaStatuses"] == replicas
    assert out.events == events


def test_a_run_no_sync_saw_is_recorded_before_its_success() -> None:
    launcher = launcher_job("Complete", startTime=T0, completionTime=T1)
    seen = Observed(launcher, [pod("l", "Succeeded")], workers("Running", "Running"), False)
    ran = compute_status(JOB, CREATED, seen, T2)
    running = ran.status["conditions"][-1]
    assert (running["type"], running["status"]) == ("Running", "True")
    assert running["lastTransitionTime"] == T0 == running["lastUpdateTime"]
    assert "completionTime" not in ran.status
    assert not ran.succeeded
    assert ran.continued  # the next sync must come, though nothing else changes

    done = compute_status(JOB, ran.status, seen, T2)
    assert summary(done.status["conditions"]) == [
        ("Created", "True", "MPIJobCreated"),
        ("Running", "False", "MPIJobRunning"),
        ("Succeeded", "True", "MPIJobSucceeded"),
    ]
    assert not done.continued
    assert done.status["completionTime"] == T1
    assert done.events == [
        Event("Normal", "MPIJobSucceeded", "MPIJob ns/test successfully completed.")
    ]
    assert done.succeeded and not done.failed
    assert compute_status(JOB, done.status, seen, T2).status == done.status


def test_a_job_already_finished_without_running_is_not_marked_running_afterwards() -> None:
    succeeded = compute_status(JOB, CREATED, Observed(launcher_job(), [], [], False), T1).status
    set_condition(succeeded["conditions"], "Succeeded", "True", "MPIJobSucceeded", "done", T1)
    seen = Observed(launcher_job("Complete", startTime=T0), [], [], False)
    out = compute_status(JOB, succeeded, seen, T2)
    assert ("Running", "True", "MPIJobRunning") not in summary(out.status["conditions"])
    assert ("Succeeded", "True", "MPIJobSucceeded") in summary(out.status["conditions"])


def test_a_failure_no_sync_saw_run_keeps_running_false_as_upstream() -> None:
    seen = Observed(launcher_job("Failed", completionTime=T1), [], [], False)
    out = compute_status(JOB, CREATED, seen, T2)
    assert out.failed
    running = out.status["conditions"][-1]
    assert (running["type"], running["status"]) == ("Running", "False")
    assert running["message"] == "MPIJob ns/test is finished but Running condition was never set."
    assert running["lastTransitionTime"] == T2 == running["lastUpdateTime"]


def test_running_is_announced_once_per_transition() -> None:
    seen = Observed(launcher_job(), [pod("l", "Running")], workers("Running"), False)
    first = compute_status(JOB, CREATED, seen, T1)
    second = compute_status(JOB, first.status, seen, T2)
    assert [e.reason for e in first.events] == ["MPIJobRunning"]
    assert second.events == []
    assert second.status == first.status


def test_backoff_limit_failure_names_the_last_failed_pod() -> None:
    failed = launcher_job(
        "Failed",
        failed=2,
        cond={
            "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
        },
    )
    pods = [
        pod("l1", "Failed", created=T0, reason="FailedReason1", message="first message"),
        pod("l2", "Failed", created=T1, reason="FailedReason2", message="second message"),
    ]
    out = compute_status(JOB, CREATED, Observed(failed, pods, [], False), T2)
    assert out.status["conditions"][1] | {"lastUpdateTime": None, "lastTransitionTime": None} == {
        "type": "Failed",
        "status": "True",
        "reason": "BackoffLimitExceeded/FailedReason2",
        "message": "Job has reached the specified backoff limit: second message",
        "lastUpdateTime": None,
        "lastTransitionTime": None,
    }
    assert out.status["replicaStatuses"]["Launcher"] == {"failed": 2}
    assert out.status["completionTime"] == T2
    assert out.failed
    assert out.events[-1].type == "Warning"


def test_backoff_failure_of_a_container_says_which_exit_code() -> None:
    failed = launcher_job(
        "Failed", failed=1, cond={"reason": "BackoffLimitExceeded", "message": "limit"}
    )
    exited = pod(
        "l1",
        "Failed",
        containerStatuses=[
            {"name": "launcher", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}
        ],
    )
    out = compute_status(JOB, CREATED, Observed(failed, [exited], [], False), T2)
    cond = out.status["conditions"][1]
    assert cond["reason"] == "BackoffLimitExceeded/Error"
    assert cond["message"] == "limit: container launcher exited with code 3"


def test_deadline_failure_passes_the_job_reason_through() -> None:
    failed = launcher_job("Failed", cond={"reason": "DeadlineExceeded", "message": "too slow"})
    out = compute_status(JOB, CREATED, Observed(failed, [], [], False), T2)
    assert summary(out.status["conditions"])[1] == ("Failed", "True", "DeadlineExceeded")


def test_workers_failed_are_counted_as_recorded_not_as_seen() -> None:
    # The failed pod is being replaced; the count is the job's history, like a Job's failed.
    seen = Observed(
        launcher_job(),
        [pod("l", "Running")],
        [pod("w0", "Running"), pod("test-worker-1", "Failed")],
        False,
        WorkerFailures(recorded=3),
    )
    out = compute_status(JOB, CREATED, seen, T2)
    assert out.status["replicaStatuses"]["Worker"] == {"active": 1, "failed": 3}
    assert not out.failed and "Running" not in [c["type"] for c in out.status["conditions"]]


def test_the_launchers_last_words_survive_in_the_failed_condition() -> None:
    failed = launcher_job(
        "Failed", failed=1, cond={"reason": "BackoffLimitExceeded", "message": "limit"}
    )
    log = "".join(f"rank {i}: step failed\n" for i in range(200)) + "MPI_ABORT was invoked\x07"
    exited = pod(
        "l1",
        "Failed",
        containerStatuses=[
            {
                "name": "launcher",
                "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": log}},
            }
        ],
    )
    out = compute_status(JOB, CREATED, Observed(failed, [exited], [], False), T2)
    message = out.status["conditions"][1]["message"]
    assert len(message) == 1024
    assert message.startswith("limit: container launcher exited with code 1: ...")
    # The end of the log is what says what went wrong; it stays, escaped onto one line.
    assert message.endswith("rank 199: step failed\\nMPI_ABORT was invoked\\x07")
    assert "\n" not in message and out.events[-1].message == message


def test_resume_sets_suspended_false_and_restarts_the_clock() -> None:
    suspended = compute_status(JOB, CREATED, Observed(None, [], [], True), T1).status
    out = compute_status(JOB, suspended, Observed(None, [], [], False), T2)
    assert ("Suspended", "False", "MPIJobResumed") in summary(out.status["conditions"])
    assert out.status["startTime"] == T2
    assert out.events == [Event("Normal", "MPIJobResumed", "MPIJob resumed")]


def test_long_failure_messages_are_truncated() -> None:
    failed = launcher_job("Failed", cond={"reason": "PodFailurePolicy", "message": "x" * 5000})
    out = compute_status(JOB, CREATED, Observed(failed, [], [], False), T2)
    message = out.status["conditions"][1]["message"]
    assert len(message) == 1024 and message.endswith("...")


def stored(workers: dict[str, int] | None = None) -> dict[str, Any]:
    """A job's status as its first sync wrote it, with these worker counts."""
    return {
        **CREATED,
        "startTime": T0,
        "replicaStatuses": {"Launcher": {}, "Worker": workers or {}},
    }


def running_since(*times: str | None) -> list[dict[str, Any]]:
    """Running workers whose container started at each time (None: it does not say)."""
    state = [{"running": {"startedAt": at}} if at else {"waiting": {}} for at in times]
    return [
        pod(f"test-worker-{i}", "Running", containerStatuses=[{"name": "worker", "state": s}])
        for i, s in enumerate(state)
    ]


TEN_S = "2026-01-01T00:00:10Z"
TWENTY_S = "2026-01-01T00:00:20Z"
ONE_RAN = stored({"active": 1})
BOTH_RAN = stored({"active": 2})


def waiting(workers: list[dict[str, Any]], *launcher_pods: dict[str, Any]) -> Observed:
    return Observed(launcher_job(), list(launcher_pods), workers, suspended=False)


HELD = WORKER_COUNTS_HOLD - 10  # the last worker started 10 s before TWENTY_S
BOTH_STARTED = (T0, TEN_S)
HOLDS = {
    "workers ran, the launcher has no pod": (
        stored(),
        BOTH_RAN,
        waiting(running_since(*BOTH_STARTED)),
        HELD,
    ),
    "the launcher's pod is pending": (
        stored(),
        BOTH_RAN,
        waiting(running_since(*BOTH_STARTED), pod("l", "Pending")),
        HELD,
    ),
    "a worker stopped running": (BOTH_RAN, ONE_RAN, waiting(running_since(TEN_S)), HELD),
    "the launcher runs": (
        stored(),
        BOTH_RAN,
        waiting(running_since(*BOTH_STARTED), pod("l", "Running")),
        None,
    ),
    "no launcher yet (WaitForWorkersReady)": (
        stored(),
        BOTH_RAN,
        Observed(None, [], running_since(*BOTH_STARTED), suspended=False),
        None,
    ),
    "suspended": (
        stored(),
        BOTH_RAN,
        Observed(launcher_job(), [], running_since(*BOTH_STARTED), suspended=True),
        None,
    ),
    "a worker failed as well": (
        stored(),
        stored({"active": 2, "failed": 1}),
        waiting(running_since(*BOTH_STARTED)),
        None,
    ),
    "the conditions changed as well": (
        stored(),
        {**BOTH_RAN, "conditions": []},
        waiting(running_since(*BOTH_STARTED)),
        None,
    ),
    "nothing changed": (BOTH_RAN, BOTH_RAN, waiting(running_since(*BOTH_STARTED)), None),
}


@pytest.mark.parametrize(("before", "after", "seen", "held"), HOLDS.values(), ids=HOLDS.keys())
def test_running_workers_wait_for_the_launcher_to_share_its_status_write(
    before: dict[str, Any], after: dict[str, Any], seen: Observed, held: float | None
) -> None:
    assert worker_counts_hold(before, after, seen, TWENTY_S) == held


@pytest.mark.parametrize(
    "starts",
    [
        pytest.param(("2025-12-31T23:59:45Z", "2025-12-31T23:59:50Z"), id="30 s ago"),
        pytest.param((T0, "2026-01-01T01:00:00Z"), id="ahead of the clock"),
        pytest.param((T0, None), id="a worker does not say"),
        pytest.param((T0, "yesterday"), id="not a time"),
    ],
)
def test_a_count_is_not_held_past_the_last_workers_start_or_without_one(
    starts: tuple[str | None, ...],
) -> None:
    assert worker_counts_hold(stored(), BOTH_RAN, waiting(running_since(*starts)), TWENTY_S) is None
