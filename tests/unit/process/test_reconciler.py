"""One reconcile through the operator's own pieces: caches, plan, execute, controller."""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import pytest
from prometheus_client import REGISTRY

from gang import select_gang_scheduler
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.controller.execute import WriteError
from mpi_operator.controller.plan import Action
from mpi_operator.operator.caches import Caches, build_caches
from mpi_operator.operator.capacity import NudgeSchedule
from mpi_operator.operator.reconciler import MPIJobReconciler, SyncError
from mpi_operator.runtime.clock import FakeClock
from mpi_operator.runtime.controller import Controller
from mpi_operator.runtime.echoes import OwnWrites
from mpi_operator.runtime.ratelimit import ItemExponentialFailureRateLimiter
from mpi_operator.runtime.workqueue import RateLimitingQueue
from mpi_operator.testing.wrappers import MPIJobWrapper, owner_references
from tests.unit.process.test_caches import offline_client

_names = itertools.count()
SQUATTER_MESSAGE = (
    'Resource "pi-config" of Kind "ConfigMap" already exists and is not managed by MPIJob'
)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: dict[str, Any], kind: str, reason: str, message: str) -> None:
        self.events.append((kind, reason, message))


class Writer:
    """Accepts every write, except that a create may meet someone else's object."""

    def __init__(self, taken: str = "") -> None:
        self.taken = taken

    def write(self, action: Action) -> dict[str, Any] | None:
        if action.verb == "create" and action.name == self.taken:
            # What ApiWriter raises once it has looked at the object a 409 was about.
            raise WriteError(409, SQUATTER_MESSAGE, reason="ErrResourceExists")
        return action.body


def reconcile_once(
    cached: list[dict[str, Any]], writer: Writer
) -> tuple[list[tuple[str, str, str]], dict[str, float], int]:
    """Events, reconcile results counted and requeues of one reconcile of ns/pi."""
    caches = build_caches(offline_client(), None, None)
    caches.mpijobs.store.upsert(MPIJobWrapper("pi").workers(1).obj())
    for obj in cached:
        caches.children["configmaps"].store.upsert(obj)
    recorder = Recorder()
    reconciler = MPIJobReconciler(caches, writer, recorder, None)  # type: ignore[arg-type]
    clock = FakeClock()
    name = f"reconciler-{next(_names)}"
    queue = RateLimitingQueue(name, ItemExponentialFailureRateLimiter(1.0, 60.0), clock)
    controller = Controller(name, queue, reconciler, clock=clock)
    queue.add("ns/pi")
    assert controller.process_next_item(timeout=0)
    results = {
        result: REGISTRY.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": name, "result": result}
        )
        or 0.0
        for result in ("error", "requeue_after", "success")
    }
    return recorder.events, results, queue.num_requeues("ns/pi")


SQUATTER = {"metadata": {"name": "pi-config", "namespace": "ns", "resourceVersion": "1"}}


@pytest.mark.parametrize(
    ("cached", "writer"),
    [([SQUATTER], Writer()), ([], Writer(taken="pi-config"))],
    ids=["seen in the cache", "met by the create"],
)
def test_someone_elses_object_is_one_error_event_and_one_backoff_however_it_is_found(
    cached: list[dict[str, Any]], writer: Writer
) -> None:
    events, results, requeues = reconcile_once(cached, writer)
    assert ("Warning", "ErrResourceExists", SQUATTER_MESSAGE) in events
    assert results == {"error": 1.0, "requeue_after": 0.0, "success": 0.0}
    assert requeues == 1


class CountingWriter:
    """Accepts every write and answers with a new resourceVersion, as the API server does."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.answers: list[tuple[str, dict[str, Any]]] = []

    def write(self, action: Action) -> dict[str, Any] | None:
        self.writes.append(f"{action.verb} {action.resource} {action.name}")
        body = dict(action.body or {})
        body["metadata"] = {**body.get("metadata", {}), "resourceVersion": str(len(self.writes))}
        self.answers.append((action.resource, body))
        return body


class Cached(NamedTuple):
    """Job ns/pi (resourceVersion 100) in the caches, and a reconciler that counts writes."""

    caches: Caches
    job: dict[str, Any]
    writer: CountingWriter
    recorder: Recorder
    own_writes: OwnWrites
    reconciler: MPIJobReconciler


def cached_pi(*children: tuple[str, dict[str, Any]], failure_log_tail: bool = True) -> Cached:
    caches = build_caches(offline_client(), None, None)
    job = MPIJobWrapper("pi").workers(1).obj()
    job["metadata"]["resourceVersion"] = "100"
    caches.mpijobs.store.upsert(job)
    for resource, child in children:
        caches.children[resource].store.upsert(child)
    writer, recorder, own = CountingWriter(), Recorder(), OwnWrites()
    reconciler = MPIJobReconciler(
        caches,
        writer,
        recorder,  # type: ignore[arg-type]
        None,
        own_writes=own,
        failure_log_tail=failure_log_tail,
    )
    return Cached(caches, job, writer, recorder, own, reconciler)


def test_a_sync_before_the_caches_show_our_last_writes_writes_nothing() -> None:
    caches, job, writer, recorder, _, reconciler = cached_pi()
    assert reconciler("ns/pi") is None
    first = list(writer.writes)
    recorder.events.clear()
    assert first[-1] == "update_status mpijobs/status pi"
    # Child events arrive before the job's own: planning now would repeat every create.
    result = reconciler("ns/pi")
    assert result is not None and result.requeue_after is not None
    assert writer.writes == first
    *children, (_, status) = writer.answers
    for resource, child in children:
        caches.children[resource].store.upsert(child)
    result = reconciler("ns/pi")  # the job itself still shows the status it had
    assert result is not None and result.requeue_after is not None
    # Once the caches show everything, the job syncs again, with nothing left to write.
    version = status["metadata"]["resourceVersion"]
    metadata = {**job["metadata"], "resourceVersion": version}
    caches.mpijobs.store.upsert({**job, "metadata": metadata, "status": status["status"]})
    assert reconciler("ns/pi") is None
    assert writer.writes == first and recorder.events == []


def test_our_own_writes_are_known_when_they_come_back_unless_a_sync_waits_for_them() -> None:
    caches, job, writer, _, own, reconciler = cached_pi()
    assert reconciler("ns/pi") is None
    *children, (_, status) = writer.answers
    written = {**job, "metadata": {**job["metadata"], **status["metadata"]}}
    [(_, config_map)] = [(r, child) for r, child in children if r == "configmaps"]
    assert own.is_echo("configmaps", config_map)
    assert not own.is_echo(
        "mpijobs", {**job, "metadata": {**job["metadata"], "resourceVersion": "999"}}
    )
    # The children are not cached yet: the next sync is skipped, and waits for the events
    # that show our writes, the job's own among them.
    result = reconciler("ns/pi")
    assert result is not None and result.requeue_after is not None
    assert not own.is_echo("mpijobs", written)
    # A deleted job's writes are forgotten.
    caches.mpijobs.store.delete("ns/pi")
    assert len(own) > 0
    assert reconciler("ns/pi") is None
    assert len(own) == 0


def pi_launcher(status: dict[str, Any]) -> dict[str, Any]:
    """The launcher Job of ns/pi, cached with ``status``."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "pi-launcher",
            "namespace": "ns",
            "uid": "launcher-uid",
            "resourceVersion": "7",
            "ownerReferences": owner_references("pi"),
        },
        "status": status,
    }


