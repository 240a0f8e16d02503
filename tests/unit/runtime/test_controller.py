"""Controller result handling (each branch), metrics, log context, one key one worker."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable

import pytest
from prometheus_client import REGISTRY

from mpi_operator.runtime.clock import FakeClock
from mpi_operator.runtime.controller import Controller, Result, TerminalError
from mpi_operator.runtime.log_context import (
    ReconcileContextFilter,
    current_key,
    install_log_record_context,
)
from mpi_operator.runtime.ratelimit import ItemExponentialFailureRateLimiter
from mpi_operator.runtime.workqueue import RateLimitingQueue

_names = itertools.count()


def setup(
    reconcile: Callable[[str], Result | None], workers: int = 1
) -> tuple[Controller, RateLimitingQueue, FakeClock]:
    clock = FakeClock()
    name = f"ctrl-{next(_names)}"
    queue = RateLimitingQueue(
        name, ItemExponentialFailureRateLimiter(base=1.0, max_delay=60.0), clock
    )
    return Controller(name, queue, reconcile, workers, clock=clock), queue, clock


def total(controller: Controller, result: str) -> float:
    value = REGISTRY.get_sample_value(
        "controller_runtime_reconcile_total", {"controller": controller.name, "result": result}
    )
    return value or 0.0


def counter(name: str, controller: Controller) -> float:
    return REGISTRY.get_sample_value(name, {"controller": controller.name}) or 0.0


def fail_once_then(result: Result | None) -> Callable[[str], Result | None]:
    calls = itertools.count()

    def reconcile(key: str) -> Result | None:
        if next(calls) == 0:
            raise RuntimeError("transient")
        return result

    return reconcile


def test_error_requeues_with_growing_backoff() -> None:
    def reconcile(key: str) -> Result:
        raise RuntimeError("API unavailable")

    controller, queue, clock = setup(reconcile)
    queue.add("ns/a")
    for attempt in range(1, 4):
        assert controller.process_next_item(timeout=0)
        assert queue.num_requeues("ns/a") == attempt
        assert len(queue) == 0
        assert queue.pending_delayed() == 1
        clock.advance(2 ** (attempt - 1) - 0.001)
        queue.release_due()
        assert len(queue) == 0, "released before its backoff"
        clock.advance(0.001)
        queue.release_due()
        assert len(queue) == 1
    assert total(controller, "error") == 3
    assert counter("controller_runtime_reconcile_errors_total", controller) == 3
    assert counter("controller_runtime_terminal_reconcile_errors_total", controller) == 0


def test_success_forgets_the_backoff() -> None:
    controller, queue, _ = setup(fail_once_then(None))
    queue.add("ns/a")
    controller.process_next_item(timeout=0)
    assert queue.num_requeues("ns/a") == 1
    queue.add("ns/a")  # an event arrives before the backoff ends
    controller.process_next_item(timeout=0)
    assert queue.num_requeues("ns/a") == 0
    assert total(controller, "success") == 1
    assert total(controller, "error") == 1


def test_terminal_error_is_not_retried() -> None:
    calls: list[str] = []

    def reconcile(key: str) -> Result:
        calls.append(key)
        if len(calls) == 1:
            raise RuntimeError("first a transient failure")
        raise TerminalError("spec can never work")

    controller, queue, clock = setup(reconcile)
    queue.add("ns/a")
    controller.process_next_item(timeout=0)
    clock.advance(1.0)
    queue.release_due()
    controller.process_next_item(timeout=0)
    assert calls == ["ns/a", "ns/a"]
    assert queue.num_requeues("ns/a") == 0
    assert queue.pending_delayed() == 0
    assert len(queue) == 0
    assert counter("controller_runtime_terminal_reconcile_errors_total", controller) == 1
    assert counter("controller_runtime_reconcile_errors_total", controller) == 2


def test_requeue_after_forgets_and_delays_exactly() -> None:
    controller, queue, clock = setup(fail_once_then(Result(requeue_after=7.0)))
    queue.add("ns/a")
    controller.process_next_item(timeout=0)  # fails: backoff 1
    clock.advance(1.0)
    queue.release_due()
    controller.process_next_item(timeout=0)  # succeeds with requeue_after
    assert queue.num_requeues("ns/a") == 0
    clock.advance(6.999)
    queue.release_due()
    assert len(queue) == 0
    clock.advance(0.001)
    queue.release_due()
    assert len(queue) == 1
    assert total(controller, "requeue_after") == 1


@pytest.mark.parametrize("result", [Result(), None, Result(requeue_after=0)])
def test_zero_results_are_success(result: Result | None) -> None:
    controller, queue, _ = setup(lambda key: result)
    queue.add("ns/a")
    controller.process_next_item(timeout=0)
    assert len(queue) == 0
    assert queue.pending_delayed() == 0
    assert total(controller, "success") == 1


def test_reconcile_logs_carry_the_key(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("tests.reconcile")

    def reconcile(key: str) -> None:
        logger.info("creating pods")

    controller, queue, _ = setup(reconcile)
    caplog.handler.addFilter(ReconcileContextFilter())
    with caplog.at_level(logging.INFO, logger="tests.reconcile"):
        queue.add("ns/job-1")
        controller.process_next_item(timeout=0)
        logger.info("outside")
    records = [r for r in caplog.records if r.name == "tests.reconcile"]
    assert [(r.getMessage(), r.reconcile_key) for r in records] == [  # type: ignore[attr-defined]
        ("creating pods", "ns/job-1"),
        ("outside", ""),
    ]
    assert records[0].reconcile_context == f"[{controller.name} ns/job-1] "  # type: ignore[attr-defined]
    assert current_key() == ""


def raise_(error: Exception) -> Callable[[str], Result | None]:
    def reconcile(key: str) -> Result | None:
        raise error

    return reconcile


@pytest.mark.parametrize(
    ("reconcile", "outcome"),
    [
        (lambda key: None, "success"),
        (lambda key: Result(requeue_after=2.0), "requeue_after"),
        (raise_(RuntimeError("API unavailable")), "error"),
        (raise_(TerminalError("invalid")), "error"),
    ],
    ids=["success", "requeue after", "error", "terminal error"],
)
def test_every_reconcile_logs_one_debug_line_with_its_outcome(
    reconcile: Callable[[str], Result | None], outcome: str, caplog: pytest.LogCaptureFixture
) -> None:
    controller, queue, _ = setup(reconcile)
    with caplog.at_level(logging.DEBUG, logger="mpi_operator.runtime.controller"):
        queue.add("ns/job-1")
        controller.process_next_item(timeout=0)
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.DEBUG and "reconciled" in r.getMessage()
    ]
    assert lines == [f"{controller.name}: ns/job-1: reconciled: {outcome} in 0.000 s"]


def test_never_two_workers_on_one_key_and_workers_run_in_parallel() -> None:
    lock = threading.Condition()
    running: list[str] = []
    started: list[str] = []
    overlap: list[str] = []
    release_a = threading.Event()

    def reconcile(key: str) -> None:
        with lock:
            if key in running:
                overlap.append(key)
            running.append(key)
            started.append(key)
            lock.notify_all()
        if key == "ns/a" and started.count("ns/a") == 1:
            release_a.wait(5)
        with lock:
            running.remove(key)
            lock.notify_all()

    controller, queue, _ = setup(reconcile, workers=3)
    controller.start()
    queue.add("ns/a")
    with lock:
        assert lock.wait_for(lambda: "ns/a" in running, timeout=5)
    # 'a' is busy: re-adding it must not reach the idle workers; 'b' must.
    queue.add("ns/a")
    queue.add("ns/a")
    queue.add("ns/b")
    with lock:
        assert lock.wait_for(lambda: "ns/b" in started and "ns/b" not in running, timeout=5)
        assert started.count("ns/a") == 1
    release_a.set()
    with lock:
        assert lock.wait_for(lambda: started.count("ns/a") == 2 and not running, timeout=5)
    assert controller.shutdown(timeout=5)
    assert overlap == []
    assert started == ["ns/a", "ns/b", "ns/a"]
    assert (
        REGISTRY.get_sample_value(
            "controller_runtime_max_concurrent_reconciles", {"controller": controller.name}
        )
        == 3
    )
    assert counter("controller_runtime_active_workers", controller) == 0


def test_shutdown_waits_for_the_running_reconcile() -> None:
    entered = threading.Event()
    release = threading.Event()
    finished: list[str] = []

    def reconcile(key: str) -> None:
        entered.set()
        release.wait(5)
        finished.append(key)

    controller, queue, _ = setup(reconcile, workers=2)
    stop = threading.Event()
    runner = threading.Thread(target=controller.run, args=(stop,))
    runner.start()
    queue.add("ns/a")
    assert entered.wait(5)
    stop.set()
    runner.join(0.05)
    assert runner.is_alive(), "run() returned while a reconcile was still running"
    release.set()
    runner.join(5)
    assert not runner.is_alive()
    assert finished == ["ns/a"]
    queue.add("ns/late")  # refused after shutdown
    assert len(queue) == 0


def test_zero_workers_is_refused() -> None:
    with pytest.raises(ValueError):
        setup(lambda key: None, workers=0)


def test_log_record_factory_annotates_every_record() -> None:
    install_log_record_context()
    install_log_record_context()  # idempotent
    seen: list[str] = []

    def reconcile(key: str) -> None:
        record = logging.getLogger("anything").makeRecord(
            "anything", logging.INFO, __file__, 1, "msg", (), None
        )
        seen.append(record.reconcile_context)  # type: ignore[attr-defined]

    controller, queue, _ = setup(reconcile)
    queue.add("ns/a")
    controller.process_next_item(timeout=0)
    assert seen == [f"[{controller.name} ns/a] "]
