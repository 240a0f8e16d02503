"""FakeClock: time moves only when told, and waiters wake exactly then."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from mpi_operator.runtime.clock import REAL_CLOCK, FakeClock


def test_advance_moves_both_clocks() -> None:
    clock = FakeClock(monotonic=10.0, wall=datetime(2026, 1, 1, tzinfo=UTC))
    clock.advance(2.5)
    assert clock.monotonic() == 12.5
    assert clock.now() == datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=2.5)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_naive_wall_time_is_refused() -> None:
    with pytest.raises(ValueError):
        FakeClock(wall=datetime(2026, 1, 1))


def test_waiter_wakes_only_at_its_deadline() -> None:
    clock = FakeClock()
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(clock.wait(threading.Event(), 5.0)))
    thread.start()
    clock.block_until_waiters(1)
    clock.advance(4.9)
    thread.join(0.05)
    assert thread.is_alive(), "woke before the deadline"
    clock.advance(0.1)
    thread.join(5)
    assert result == [False]


def test_wait_returns_true_when_the_event_is_set() -> None:
    clock = FakeClock()
    event = threading.Event()
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(clock.wait(event, 100.0)))
    thread.start()
    clock.block_until_waiters(1)
    event.set()
    thread.join(5)
    assert result == [True]
    assert clock.waiters == 0


def test_auto_advance_does_not_block() -> None:
    clock = FakeClock(monotonic=0.0, auto_advance=True)
    assert clock.wait(threading.Event(), 3.0) is False
    clock.sleep(2.0)
    assert clock.monotonic() == 5.0


def test_block_until_waiters_times_out() -> None:
    with pytest.raises(TimeoutError):
        FakeClock().block_until_waiters(1, timeout=0.01)


def test_real_clock_is_utc_aware() -> None:
    assert REAL_CLOCK.now().tzinfo is not None
    assert REAL_CLOCK.wait(threading.Event(), 0) is False
