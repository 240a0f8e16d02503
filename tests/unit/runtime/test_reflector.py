"""Reflector and informer logic against a scripted in-process list/watch source."""

from __future__ import annotations

import json
import random
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest

from mpi_operator.runtime.client import ApiError, ListResult, WatchEvent
from mpi_operator.runtime.clock import FakeClock
from mpi_operator.runtime.informer import Informer
from mpi_operator.runtime.reflector import (
    SHARED_MAX_DEPTH,
    SHARED_VALUE_MAX_LEN,
    Backoff,
    EventHandler,
    Reflector,
    Transform,
    chain_transforms,
    share_strings,
    strip_managed_fields,
)
from mpi_operator.runtime.store import Store


def pod(name: str, rv: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "resourceVersion": rv,
            "managedFields": [{"manager": "kubectl"}],
        },
        **extra,
    }


def bookmark(rv: str) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"resourceVersion": rv}}


def status(code: int, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "code": code, "reason": reason, "message": f"{reason}!"}


class FakeWatch:
    def __init__(self, events: list[WatchEvent]) -> None:
        self.events = events
        self.closed = False

    def __iter__(self) -> Iterator[WatchEvent]:
        for event in self.events:
            if self.closed:
                return
            yield event

    def close(self) -> None:
        self.closed = True


class FakeSource:
    """Answers list() and watch() from scripts; once the watch script is used up it sets
    ``stop`` (so Reflector.run returns) and returns an empty watch."""

    def __init__(self, stop: threading.Event | None = None) -> None:
        self.lists: deque[ListResult | ApiError] = deque()
        self.watches: deque[list[WatchEvent] | ApiError] = deque()
        self.calls: list[tuple[Any, ...]] = []
        self.stop = stop or threading.Event()
        self.opened: list[FakeWatch] = []

    def list(self, transform: Transform | None) -> ListResult:
        self.calls.append(("list",))
        item = self.lists.popleft()
        if isinstance(item, ApiError):
            raise item
        # A fresh copy each time, as the server would send, transformed as the client does.
        fresh = [dict(obj, metadata=dict(obj["metadata"])) for obj in item.items]
        return ListResult([transform(obj) if transform else obj for obj in fresh],
                          item.resource_version)  # fmt: skip

    def watch(self, resource_version: str, timeout_seconds: int) -> FakeWatch:
        self.calls.append(("watch", resource_version, timeout_seconds))
        if not self.watches:
            self.stop.set()
            return FakeWatch([])
        item = self.watches.popleft()
        if isinstance(item, ApiError):
            raise item
        watch = FakeWatch(item)
        self.opened.append(watch)
        return watch


class Recorder(EventHandler):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, ...]] = []

    def on_add(self, obj: dict[str, Any]) -> None:
        self.events.append(("add", obj["metadata"]["name"], obj["metadata"]["resourceVersion"]))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        name = new["metadata"]["name"]
        old_rv = old["metadata"]["resourceVersion"]
        self.events.append(("update", name, old_rv, new["metadata"]["resourceVersion"]))

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.events.append(("delete", obj["metadata"]["name"], obj["metadata"]["resourceVersion"]))


def run_script(source: FakeSource, **kwargs: Any) -> tuple[Store, Recorder, FakeClock]:
    """Run a reflector over ``source`` until its script is used up."""
    store = Store()
    recorder = Recorder()
    clock = FakeClock(monotonic=0.0, auto_advance=True)
    reflector = Reflector(source, store, recorder, clock=clock, rng=random.Random(1), **kwargs)
    reflector.run(source.stop)
    return store, recorder, clock


def test_list_then_watch_applies_events_and_resumes_from_bookmarks() -> None:
    source = FakeSource()
    source.lists.append(ListResult([pod("a", "10"), pod("b", "11")], "12"))
    source.watches.append(
        [
            ("ADDED", pod("c", "13")),
            ("MODIFIED", pod("a", "14")),
            ("MODIFIED", pod("b", "11")),  # same resourceVersion: no update event
            ("DELETED", pod("c", "15")),
            ("BOOKMARK", bookmark("20")),
        ]
    )
    source.watches.append([("MODIFIED", pod("b", "21"))])
    store, recorder, _ = run_script(source)

    assert recorder.events == [
        ("add", "a", "10"),
        ("add", "b", "11"),
        ("add", "c", "13"),
        ("update", "a", "10", "14"),
        ("delete", "c", "15"),
        ("update", "b", "11", "21"),
    ]
    assert sorted(store.keys()) == ["ns/a", "ns/b"]
    watch_calls = [call for call in source.calls if call[0] == "watch"]
    # Resumed from the list RV, then from the bookmark, then from the last event.
    assert [call[1] for call in watch_calls] == ["12", "20", "21"]
    assert all(300 <= call[2] <= 600 for call in watch_calls)
    assert source.calls.count(("list",)) == 1
    assert all(watch.closed for watch in source.opened)


