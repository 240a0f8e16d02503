"""RateLimitingQueue: client-go's dedup, one-worker-per-key, delays and backoff."""

from __future__ import annotations

import itertools
import threading
from collections import Counter

import pytest
from prometheus_client import REGISTRY

from mpi_operator.runtime.clock import FakeClock
from mpi_operator.runtime.ratelimit import ItemExponentialFailureRateLimiter
from mpi_operator.runtime.workqueue import RateLimitingQueue

_names = itertools.count()


def new_queue(clock: FakeClock | None = None, **kwargs: object) -> RateLimitingQueue:
    # Distinct metric label per test, so metric assertions see only this queue.
    return RateLimitingQueue(
        f"test-{next(_names)}",
        clock=clock or FakeClock(),
        rate_limiter=ItemExponentialFailureRateLimiter(base=1.0, max_delay=30.0),
    )


def metric(name: str, queue: RateLimitingQueue) -> float:
    value = REGISTRY.get_sample_value(name, {"name": queue.name})
    return 0.0 if value is None else value


def test_queued_keys_are_deduplicated_and_fifo() -> None:
    q = new_queue()
    for key in ["a", "b", "a", "c", "b"]:
        q.add(key)
    assert len(q) == 3
    assert [q.get(0), q.get(0), q.get(0)] == ["a", "b", "c"]
    assert q.get(0) is None  # timeout, nothing left
    assert metric("workqueue_adds_total", q) == 3


def test_key_added_while_processing_is_requeued_after_done() -> None:
    q = new_queue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 0, "a worker holds 'a': it must not be handed out again"
    assert q.get(0) is None
    q.done("a")
    assert len(q) == 1
    assert q.get(0) == "a"
    q.done("a")
    assert len(q) == 0
    assert metric("workqueue_depth", q) == 0


def test_done_without_readd_does_not_requeue() -> None:
    q = new_queue()
    q.add("a")
    key = q.get(0)
    assert key == "a"
    q.done(key)
    assert len(q) == 0
    assert not q.is_processing("a")


def test_one_key_never_reaches_two_workers_at_once() -> None:
    q = new_queue()
    keys = ["k0", "k1", "k2"]
    lock = threading.Condition()
    active: Counter[str] = Counter()
    processed: Counter[str] = Counter()
    overlaps: list[str] = []
    readds_left = {key: 30 for key in keys}

    def worker() -> None:
        while (key := q.get()) is not None:
            with lock:
                active[key] += 1
                if active[key] > 1:
                    overlaps.append(key)
                more = readds_left[key] > 0
                readds_left[key] -= 1
            if more:
                # Re-adding our own key while we hold it: the queue must park it as dirty.
                q.add(key)
                q.add(key)
            with lock:
                active[key] -= 1
                processed[key] += 1
                lock.notify_all()
            q.done(key)

    workers = [threading.Thread(target=worker) for _ in range(4)]
    for thread in workers:
        thread.start()
    for key in keys:
        q.add(key)
    # Every key is processed once, then once per re-add round (the duplicate add dedups).
    with lock:
        lock.wait_for(lambda: all(processed[key] == 31 for key in keys), timeout=10)
    q.shut_down()
    for thread in workers:
        thread.join(5)
    assert overlaps == []
    assert dict(processed) == {key: 31 for key in keys}


def test_shutdown_unblocks_get_but_hands_out_queued_keys_first() -> None:
    q = new_queue()
    results: list[str | None] = []
    waiter = threading.Thread(target=lambda: results.append(q.get()))
    waiter.start()
    q.shut_down()
    waiter.join(5)
    assert results == [None]

    q2 = new_queue()
    q2.add("left")
    q2.shut_down()
    q2.add("ignored")
    assert q2.get() == "left"
    assert q2.get() is None
    assert q2.shutting_down


def test_shutdown_with_drain_waits_for_running_work() -> None:
    q = new_queue()
    q.add("a")
    assert q.get(0) == "a"
    assert q.shut_down_with_drain(timeout=0.01) is False
    finisher = threading.Timer(0.01, q.done, args=("a",))
    finisher.start()
    assert q.shut_down_with_drain(timeout=5) is True
    finisher.join()


def test_add_after_releases_keys_in_deadline_order() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add_after("late", 5.0)
    q.add_after("early", 2.0)
    q.add_after("now", 0)
    assert q.get(0) == "now"
    assert q.pending_delayed() == 2

    clock.advance(1.9)
    q.release_due()
    assert len(q) == 0
    clock.advance(0.1)
    q.release_due()
    assert q.get(0) == "early"
    assert len(q) == 0
    clock.advance(3.0)
    q.release_due()
    assert q.get(0) == "late"
    assert q.pending_delayed() == 0
    q.shut_down()


def test_delay_thread_releases_keys_by_itself() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add_after("a", 3.0)
    clock.advance(3.0)
    assert q.get(5) == "a"  # moved by the background thread, no release_due() here
    q.shut_down()


def test_add_after_keeps_the_earlier_deadline() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add_after("a", 10.0)
    q.add_after("a", 1.0)  # moves it earlier
    q.add_after("a", 20.0)  # ignored: already due sooner
    assert q.pending_delayed() == 1
    clock.advance(1.0)
    q.release_due()
    assert q.get(0) == "a"
    q.done("a")
    # The superseded 10 s and 20 s entries must not add it again.
    clock.advance(30.0)
    assert q.release_due() is None
    assert len(q) == 0
    q.shut_down()


