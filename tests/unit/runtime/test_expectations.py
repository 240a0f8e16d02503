"""Writes of ours that the caches have not shown yet."""

from __future__ import annotations

from typing import Any

from mpi_operator.runtime.clock import FakeClock
from mpi_operator.runtime.expectations import Expectations, Written


class Cache:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}

    def put(self, resource: str, name: str, version: str) -> None:
        self.objects[(resource, "ns", name)] = {"metadata": {"resourceVersion": version}}

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((resource, namespace, name))


def test_a_key_waits_until_the_cache_shows_its_create_and_its_update() -> None:
    clock, cache = FakeClock(), Cache()
    cache.put("mpijobs", "pi", "1")
    expectations = Expectations(timeout=30.0, clock=clock)
    expectations.expect(
        "ns/pi", [Written("pods", "ns", "pi-worker-0"), Written("mpijobs", "ns", "pi", "1")]
    )
    clock.advance(10.0)
    assert expectations.wait_left("ns/pi", cache.get) == 20.0
    cache.put("pods", "pi-worker-0", "2")
    assert expectations.wait_left("ns/pi", cache.get) == 20.0  # the status is still at 1
    cache.put("mpijobs", "pi", "3")
    assert expectations.wait_left("ns/pi", cache.get) is None
    assert len(expectations) == 0


def test_a_uid_bound_delete_waits_until_that_uid_is_gone_from_the_cache() -> None:
    cache, expectations = Cache(), Expectations()
    cache.objects[("pods", "ns", "w0")] = {"metadata": {"uid": "old", "resourceVersion": "5"}}
    expectations.expect("ns/pi", [Written("pods", "ns", "w0", deleted_uid="old")])
    assert expectations.wait_left("ns/pi", cache.get) is not None
    cache.objects[("pods", "ns", "w0")] = {"metadata": {"uid": "new", "resourceVersion": "9"}}
    assert expectations.wait_left("ns/pi", cache.get) is None


def test_the_deadline_ends_a_wait_for_an_event_that_never_comes() -> None:
    clock, cache = FakeClock(), Cache()
    expectations = Expectations(timeout=30.0, clock=clock)
    expectations.expect("ns/pi", [Written("pods", "ns", "pi-worker-0")])
    clock.advance(30.0)
    assert expectations.wait_left("ns/pi", cache.get) is None
    assert len(expectations) == 0


def test_nothing_written_or_forgotten_means_no_wait() -> None:
    cache = Cache()
    expectations = Expectations()
    expectations.expect("ns/a", [])
    expectations.expect("ns/b", [Written("pods", "ns", "b-worker-0")])
    expectations.forget("ns/b")
    assert expectations.wait_left("ns/a", cache.get) is None
    assert expectations.wait_left("ns/b", cache.get) is None
