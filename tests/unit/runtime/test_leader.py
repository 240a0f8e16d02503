"""Lease leader election against an in-memory Lease API with optimistic concurrency."""

from __future__ import annotations

import copy
import itertools
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from mpi_operator.runtime.client import LEASES, ApiError, Resource
from mpi_operator.runtime.clock import FakeClock
from mpi_operator.runtime.leader import (
    IS_LEADER,
    LeaderElectionConfig,
    LeaderElector,
    default_identity,
)

T = TypeVar("T")
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class FakeLeases:
    """Leases with resourceVersions: a stale update gets 409, like the API server."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.versions = itertools.count(1)
        self.failing: ApiError | None = None
        self.calls: list[str] = []

    def _check(self, resource: Resource, verb: str) -> None:
        assert resource == LEASES
        self.calls.append(verb)
        if self.failing is not None:
            raise self.failing

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self._check(resource, "get")
        try:
            return copy.deepcopy(self.objects[(str(namespace), name)])
        except KeyError:
            raise ApiError(404, "NotFound", f"leases {name!r} not found") from None

    def create(
        self, resource: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        self._check(resource, "create")
        key = (str(namespace), obj["metadata"]["name"])
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", "exists")
        return self._store(key, obj)

    def update(
        self, resource: Resource, obj: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        self._check(resource, "update")
        key = (str(namespace), obj["metadata"]["name"])
        current = self.objects.get(key)
        if current is None:
            raise ApiError(404, "NotFound", "gone")
        if obj["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        return self._store(key, obj)

    def _store(self, key: tuple[str, str], obj: dict[str, Any]) -> dict[str, Any]:
        """Keep a copy under a new resourceVersion, and answer with another copy."""
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(next(self.versions))
        self.objects[key] = stored
        return copy.deepcopy(stored)

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.objects[("ops", "lock")]["spec"]
        return spec


def config(identity: str, **kwargs: Any) -> LeaderElectionConfig:
    return LeaderElectionConfig(name="lock", namespace="ops", identity=identity, **kwargs)


def elector(api: FakeLeases, clock: FakeClock, identity: str, **kwargs: Any) -> LeaderElector:
    return LeaderElector(
        config(identity),
        api,
        on_started_leading=kwargs.pop("on_started_leading", lambda stopped: None),
        clock=clock,
        rng=lambda: 0.0,
        **kwargs,
    )


def leading(
    api: FakeLeases,
    clock: FakeClock,
    lead: Callable[[threading.Event], None],
    record: Callable[[], T],
) -> tuple[LeaderElector, list[T]]:
    """Elector "a" doing ``lead`` while it leads, and the list of what ``record`` returned each
    time leadership ended."""
    stopped_calls: list[T] = []
    a = elector(
        api,
        clock,
        "a",
        on_started_leading=lead,
        on_stopped_leading=lambda: stopped_calls.append(record()),
    )
    return a, stopped_calls


def is_leader_gauge() -> float:
    return IS_LEADER.value


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lease_duration": 5, "renew_deadline": 5},
        {"renew_deadline": 3.5, "retry_period": 3},  # must exceed 1.2 * retry
        {"retry_period": 0},
        {"lease_duration": 0.5, "renew_deadline": 0.4, "retry_period": 0.1},
        {"identity": ""},
    ],
)
def test_invalid_config_raises_instead_of_exiting(kwargs: dict[str, Any]) -> None:
    kwargs.setdefault("identity", "me")
    with pytest.raises(ValueError):
        LeaderElectionConfig(name="lock", namespace="ops", **kwargs)


def test_defaults_match_upstream() -> None:
    cfg = LeaderElectionConfig(name="mpi-operator", namespace="mpi-operator")
    assert (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) == (15.0, 5.0, 3.0)
    host, _, suffix = default_identity().rpartition("_")
    assert host and len(suffix) == 36
    assert cfg.identity != LeaderElectionConfig(name="x", namespace="y").identity


def test_first_candidate_creates_the_lease() -> None:
    api, clock = FakeLeases(), FakeClock()
    a = elector(api, clock, "a")
    assert a.try_acquire_or_renew()
    spec = api.spec()
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert MICRO_TIME.match(spec["renewTime"])
    assert spec["acquireTime"] == spec["renewTime"] == "2026-01-01T00:00:00.000000Z"
    assert a.is_leader()


def test_takeover_only_after_the_lease_expires_unrenewed() -> None:
    api, clock = FakeLeases(), FakeClock()
    a = elector(api, clock, "a")
    new_leaders: list[str] = []
    b = elector(api, clock, "b", on_new_leader=new_leaders.append)
    assert a.try_acquire_or_renew()

    assert not b.try_acquire_or_renew()
    assert b.leader == "a" and not b.is_leader()
    assert new_leaders == ["a"]

    # a renews at t=10: b's expiry timer restarts from when it sees the change.
    clock.advance(10)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.advance(14.9)
    assert not b.try_acquire_or_renew()
    clock.advance(0.1)
    assert b.try_acquire_or_renew()
    spec = api.spec()
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1
    assert spec["acquireTime"] == "2026-01-01T00:00:25.000000Z"
    assert new_leaders == ["a", "b"]

    # a's optimistic renew conflicts; re-reading shows b: a is no longer leader.
    assert not a.try_acquire_or_renew()
    assert not a.is_leader()
    assert a.leader == "b"


def test_renewal_keeps_acquire_time_and_skips_the_read() -> None:
    api, clock = FakeLeases(), FakeClock()
    a = elector(api, clock, "a")
    assert a.try_acquire_or_renew()
    api.calls.clear()
    clock.advance(3)
    assert a.try_acquire_or_renew()
    assert api.calls == ["update"]
    spec = api.spec()
    assert spec["acquireTime"] == "2026-01-01T00:00:00.000000Z"
    assert spec["renewTime"] == "2026-01-01T00:00:03.000000Z"
    assert spec["leaseTransitions"] == 0


def test_released_lease_is_taken_at_once() -> None:
    api, clock = FakeLeases(), FakeClock()
    a = elector(api, clock, "a")
    b = elector(api, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a._release()
    assert api.spec()["holderIdentity"] == ""
    assert api.spec()["leaseDurationSeconds"] == 1
    assert not a.is_leader()
    assert b.try_acquire_or_renew()
    assert api.spec()["leaseTransitions"] == 1


def test_healthz_watchdog() -> None:
    api, clock = FakeLeases(), FakeClock()
    a = elector(api, clock, "a")
    b = elector(api, clock, "b")
    assert a.healthy()  # not leading: always healthy
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock.advance(35)  # lease 15 s + 20 s tolerance
    assert a.healthy()
    clock.advance(0.1)
    assert not a.healthy()
    assert b.healthy()  # a follower is never unhealthy for this reason


def test_run_leads_until_stopped_then_releases() -> None:
    api, clock = FakeLeases(), FakeClock(auto_advance=True)
    stop = threading.Event()
    seen: dict[str, Any] = {}
    work_done = threading.Event()

    def lead(stopped: threading.Event) -> None:
        seen["gauge_while_leading"] = is_leader_gauge()
        stop.set()  # e.g. SIGTERM arrives
        seen["stopped_signalled"] = stopped.wait(5)
        work_done.set()

    a, stopped_calls = leading(api, clock, lead, record=work_done.is_set)
    a.run(stop)

    assert seen == {"gauge_while_leading": 1.0, "stopped_signalled": True}
    assert stopped_calls == [True]  # the work had ended before on_stopped_leading ran
    assert is_leader_gauge() == 0.0
    assert api.spec()["holderIdentity"] == ""


def test_run_gives_up_when_renewals_fail_past_the_deadline() -> None:
    api, clock = FakeLeases(), FakeClock(auto_advance=True)
    started = threading.Event()
    work_ended = threading.Event()

    def lead(stopped: threading.Event) -> None:
        api.failing = ApiError(503, "ServiceUnavailable", "apiserver down")
        started.set()
        if stopped.wait(5):
            work_ended.set()

    a, stopped_calls = leading(api, clock, lead, record=clock.monotonic)
    start = clock.monotonic()
    # The first renewal may run before the work thread breaks the API; either way every later
    # one fails, and leadership ends within one renew deadline (5 s) of the last success.
    a.run(threading.Event())
    assert started.is_set()
    assert work_ended.wait(5), "the work was not told that leadership ended"
    assert len(stopped_calls) == 1
    assert stopped_calls[0] - start >= 5.0
    assert is_leader_gauge() == 0.0
    assert api.failing is not None and api.spec()["holderIdentity"] == "a"  # not released


def test_failing_work_gives_up_leadership() -> None:
    api, clock = FakeLeases(), FakeClock(auto_advance=True)

    def lead(stopped: threading.Event) -> None:
        raise RuntimeError("could not start informers")

    a, stopped_calls = leading(api, clock, lead, record=lambda: "x")
    a.run(threading.Event())
    assert stopped_calls == ["x"]
    assert api.spec()["holderIdentity"] == ""  # released: nothing runs under it any more


def test_follower_stops_cleanly_without_leading() -> None:
    api, clock = FakeLeases(), FakeClock()
    holder = elector(api, clock, "holder")
    assert holder.try_acquire_or_renew()
    started: list[bool] = []
    follower = elector(api, clock, "follower", on_started_leading=lambda s: started.append(True))
    stop = threading.Event()
    runner = threading.Thread(target=follower.run, args=(stop,))
    runner.start()
    clock.block_until_waiters(1)  # it read the Lease, lost, and sleeps until the next retry
    stop.set()
    runner.join(5)
    assert not runner.is_alive()
    assert started == []
    assert api.spec()["holderIdentity"] == "holder"


def test_after_the_first_attempt_runs_once_before_the_leaders_work() -> None:
    api, clock = FakeLeases(), FakeClock(auto_advance=True)
    stop = threading.Event()
    calls: list[str] = []

    def lead(stopped: threading.Event) -> None:
        calls.append("lead")
        stop.set()

    a = elector(
        api,
        clock,
        "a",
        on_started_leading=lead,
        after_first_attempt=lambda: calls.append(f"answered: {api.spec()['holderIdentity']}"),
    )
    a.run(stop)
    assert calls == ["answered: a", "lead"]


def test_a_follower_runs_after_the_first_attempt_once_while_it_keeps_trying() -> None:
    api, clock = FakeLeases(), FakeClock(auto_advance=True)
    holder = elector(api, clock, "holder")
    assert holder.try_acquire_or_renew()
    reads_before = api.calls.count("get")
    answered: list[str] = []
    follower = elector(
        api, clock, "follower", after_first_attempt=lambda: answered.append(follower.leader)
    )
    stop = threading.Event()
    runner = threading.Thread(target=follower.run, args=(stop,))
    runner.start()
    deadline = time.monotonic() + 5
    while api.calls.count("get") < reads_before + 3 and time.monotonic() < deadline:
        time.sleep(0.001)
    stop.set()
    runner.join(5)
    assert not runner.is_alive()
    assert api.calls.count("get") >= reads_before + 3  # three attempts at least, all lost
    assert answered == ["holder"]


def test_a_missing_lease_namespace_is_an_error_saying_what_to_do_and_the_replica_is_not_ready(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, clock = FakeLeases(), FakeClock()
    # The API server answers a create in a namespace that does not exist with 404.
    api.failing = ApiError(404, "NotFound", 'namespaces "ops" not found')
    advice = "create it or pass --lock-namespace"
    a = LeaderElector(
        config("a", missing_namespace_advice=advice),
        api,
        on_started_leading=lambda stopped: None,
        clock=clock,
    )
    with caplog.at_level(logging.INFO, logger="mpi_operator.runtime.leader"):
        assert not a.try_acquire_or_renew()
        clock.advance(3)
        assert not a.try_acquire_or_renew()
    assert api.calls[-1] == "create"
    assert not a.can_campaign()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, "repeated once a minute, not on every retry"
    assert "namespace ops does not exist" in errors[0] and advice in errors[0]
    assert all(r.levelno >= logging.ERROR for r in caplog.records if "ops/lock" in r.getMessage())

    api.failing = None  # someone created the namespace
    assert a.try_acquire_or_renew()
    assert a.can_campaign()