def test_gone_error_event_relists_and_synthesizes_deletes() -> None:
    source = FakeSource()
    source.lists.append(ListResult([pod("a", "1"), pod("b", "2"), pod("c", "3")], "3"))
    source.watches.append([("MODIFIED", pod("a", "4")), ("ERROR", status(410, "Expired"))])
    # While we were not watching: b was deleted, c changed, d appeared; a unchanged since 4.
    source.lists.append(ListResult([pod("a", "4"), pod("c", "7"), pod("d", "8")], "9"))
    store, recorder, clock = run_script(source)

    assert recorder.events == [
        ("add", "a", "1"),
        ("add", "b", "2"),
        ("add", "c", "3"),
        ("update", "a", "1", "4"),
        ("delete", "b", "2"),  # last known state, synthesized from the relist
        ("add", "d", "8"),
        ("update", "c", "3", "7"),
    ]
    assert sorted(store.keys()) == ["ns/a", "ns/c", "ns/d"]
    assert source.calls[-1][:2] == ("watch", "9")
    # The relist waited one backoff step (0.8 s with up to 100% jitter), not the 30 s cap.
    assert 0.8 <= clock.monotonic() <= 1.6


def test_gone_http_status_on_watch_relists() -> None:
    source = FakeSource()
    source.lists.append(ListResult([pod("a", "1")], "5"))
    source.watches.append(ApiError(410, "Gone", "too old"))
    source.lists.append(ListResult([], "9"))
    store, recorder, _ = run_script(source)

    assert source.calls.count(("list",)) == 2
    assert recorder.events == [("add", "a", "1"), ("delete", "a", "1")]
    assert len(store) == 0


def test_other_watch_errors_back_off_and_resume_without_relisting() -> None:
    source = FakeSource()
    source.lists.append(ListResult([], "5"))
    source.watches.append(ApiError(0, "ConnectionRefused", "no server"))
    source.watches.append(ApiError(500, "InternalError", "boom"))
    source.watches.append([("ERROR", status(500, "InternalError"))])
    source.watches.append([("ADDED", pod("a", "6"))])
    _, recorder, clock = run_script(source)

    assert source.calls.count(("list",)) == 1
    assert [call[1] for call in source.calls if call[0] == "watch"] == ["5", "5", "5", "5", "6"]
    assert recorder.events == [("add", "a", "6")]
    # Three backoffs: 0.8, 1.6, 3.2 s, each with up to 100% jitter.
    assert 5.6 <= clock.monotonic() <= 11.2


def test_watch_closed_at_once_without_events_backs_off() -> None:
    source = FakeSource()
    source.lists.append(ListResult([], "5"))
    source.watches.append([])
    source.watches.append([])
    _, _, clock = run_script(source)
    assert [call[1] for call in source.calls if call[0] == "watch"] == ["5", "5", "5"]
    assert source.calls.count(("list",)) == 1
    assert 2.4 <= clock.monotonic() <= 4.8  # two backoffs, not a tight loop


def test_list_errors_are_retried_and_unauthorized_calls_on_fatal() -> None:
    source = FakeSource()
    source.lists.append(ApiError(403, "Forbidden", "pods is forbidden"))
    source.lists.append(ApiError(503, "ServiceUnavailable", "later"))
    source.lists.append(ListResult([pod("a", "1")], "1"))
    fatal: list[int] = []
    store, _, _ = run_script(source, on_fatal=lambda error: fatal.append(error.status))

    assert fatal == [403]
    assert store.has_synced()
    assert source.calls.count(("list",)) == 3


def test_unauthorized_watch_calls_on_fatal() -> None:
    source = FakeSource()
    source.lists.append(ListResult([], "1"))
    source.watches.append(ApiError(401, "Unauthorized", "token expired"))
    fatal: list[str] = []
    run_script(source, on_fatal=lambda error: fatal.append(error.reason))
    assert fatal == ["Unauthorized"]


def test_transform_runs_before_storing() -> None:
    source = FakeSource()
    source.lists.append(ListResult([pod("a", "1", spec={"big": "x" * 10})], "1"))
    source.watches.append([("ADDED", pod("b", "2", spec={"big": "y"}))])

    def drop_spec(obj: dict[str, Any]) -> dict[str, Any]:
        obj.pop("spec", None)
        return obj

    store, _, _ = run_script(source, transform=chain_transforms(strip_managed_fields, drop_spec))
    for key in ("ns/a", "ns/b"):
        obj = store.get(key)
        assert obj is not None
        assert "managedFields" not in obj["metadata"]
        assert "spec" not in obj


