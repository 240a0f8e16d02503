"""A rate-limited work queue with client-go's semantics.

The guarantees controllers rely on:

* **Dedup**: a key that is already waiting is not queued twice (the ``dirty`` set), so a burst
  of events for one object costs one reconcile.
* **One worker per key**: a key handed out by :meth:`RateLimitingQueue.get` is ``processing``
  until :meth:`~RateLimitingQueue.done`; if it is added again meanwhile it is only marked dirty
  and goes back into the queue when ``done`` is called. Two workers never see the same key at
  once, which is what makes a reconcile of one object single-threaded.
* **Delays**: :meth:`~RateLimitingQueue.add_after` parks keys in a heap served by one
  background thread that sleeps on the injected clock until the earliest deadline;
  :meth:`~RateLimitingQueue.add_rate_limited` asks the rate limiter for the delay.

Metrics use controller-runtime's names with a ``name`` label. They are created once, at import:
prometheus-client refuses to register a name twice, and several queues (and many tests) share
one process, each queue only using its own label values.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram

from mpi_operator.runtime.clock import REAL_CLOCK, Clock
from mpi_operator.runtime.ratelimit import RateLimiter, controller_rate_limiter

# controller-runtime's buckets: 10 ns … 1000 s, a factor of 10 apart.
_DURATION_BUCKETS = tuple(1e-8 * 10**i for i in range(12))

WORKQUEUE_DEPTH = Gauge("workqueue_depth", "Current depth of the work queue.", ["name"])
WORKQUEUE_ADDS = Counter("workqueue_adds_total", "Keys added to the work queue.", ["name"])
WORKQUEUE_QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds",
    "How long a key waits in the work queue before a worker takes it.",
    ["name"],
    buckets=_DURATION_BUCKETS,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long processing one key takes.",
    ["name"],
    buckets=_DURATION_BUCKETS,
)
WORKQUEUE_UNFINISHED_WORK = Gauge(
    "workqueue_unfinished_work_seconds",
    "Seconds of work in progress that has not been marked done; large values mean stuck workers.",
    ["name"],
)
WORKQUEUE_LONGEST_RUNNING = Gauge(
    "workqueue_longest_running_processor_seconds",
    "Seconds the longest-running worker has been processing its key.",
    ["name"],
)
WORKQUEUE_RETRIES = Counter("workqueue_retries_total", "Delayed re-adds of keys.", ["name"])


class RateLimitingQueue:
    """Keys (``namespace/name`` strings) waiting to be reconciled. Thread-safe."""

    def __init__(
        self,
        name: str,
        rate_limiter: RateLimiter | None = None,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.name = name
        self._clock = clock
        self._limiter = (
            rate_limiter if rate_limiter is not None else controller_rate_limiter(clock=clock)
        )

        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._shutting_down = False
        self._added_at: dict[str, float] = {}
        self._started_at: dict[str, float] = {}

        # Delayed keys: a heap of (ready_at, seq, key). A key has at most one live entry,
        # recorded in _waiting; entries superseded by an earlier deadline stay in the heap and
        # are skipped when popped (cheaper than deleting from the middle of a heap).
        self._delay_lock = threading.Lock()
        self._heap: list[tuple[float, int, str]] = []
        self._waiting: dict[str, tuple[float, int]] = {}
        # Keys whose pending deadline add_when_quiet set: the latest it may be pushed back to.
        self._quiet_until: dict[str, float] = {}
        self._seq = itertools.count()
        self._wake = threading.Event()
        self._delay_thread: threading.Thread | None = None

        self._depth = WORKQUEUE_DEPTH.labels(name)
        self._adds = WORKQUEUE_ADDS.labels(name)
        self._queue_duration = WORKQUEUE_QUEUE_DURATION.labels(name)
        self._work_duration = WORKQUEUE_WORK_DURATION.labels(name)
        self._retries = WORKQUEUE_RETRIES.labels(name)
        self._depth.set(0)
        # Computed at scrape time instead of by a ticker thread. Only a weak reference is
        # captured so a discarded queue is not kept alive by the metric.
        ref = weakref.ref(self)
        WORKQUEUE_UNFINISHED_WORK.labels(name).set_function(
            lambda: _call_or_zero(ref, RateLimitingQueue.unfinished_work_seconds)
        )
        WORKQUEUE_LONGEST_RUNNING.labels(name).set_function(
            lambda: _call_or_zero(ref, RateLimitingQueue.longest_running_seconds)
        )

    # -- the plain queue -----------------------------------------------------------------------

    def add(self, key: str) -> None:
        """Queue ``key`` unless it is already queued; if a worker holds it, queue it after done."""
        with self._cond:
            if self._shutting_down or key in self._dirty:
                return
            self._adds.inc()
            self._depth.inc()
            self._added_at.setdefault(key, self._clock.monotonic())
            self._dirty.add(key)
            if key in self._processing:
                return
            self._queue.append(key)
            self._cond.notify()

    def get(self, timeout: float | None = None) -> str | None:
        """The next key, blocking until there is one.

        Returns None once the queue is shut down and empty (keys still queued at shutdown are
        handed out first), or when ``timeout`` (real seconds; for polling and tests) expires.
        The caller must call :meth:`done` with the key when finished.
        """
        with self._cond:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self._queue and not self._shutting_down:
                if deadline is None:
                    self._cond.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)
            if not self._queue:
                return None
            key = self._queue.popleft()
            now = self._clock.monotonic()
            self._depth.dec()
            added = self._added_at.pop(key, None)
            if added is not None:
                self._queue_duration.observe(max(0.0, now - added))
            self._processing.add(key)
            self._dirty.discard(key)
            self._started_at[key] = now
            return key

    def done(self, key: str) -> None:
        """Mark ``key`` finished; if it was added again while processing, queue it now."""
        with self._cond:
            started = self._started_at.pop(key, None)
            if started is not None:
                self._work_duration.observe(max(0.0, self._clock.monotonic() - started))
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()
            elif not self._processing:
                # Someone may be draining the queue on shutdown.
                self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down

    def is_processing(self, key: str) -> bool:
        with self._cond:
            return key in self._processing

    def shut_down(self) -> None:
        """Refuse new keys, wake every blocked :meth:`get`, stop the delay thread.

        Keys already queued are still handed out, so workers can finish them."""
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()
        self._wake.set()

    def shut_down_with_drain(self, timeout: float | None = None) -> bool:
        """:meth:`shut_down`, then wait until no key is being processed; False on timeout."""
        self.shut_down()
        with self._cond:
            return self._cond.wait_for(lambda: not self._processing, timeout)

    # -- delays --------------------------------------------------------------------------------

    def add_after(self, key: str, delay: float) -> None:
        """Add ``key`` once ``delay`` seconds have passed (keeping an earlier pending deadline)."""
        if self.shutting_down:
            return
        self._retries.inc()
        if delay <= 0:
            self.add(key)
            return
        with self._delay_lock:
            ready_at = self._clock.monotonic() + delay
            pending = self._waiting.get(key)
            if pending is not None and pending[0] <= ready_at:
                return
            self._quiet_until.pop(key, None)
            self._schedule(key, ready_at)

    def add_when_quiet(self, key: str, quiet: float, longest: float) -> None:
        """Add ``key`` once ``quiet`` seconds pass without another such call for it, and at
        most ``longest`` seconds after the first one: a stream of one key's events becomes one
        delivery. Not a retry. A deadline set by :meth:`add_after` is never pushed back: when
        it comes sooner it stands, and when later these events bring it forward (a timer or
        backoff must not keep a job from seeing its children's changes)."""
        if self.shutting_down:
            return
        with self._delay_lock:
            now = self._clock.monotonic()
            pending = self._waiting.get(key)
            until = self._quiet_until.get(key)
            if until is None:
                until = now + longest
                if pending is not None:
                    if pending[0] <= now + quiet:
                        return  # due sooner already; it will see these events
                    until = min(until, pending[0])
                self._quiet_until[key] = until
            self._schedule(key, min(now + quiet, until))

    def _schedule(self, key: str, ready_at: float) -> None:
        """(Holding the delay lock.) ``key``'s one pending deadline becomes ``ready_at``.

        The delay thread, asleep until the earliest deadline, is woken only when this one is
        now the earliest: a stream of events, each pushing one key's quiet deadline later,
        would otherwise wake it once per event for nothing."""
        seq = next(self._seq)
        self._waiting[key] = (ready_at, seq)
        heapq.heappush(self._heap, (ready_at, seq, key))
        if self._delay_thread is None:
            # Started on first use: most tests and some queues never delay anything.
            self._delay_thread = threading.Thread(
                target=self._delay_loop, name=f"workqueue-{self.name}-delay", daemon=True
            )
            self._delay_thread.start()
        if self._heap[0][1] == seq:
            self._wake.set()

    def pending_delayed(self) -> int:
        """Keys waiting for their delay to pass."""
        with self._delay_lock:
            return len(self._waiting)

    def release_due(self) -> float | None:
        """Move every delayed key whose time has come into the queue, now, on this thread.

        The delay thread does this by itself; calling it directly suits clock-driven callers
        and tests (after advancing a fake clock, the due keys are queued when this returns).
        Returns the next pending deadline, if any."""
        now = self._clock.monotonic()
        ready: list[str] = []
        next_due: float | None = None
        with self._delay_lock:
            while self._heap and self._heap[0][0] <= now:
                ready_at, seq, key = heapq.heappop(self._heap)
                if self._waiting.get(key) == (ready_at, seq):
                    del self._waiting[key]
                    self._quiet_until.pop(key, None)
                    ready.append(key)
            if self._heap:
                next_due = self._heap[0][0]
        for key in ready:
            self.add(key)
        return next_due

    def _delay_loop(self) -> None:
        while True:
            # Clear before looking, so an add_after racing with us re-sets it and the wait
            # below returns at once instead of sleeping past the new deadline.
            self._wake.clear()
            if self.shutting_down:
                return
            self._clock.wait_until(self._wake, self.release_due())

    # -- rate limiting -------------------------------------------------------------------------

    def add_rate_limited(self, key: str) -> None:
        """Add ``key`` after the delay the rate limiter assigns (backoff grows per failure)."""
        self.add_after(key, self._limiter.when(key))

    def forget(self, key: str) -> None:
        """Reset ``key``'s backoff; call after a successful reconcile."""
        self._limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return self._limiter.num_requeues(key)

    # -- metrics -------------------------------------------------------------------------------

    def unfinished_work_seconds(self) -> float:
        with self._cond:
            now = self._clock.monotonic()
            return sum(now - start for start in self._started_at.values())

    def longest_running_seconds(self) -> float:
        with self._cond:
            now = self._clock.monotonic()
            return max((now - start for start in self._started_at.values()), default=0.0)


def _call_or_zero(
    ref: weakref.ReferenceType[RateLimitingQueue],
    method: Callable[[RateLimitingQueue], float],
) -> float:
    queue = ref()
    return method(queue) if queue is not None else 0.0
