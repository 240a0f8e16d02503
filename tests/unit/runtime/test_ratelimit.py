"""Rate limiter arithmetic, checked against client-go's numbers."""

from __future__ import annotations

import pytest

from mpi_operator.runtime.clock import FakeClock
from mpi_operator.runtime.ratelimit import (
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    TokenBucket,
    controller_rate_limiter,
)


@pytest.mark.parametrize(
    ("qps", "burst", "steps", "expected"),
    [
        # The burst is free, then each token costs 1/qps more than the last.
        (10.0, 3, [0, 0, 0, 0, 0], [0.0, 0.0, 0.0, 0.1, 0.2]),
        # Waiting refills: after 0.5 s at 2 qps one token is back.
        (2.0, 1, [0, 0.5, 0], [0.0, 0.0, 0.5]),
        # Refill is capped at the burst: a long idle period buys only `burst` free tokens.
        (1.0, 2, [0, 0, 100, 0, 0, 0], [0.0, 0.0, 0.0, 0.0, 1.0, 2.0]),
        # Debt is paid back by time: 0.3 s into a 0.5 s debt leaves 0.2 s + one more token.
        (5.0, 1, [0, 0, 0.3], [0.0, 0.2, 0.1]),
        # qps <= 0: unlimited.
        (0.0, 1, [0, 0, 0], [0.0, 0.0, 0.0]),
        (-1.0, 0, [0, 0], [0.0, 0.0]),
    ],
)
def test_token_bucket_delays(
    qps: float, burst: int, steps: list[float], expected: list[float]
) -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps, burst, clock)
    delays = []
    for step in steps:
        clock.advance(step)
        delays.append(round(bucket.reserve(), 9))
    assert delays == expected


def test_token_bucket_wait_sleeps_on_the_clock() -> None:
    clock = FakeClock(monotonic=0.0, auto_advance=True)
    bucket = TokenBucket(4.0, 1, clock)
    bucket.wait()
    bucket.wait()
    bucket.wait()
    assert clock.monotonic() == pytest.approx(0.5)


def test_burst_zero_still_admits_one_token() -> None:
    bucket = TokenBucket(1.0, 0, FakeClock())
    assert bucket.burst == 1
    assert bucket.reserve() == 0.0
    assert bucket.reserve() == pytest.approx(1.0)


def test_exponential_backoff_doubles_per_item_and_caps() -> None:
    limiter = ItemExponentialFailureRateLimiter(base=0.005, max_delay=1000.0)
    delays = [limiter.when("a") for _ in range(20)]
    assert delays[:5] == [0.005, 0.01, 0.02, 0.04, 0.08]
    assert delays[17] == pytest.approx(655.36)
    assert delays[18:] == [1000.0, 1000.0]
    assert limiter.num_requeues("a") == 20
    # Other items have their own history.
    assert limiter.when("b") == 0.005
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005


def test_exponential_backoff_survives_huge_exponents() -> None:
    limiter = ItemExponentialFailureRateLimiter(base=1.0, max_delay=60.0)
    for _ in range(2000):
        delay = limiter.when("x")
    assert delay == 60.0


def test_max_of_asks_every_limiter() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1.0, 1, clock)
    backoff = ItemExponentialFailureRateLimiter(base=0.5, max_delay=100.0)
    limiter = MaxOfRateLimiter(backoff, bucket)
    assert limiter.when("a") == 0.5  # backoff wins; the bucket still spent its token
    assert limiter.when("b") == 1.0  # bucket debt wins over b's first backoff
    assert backoff.num_requeues("b") == 1
    assert limiter.num_requeues("a") == 1
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    with pytest.raises(ValueError):
        MaxOfRateLimiter()


def test_controller_rate_limiter_matches_client_go_defaults() -> None:
    clock = FakeClock()
    limiter = controller_rate_limiter(clock=clock)
    # 100 distinct keys fit in the burst with only their 5 ms first backoff...
    assert {limiter.when(f"key-{i}") for i in range(100)} == {0.005}
    # ...the 101st pays the global 10 qps.
    assert limiter.when("key-100") == pytest.approx(0.1)
    # A key failing repeatedly is governed by its own backoff.
    assert limiter.when("key-0") == pytest.approx(0.2)  # bucket debt 0.2 > backoff 0.01
    clock.advance(100)
    assert limiter.when("key-0") == pytest.approx(0.02)
