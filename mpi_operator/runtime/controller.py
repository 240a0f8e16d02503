"""Worker threads that take keys from a queue and reconcile them, with controller-runtime's
result handling and metrics.

What happens to a key after ``reconcile(key)``:

=================================  ==========================================  ===============
outcome                            queue                                       ``result`` label
=================================  ==========================================  ===============
raises :class:`TerminalError`      ``forget``; not retried                     ``error``
raises anything else               ``add_rate_limited`` (growing backoff)      ``error``
``Result(requeue_after=s)``, s>0   ``forget`` + ``add_after(s)``               ``requeue_after``
``None`` / ``Result()``            ``forget``                                  ``success``
=================================  ==========================================  ===============

The queue hands a key to one worker at a time, so a reconcile never runs concurrently with
another reconcile of the same key, whatever the number of workers.

Logging: while a reconcile runs, its key and the controller's name are the log context
(:mod:`.log_context`), so lines logged by the reconcile code — at any depth, through any
logger — carry ``namespace/name`` without passing a logger around.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram

from mpi_operator.runtime.client import ApiError
from mpi_operator.runtime.clock import REAL_CLOCK, Clock
from mpi_operator.runtime.log_context import reconciling
from mpi_operator.runtime.workqueue import RateLimitingQueue

log = logging.getLogger(__name__)

# controller-runtime's buckets for reconcile latency (5 ms … 60 s).
_RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,
    15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
)  # fmt: skip

RESULT_SUCCESS = "success"
RESULT_ERROR = "error"
RESULT_REQUEUE_AFTER = "requeue_after"
_RESULTS = (RESULT_SUCCESS, RESULT_ERROR, RESULT_REQUEUE_AFTER)

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Reconciles per controller and result.",
    ["controller", "result"],
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total",
    "Reconciles that raised.",
    ["controller"],
)
TERMINAL_RECONCILE_ERRORS = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Reconciles that raised a terminal (not retried) error.",
    ["controller"],
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Duration of reconciles.",
    ["controller"],
    buckets=_RECONCILE_BUCKETS,
)
MAX_CONCURRENT_RECONCILES = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Worker threads per controller.",
    ["controller"],
)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Workers currently running a reconcile.",
    ["controller"],
)


@dataclass(frozen=True)
class Result:
    """What to do with the key after a successful reconcile (the default: nothing)."""

    requeue_after: float | None = None
    """Seconds; reconcile again after this long, with the failure backoff reset."""


class TerminalError(Exception):
    """An error retrying cannot fix (invalid input): logged and counted, not requeued."""


Reconciler = Callable[[str], "Result | None"]


class Controller:
    """``workers`` threads reconciling keys from ``queue``."""

    def __init__(
        self,
        name: str,
        queue: RateLimitingQueue,
        reconcile: Reconciler,
        workers: int = 1,
        *,
        quiet_errors: tuple[type[BaseException], ...] = (ApiError,),
        clock: Clock = REAL_CLOCK,
    ) -> None:
        """``quiet_errors`` are logged without a traceback: their message says it all (an API
        conflict, say), while anything else is a bug worth a stack."""
        if workers < 1:
            raise ValueError("a controller needs at least one worker")
        self.name = name
        self.queue = queue
        self.workers = workers
        self._reconcile = reconcile
        self._quiet_errors = quiet_errors
        self._clock = clock
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._total = {result: RECONCILE_TOTAL.labels(name, result) for result in _RESULTS}
        self._errors = RECONCILE_ERRORS.labels(name)
        self._terminal = TERMINAL_RECONCILE_ERRORS.labels(name)
        self._time = RECONCILE_TIME.labels(name)
        self._active = ACTIVE_WORKERS.labels(name)

    def start(self) -> None:
        """Start the worker threads (daemons; idempotent)."""
        with self._lock:
            if self._threads:
                return
            MAX_CONCURRENT_RECONCILES.labels(self.name).set(self.workers)
            for index in range(self.workers):
                thread = threading.Thread(
                    target=self._work, name=f"{self.name}-worker-{index}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        log.info("%s: started %d workers", self.name, self.workers)

    def run(self, stop: threading.Event, drain_timeout: float | None = 30.0) -> None:
        """Start, block until ``stop`` is set, then :meth:`shutdown`."""
        self.start()
        stop.wait()
        self.shutdown(drain_timeout)

    def shutdown(self, timeout: float | None = 30.0) -> bool:
        """Stop taking new keys, let running reconciles finish, join the workers.

        True if everything ended within ``timeout`` seconds."""
        drained = self.queue.shut_down_with_drain(timeout)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout)
        finished = drained and not any(thread.is_alive() for thread in threads)
        if not finished:
            log.warning("%s: workers still running after %s s", self.name, timeout)
        return finished

    def _work(self) -> None:
        while self.process_next_item():
            pass

    def process_next_item(self, timeout: float | None = None) -> bool:
        """Take one key and reconcile it; False when the queue is shut down (or ``timeout``
        passed with nothing to do). Workers loop on this; tests may call it directly."""
        key = self.queue.get(timeout)
        if key is None:
            return False
        self._active.inc()
        start = self._clock.monotonic()
        outcome = RESULT_ERROR
        with reconciling(self.name, key):
            try:
                outcome = self._handle(key)
                self._total[outcome].inc()
            finally:
                elapsed = max(0.0, self._clock.monotonic() - start)
                self._time.observe(elapsed)
                # One line a reconcile at -v 4 (upstream logs one a sync by default): what a
                # benchmark reads to tell when every key was synced after a restart.
                log.debug("%s: %s: reconciled: %s in %.3f s", self.name, key, outcome, elapsed)
                self._active.dec()
                self.queue.done(key)
        return True

    def _handle(self, key: str) -> str:
        """Reconcile ``key`` and queue it as its outcome says; the outcome's ``result`` label,
        which the caller counts."""
        try:
            result = self._reconcile(key) or Result()
        except TerminalError as error:
            # Retrying cannot help; a later event about the object starts over cleanly.
            self.queue.forget(key)
            self._terminal.inc()
            self._errors.inc()
            log.error("%s: %s: reconcile failed permanently: %s", self.name, key, error)
            return RESULT_ERROR
        except Exception as error:
            self.queue.add_rate_limited(key)
            self._errors.inc()
            log.error(
                "%s: %s: reconcile failed (retry %d): %s",
                self.name,
                key,
                self.queue.num_requeues(key),
                error,
                exc_info=not isinstance(error, self._quiet_errors),
            )
            return RESULT_ERROR
        if result.requeue_after is not None and result.requeue_after > 0:
            self.queue.forget(key)
            self.queue.add_after(key, result.requeue_after)
            log.debug("%s: %s: requeue after %.3f s", self.name, key, result.requeue_after)
            return RESULT_REQUEUE_AFTER
        self.queue.forget(key)
        return RESULT_SUCCESS
