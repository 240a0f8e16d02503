"""Which MPIJob and child watch events sync the job."""

from __future__ import annotations

from typing import Any

from mpi_operator.operator.leading import _child_handlers, _enqueue_changed
from mpi_operator.runtime.echoes import OwnWrites
from mpi_operator.runtime.objects import Object
from mpi_operator.runtime.ratelimit import ItemExponentialFailureRateLimiter
from mpi_operator.runtime.workqueue import RateLimitingQueue


def obj(version: str, name: str = "pi") -> Object:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


def queued(old: Object, new: Object, own: OwnWrites) -> int:
    queue = RateLimitingQueue("mpijob-events", ItemExponentialFailureRateLimiter(1.0, 60.0))
    _enqueue_changed(queue, old, new, own)
    return len(queue)


def test_a_new_version_syncs_the_job_unless_it_is_our_own_status_write() -> None:
    own = OwnWrites()
    assert queued(obj("1"), obj("2"), own) == 1
    own.wrote("ns/pi", "mpijobs", "ns", "pi", "3")
    assert queued(obj("2"), obj("3"), own) == 0
    # Once seen, the write is forgotten: the same version again is a change to look at.
    assert queued(obj("2"), obj("3"), own) == 1
    # A relist replays the same version: nothing changed.
    assert queued(obj("3"), obj("3"), own) == 0


def test_a_childs_events_sync_its_job_unless_they_only_show_our_own_write() -> None:
    own = OwnWrites()
    seen: list[Any] = []
    added, updated, deleted = _child_handlers("pods", seen.append, own)
    own.wrote("ns/pi", "pods", "ns", "pi-worker-0", "5")
    added(obj("5", "pi-worker-0"))
    assert seen == []
    updated(obj("5", "pi-worker-0"), obj("6", "pi-worker-0"))  # the scheduler bound it
    assert [o["metadata"]["resourceVersion"] for o in seen] == ["5", "6"]
    own.wrote("ns/pi", "pods", "ns", "pi-worker-1", "7")
    deleted(obj("7", "pi-worker-1"))
    assert len(seen) == 3 and len(own) == 0