def test_a_stream_of_events_of_one_key_is_one_delivery_once_quiet() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    for _ in range(3):  # three child events of one job, each within the quiet time
        q.add_when_quiet("a", 1.0, 5.0)
        clock.advance(0.75)
        q.release_due()
        assert q.get(0) is None
    clock.advance(0.25)  # a second after the last one
    q.release_due()
    assert q.get(0) == "a"
    q.done("a")
    assert q.get(0) is None and q.pending_delayed() == 0
    assert metric("workqueue_retries_total", q) == 0
    q.shut_down()


def test_a_stream_that_never_goes_quiet_is_delivered_after_the_longest_wait() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    for _ in range(10):
        q.add_when_quiet("a", 1.0, 5.0)
        clock.advance(0.5)
        q.release_due()
        if q.get(0) == "a":
            break
    assert clock.monotonic() == 1005.0  # FakeClock starts at 1000
    q.done("a")
    q.shut_down()


@pytest.mark.parametrize(
    ("timer", "delivered_at"),
    [
        pytest.param(0.5, 0.5, id="an earlier retry is not pushed back"),
        # A sync that waits (for its writes to show, or for a launcher to start) must still
        # see a child's change a second later, not at its timer.
        pytest.param(30.0, 1.0, id="a later timer is brought forward"),
    ],
)
def test_events_and_a_pending_timer_deliver_at_the_earlier(
    timer: float, delivered_at: float
) -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add_after("a", timer)
    q.add_when_quiet("a", 1.0, 5.0)
    clock.advance(delivered_at)
    q.release_due()
    assert q.get(0) == "a"
    q.done("a")
    clock.advance(60.0)
    q.release_due()
    assert q.get(0) is None  # delivered once, the other deadline not kept beside it
    q.shut_down()


def test_events_never_push_a_timer_back() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add_after("a", 2.0)
    for _ in range(2):  # each within the quiet time: without the timer, due at 2.8 s
        q.add_when_quiet("a", 1.0, 5.0)
        clock.advance(0.9)
        q.release_due()
        assert q.get(0) is None
    q.add_when_quiet("a", 1.0, 5.0)
    clock.advance(0.2)  # 2 s after the timer was set
    q.release_due()
    assert q.get(0) == "a"
    q.done("a")
    q.shut_down()


class CountingEvent(threading.Event):
    def __init__(self) -> None:
        super().__init__()
        self.sets = 0

    def set(self) -> None:
        self.sets += 1
        super().set()


def test_the_delay_thread_is_woken_only_for_a_sooner_deadline() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    wake = CountingEvent()
    q._wake = wake  # what the delay thread sleeps on besides the clock
    q.add_when_quiet("a", 1.0, 5.0)  # the first deadline: wakes it
    clock.block_until_waiters(1)
    q.add_when_quiet("b", 2.0, 5.0)  # later than a's: it sleeps on
    q.add_when_quiet("a", 1.0, 5.0)  # a's deadline again, not sooner
    q.add_after("b", 3.0)  # b is due sooner already: ignored
    assert wake.sets == 1
    q.add_after("c", 0.5)  # sooner than everything: wakes it
    assert wake.sets == 2
    released = []
    for step in (0.5, 0.5, 1.0):
        clock.advance(step)
        key = q.get(5)  # moved by the delay thread
        assert key is not None
        released.append(key)
        q.done(key)
    assert released == ["c", "a", "b"]
    q.shut_down()


def test_rate_limited_requeues_back_off_until_forgotten() -> None:
    clock = FakeClock()
    q = new_queue(clock)

    def delay_of_next_requeue() -> float:
        q.add_rate_limited("a")
        start = clock.monotonic()
        while q.get(0) is None:  # step a second at a time until the key is due
            clock.advance(1.0)
            q.release_due()
        q.done("a")
        return clock.monotonic() - start

    waits = [delay_of_next_requeue() for _ in range(4)]
    assert waits == [1.0, 2.0, 4.0, 8.0]
    assert q.num_requeues("a") == 4
    q.forget("a")
    assert q.num_requeues("a") == 0
    assert delay_of_next_requeue() == 1.0
    assert metric("workqueue_retries_total", q) == 5
    q.shut_down()


def test_metrics_track_depth_and_durations() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add("a")
    q.add("b")
    assert metric("workqueue_depth", q) == 2
    clock.advance(3.0)
    assert q.get(0) == "a"
    assert metric("workqueue_depth", q) == 1
    assert metric("workqueue_queue_duration_seconds_sum", q) == pytest.approx(3.0)
    clock.advance(2.0)
    assert metric("workqueue_unfinished_work_seconds", q) == pytest.approx(2.0)
    assert metric("workqueue_longest_running_processor_seconds", q) == pytest.approx(2.0)
    q.done("a")
    assert metric("workqueue_work_duration_seconds_count", q) == 1
    assert metric("workqueue_work_duration_seconds_sum", q) == pytest.approx(2.0)
    assert metric("workqueue_unfinished_work_seconds", q) == 0


def test_two_queues_with_one_name_share_metrics_without_error() -> None:
    # Metric objects are module-level: creating queues repeatedly must not re-register them.
    first = RateLimitingQueue("shared-name", clock=FakeClock())
    second = RateLimitingQueue("shared-name", clock=FakeClock())
    first.add("x")
    second.add("y")
    assert REGISTRY.get_sample_value("workqueue_adds_total", {"name": "shared-name"}) == 2