def test_the_status_write_a_next_sync_continues_from_is_not_taken_for_an_echo() -> None:
    # The launcher ran and finished before any sync saw it: Running now, Succeeded next.
    launcher = pi_launcher({"conditions": [{"type": "Complete", "status": "True"}]})
    _, job, writer, _, own, reconciler = cached_pi(("jobs", launcher))
    assert reconciler("ns/pi") is None
    assert writer.writes == ["update_status mpijobs/status pi"]
    [(_, status)] = writer.answers
    assert [c["type"] for c in status["status"]["conditions"]] == ["Created", "Running"]
    written = {**job, "metadata": {**job["metadata"], **status["metadata"]}}
    assert not own.is_echo("mpijobs", written)


@pytest.mark.parametrize("log_tail", [True, False], ids=["log tail", "no log tail"])
def test_the_failure_log_tail_setting_reaches_the_failed_condition_and_its_event(
    log_tail: bool,
) -> None:
    failed = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
    launcher = pi_launcher({"failed": 1, "conditions": [{**failed, "message": "limit"}]})
    terminated = {"exitCode": 1, "reason": "Error", "message": "password=hunter2"}
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "pi-launcher-x",
            "namespace": "ns",
            "resourceVersion": "8",
            "ownerReferences": [{"uid": "launcher-uid", "controller": True}],
        },
        "status": {
            "phase": "Failed",
            "containerStatuses": [{"name": "launcher", "state": {"terminated": terminated}}],
        },
    }
    cached = cached_pi(("jobs", launcher), ("pods", pod), failure_log_tail=log_tail)
    cached.reconciler("ns/pi")
    expected = "limit: container launcher exited with code 1" + (
        ": password=hunter2" if log_tail else ""
    )
    assert ("Warning", "BackoffLimitExceeded/Error", expected) in cached.recorder.events
    status = cached.writer.answers[-1][1]["status"]
    assert [c["message"] for c in status["conditions"] if c["type"] == "Failed"] == [expected]


class PatchRefusingWriter(CountingWriter):
    def write(self, action: Action) -> dict[str, Any] | None:
        if action.verb == "patch":
            raise WriteError(403, "podgroups is forbidden: patch")
        return super().write(action)


@pytest.mark.parametrize("refused", [False, True], ids=["sent", "refused"])
def test_a_due_nudge_patches_the_waiting_gang_and_is_counted_or_asked_for_again(
    refused: bool,
) -> None:
    gang = select_gang_scheduler("sp-scheduler")
    assert gang is not None
    caches = build_caches(offline_client(), None, gang)
    wrapper = MPIJobWrapper("pi").workers(1)
    caches.mpijobs.store.upsert(wrapper.obj())
    waiting = {
        **gang.pod_group(wrapper.defaulted(), ClusterFacts()),
        "status": {"phase": "Scheduling"},
    }
    caches.children["podgroups"].store.upsert(waiting)
    clock, delivered = FakeClock(), []
    nudges = NudgeSchedule(lambda key, delay: delivered.append((key, delay)), clock)
    nudges.request(["ns/pi"])
    clock.advance(1.0)
    writer = PatchRefusingWriter() if refused else CountingWriter()
    reconciler = MPIJobReconciler(caches, writer, Recorder(), gang, nudges=nudges)  # type: ignore[arg-type]
    before = REGISTRY.get_sample_value("mpi_operator_gang_capacity_nudges_total") or 0.0
    if refused:
        with pytest.raises(SyncError):
            reconciler("ns/pi")
        assert delivered[-1] == ("ns/pi", 5.0), "asked for again, after the interval"
    else:
        reconciler("ns/pi")
        assert "patch podgroups pi" in writer.writes
        assert delivered == [("ns/pi", 1.0)], "nothing more to deliver"
    after = REGISTRY.get_sample_value("mpi_operator_gang_capacity_nudges_total") or 0.0
    assert after - before == (0.0 if refused else 1.0)