def test_default_transform_strips_managed_fields_only() -> None:
    source = FakeSource()
    source.lists.append(ListResult([pod("a", "1", spec={"keep": True})], "1"))
    store, _, _ = run_script(source)
    obj = store.get("ns/a")
    assert obj is not None
    assert "managedFields" not in obj["metadata"]
    assert obj["spec"] == {"keep": True}


def decoded(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a watch event of its own brings it: from a ``json.loads`` of its own."""
    result: dict[str, Any] = json.loads(json.dumps(obj))
    return result


def test_objects_listed_and_watched_share_keys_and_short_values() -> None:
    source = FakeSource()
    labels = {"training.kubeflow.org/job-role": "worker"}
    uid = "7293aad3-3f37-4a0c-b931-6973d31ca537"
    source.lists.append(ListResult([decoded(pod("a", "1", status={"phase": "Running"}))], "1"))
    source.watches.append(
        [("ADDED", decoded(pod("b", "2", status={"phase": "Running"}, labels=labels, uid=uid)))]
    )
    store, _, _ = run_script(source, transform=None)
    a, b = store.get("ns/a"), store.get("ns/b")
    assert a is not None and b is not None
    (a_status,) = (key for key in a if key == "status")
    (b_status,) = (key for key in b if key == "status")
    assert a_status is b_status
    assert a["status"]["phase"] is b["status"]["phase"]
    (watched_label,) = b["labels"]
    assert watched_label is share_strings(decoded({"labels": labels}))["labels"].popitem()[0]
    assert b["uid"] is not share_strings(decoded({"uid": uid}))["uid"]


@pytest.mark.parametrize(
    "obj",
    [
        {"metadata": {"name": "a"}, "spec": {"replicas": 2, "ok": True, "none": None, "f": 1.5}},
        {"list": [[["x" * SHARED_VALUE_MAX_LEN, "y" * (SHARED_VALUE_MAX_LEN + 1)]], {"k": []}]},
        {"k" * 2**20: "v" * 2**20},
    ],
    ids=["scalars", "nested lists", "a huge key and value"],
)
def test_sharing_strings_keeps_the_object_equal(obj: dict[str, Any]) -> None:
    assert share_strings(decoded(obj)) == obj


def test_sharing_strings_stops_at_a_bounded_depth() -> None:
    # Deeper than the walk goes, yet within what json.loads decodes (about 1,000 levels).
    depth = 900
    text = '{"a":' * depth + '"leaf"' + "}" * depth
    obj = json.loads(text)
    shared = share_strings(obj)
    assert shared == obj
    original, copy = obj, shared
    for _ in range(SHARED_MAX_DEPTH):
        original, copy = original["a"], copy["a"]
    assert copy is original


def test_failing_handler_does_not_stop_the_cache() -> None:
    source = FakeSource()
    source.lists.append(ListResult([], "1"))
    source.watches.append([("ADDED", pod("a", "2")), ("ADDED", pod("b", "3"))])
    store = Store()

    def explode(obj: dict[str, Any]) -> None:
        raise RuntimeError("handler bug")

    reflector = Reflector(
        source, store, EventHandler(on_add=explode), clock=FakeClock(auto_advance=True)
    )
    reflector.run(source.stop)
    assert sorted(store.keys()) == ["ns/a", "ns/b"]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        # No jitter (rng 0): 0.8 doubling to the 30 s cap.
        ([0, 0, 0, 0, 0, 0, 0, 0], [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]),
        # Two quiet minutes reset it.
        ([0, 0, 121], [0.8, 1.6, 0.8]),
    ],
)
def test_backoff_steps(steps: list[float], expected: list[float]) -> None:
    clock = FakeClock()
    backoff = Backoff(clock=clock, rng=lambda: 0.0)
    delays = []
    for step in steps:
        clock.advance(step)
        delays.append(round(backoff.next(), 6))
    assert delays == expected
    jittered = Backoff(clock=clock, rng=lambda: 1.0)
    assert jittered.next() == pytest.approx(1.6)


def test_informer_syncs_replays_to_late_handlers_and_stops() -> None:
    stop_script = threading.Event()
    source = FakeSource(stop_script)
    source.lists.append(ListResult([pod("a", "1")], "1"))
    # The empty watch counts as a failure (see below) and the backoff waits on a clock that
    # never moves, so the informer idles until stopped.
    informer = Informer(source, name="pods", clock=FakeClock())
    early = Recorder()
    informer.add_handler(early)
    assert not informer.has_synced()
    informer.start()
    assert informer.wait_for_sync(5)
    late = Recorder()
    informer.add_handler(late)
    assert informer.stop(timeout=5)
    assert early.events == [("add", "a", "1")]
    assert late.events == [("add", "a", "1")]
    assert informer.resource_version == "1"
