"""Time as a dependency, so rate limits, delays, leases and backoffs are testable without sleeping.

Everything in the runtime that reads or waits on time takes a :class:`Clock`. Production code
uses :data:`REAL_CLOCK`; tests use :class:`FakeClock` and move time forward explicitly, so a
"30 second backoff" is checked in microseconds and never depends on machine load.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards; only differences are meaningful."""
        ...

    def now(self) -> datetime:
        """Wall-clock time, timezone-aware UTC (for timestamps written to the API)."""
        ...

    def sleep(self, seconds: float) -> None: ...

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        """Block until ``event`` is set or ``timeout`` seconds pass; True if the event is set."""
        ...

    def wait_until(self, event: threading.Event, deadline: float | None) -> bool:
        """Like :meth:`wait` with an absolute :meth:`monotonic` deadline. Loops that compute
        "sleep until the earliest due time" use this: a relative timeout computed from a time
        read a moment earlier would overshoot by however much the clock moved meanwhile."""
        ...


class RealClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        if timeout is not None and timeout <= 0:
            return event.is_set()
        return event.wait(timeout)

    def wait_until(self, event: threading.Event, deadline: float | None) -> bool:
        if deadline is None:
            return event.wait()
        return self.wait(event, deadline - time.monotonic())


REAL_CLOCK: Clock = RealClock()

# How often a FakeClock waiter re-checks its event. ``threading.Event.set`` cannot notify our
# condition, so waiters poll it; time itself only moves in ``advance`` and wakes them at once.
_EVENT_POLL_SECONDS = 0.005


class FakeClock:
    """A clock that moves only when a test calls :meth:`advance`.

    Threads blocked in :meth:`sleep` or :meth:`wait` wake as soon as the fake time reaches their
    deadline (or their event is set). :meth:`block_until_waiters` lets a test wait until a
    background thread has gone to sleep on the clock before advancing it, which removes the
    usual "sleep a bit and hope the thread got there" from threaded tests.

    With ``auto_advance=True`` a bounded wait does not block at all: it moves the clock to its
    deadline and returns, so a single-threaded loop full of backoffs runs instantly, and the
    time it "slept" can be read back from :meth:`monotonic`.
    """

    def __init__(
        self,
        monotonic: float = 1000.0,
        wall: datetime = datetime(2026, 1, 1, tzinfo=UTC),
        *,
        auto_advance: bool = False,
    ) -> None:
        if wall.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware wall time")
        self.auto_advance = auto_advance
        self._cond = threading.Condition()
        self._monotonic = monotonic
        self._wall = wall
        self._waiting = 0

    def monotonic(self) -> float:
        with self._cond:
            return self._monotonic

    def now(self) -> datetime:
        with self._cond:
            return self._wall

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time cannot go backwards")
        with self._cond:
            self._monotonic += seconds
            self._wall += timedelta(seconds=seconds)
            self._cond.notify_all()

    def sleep(self, seconds: float) -> None:
        self.wait(threading.Event(), seconds)

    def wait(self, event: threading.Event, timeout: float | None) -> bool:
        with self._cond:
            deadline = None if timeout is None else self._monotonic + timeout
        return self.wait_until(event, deadline)

    def wait_until(self, event: threading.Event, deadline: float | None) -> bool:
        if self.auto_advance and deadline is not None:
            if event.is_set():
                return True
            self.advance(max(0.0, deadline - self.monotonic()))
            return event.is_set()
        with self._cond:
            self._waiting += 1
            self._cond.notify_all()
            try:
                while True:
                    if event.is_set():
                        return True
                    if deadline is not None and self._monotonic >= deadline:
                        return False
                    self._cond.wait(_EVENT_POLL_SECONDS)
            finally:
                self._waiting -= 1
                self._cond.notify_all()

    @property
    def waiters(self) -> int:
        """Threads currently blocked in :meth:`wait` or :meth:`sleep`."""
        with self._cond:
            return self._waiting

    def block_until_waiters(self, count: int, timeout: float = 5.0) -> None:
        """Wait (in real time, bounded) until at least ``count`` threads block on this clock."""
        end = time.monotonic() + timeout
        with self._cond:
            while self._waiting < count:
                remaining = end - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self._waiting} waiters on the fake clock, wanted {count}")
                self._cond.wait(remaining)
