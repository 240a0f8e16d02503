"""Rate limiters with client-go's arithmetic.

* :class:`TokenBucket` — golang.org/x/time/rate's limiter as client-go uses it: ``burst`` tokens
  to start with, refilled at ``qps`` per second, and every reservation succeeds immediately but
  may have to wait (the bucket goes into debt). Used both for the work queue's global limit and
  for client-side API throttling (``--kube-api-qps/--kube-api-burst``).
* :class:`ItemExponentialFailureRateLimiter` — per-key ``base * 2**failures`` capped at ``max``.
* :class:`MaxOfRateLimiter` — the longest delay of several limiters.
* :func:`controller_rate_limiter` — client-go's default controller limiter: the max of the
  per-item backoff (5 ms … 1000 s) and a global bucket (10 qps, burst 100).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Protocol

from mpi_operator.runtime.clock import REAL_CLOCK, Clock


class RateLimiter(Protocol):
    def when(self, item: Hashable) -> float:
        """Record one more attempt for ``item`` and return how long to wait before it, seconds."""
        ...

    def forget(self, item: Hashable) -> None:
        """The item succeeded: drop its failure history."""
        ...

    def num_requeues(self, item: Hashable) -> int: ...


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up; ``qps <= 0`` means unlimited."""

    def __init__(self, qps: float, burst: int, clock: Clock = REAL_CLOCK) -> None:
        self.qps = qps
        # A finite rate with burst 0 would never admit anything; x/time/rate reports an
        # infinite delay there. One token is the smallest bucket that works.
        self.burst = max(1, burst)
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = float(self.burst)
        self._last = clock.monotonic()

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0

    def reserve(self) -> float:
        """Take one token now and return the delay until it is really available (0 if it is)."""
        if self.unlimited:
            return 0.0
        with self._lock:
            now = self._clock.monotonic()
            elapsed = max(0.0, now - self._last)
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
            self._last = now
            self._tokens -= 1.0
            if self._tokens >= 0:
                return 0.0
            return -self._tokens / self.qps

    def wait(self) -> None:
        """Block until a token is available (client-go's ``Accept`` before each request)."""
        delay = self.reserve()
        if delay > 0:
            self._clock.sleep(delay)

    # The RateLimiter protocol, so a bucket can be one term of MaxOfRateLimiter. A global
    # bucket keeps no per-item state, exactly like client-go's BucketRateLimiter.
    def when(self, item: Hashable = None) -> float:
        return self.reserve()

    def forget(self, item: Hashable) -> None:
        return None

    def num_requeues(self, item: Hashable) -> int:
        return 0


class ItemExponentialFailureRateLimiter:
    """``base * 2**n`` seconds after the n-th consecutive failure of an item, capped."""

    def __init__(self, base: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base = base
        self.max_delay = max_delay
        self._lock = threading.Lock()
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        with self._lock:
            exponent = self._failures.get(item, 0)
            self._failures[item] = exponent + 1
        # Compare exponents before multiplying so a long failure streak cannot overflow.
        if exponent >= 1024:
            return self.max_delay
        return min(self.base * 2.0**exponent, self.max_delay)

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)


class MaxOfRateLimiter:
    """The longest delay any of ``limiters`` asks for; every limiter records every attempt."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        # Not a generator expression inside max(): each limiter must be asked, so the token
        # bucket spends its token and the backoff counts the failure, whichever one wins.
        delays = [limiter.when(item) for limiter in self.limiters]
        return max(delays)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def controller_rate_limiter(
    qps: float = 10.0,
    burst: int = 100,
    *,
    base: float = 0.005,
    max_delay: float = 1000.0,
    clock: Clock = REAL_CLOCK,
) -> MaxOfRateLimiter:
    """client-go's DefaultControllerRateLimiter, with upstream's ``--controller-queue-*`` knobs."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base, max_delay),
        TokenBucket(qps, burst, clock),
    )
