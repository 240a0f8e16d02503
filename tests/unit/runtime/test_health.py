"""Probe endpoints and the metrics listener on 127.0.0.1 with OS-chosen ports."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from mpi_operator.runtime.health import HealthServer, start_metrics_server
from mpi_operator.runtime.leader import IS_LEADER
from mpi_operator.runtime.workqueue import RateLimitingQueue


def fetch(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class Synced:
    def __init__(self, synced: bool) -> None:
        self.synced = synced


@pytest.fixture
def server() -> Iterator[HealthServer]:
    health = HealthServer("127.0.0.1", 0)
    health.start()
    yield health
    health.stop()


def test_port_zero_picks_a_real_port(server: HealthServer) -> None:
    assert server.port > 0
    assert fetch(server.port, "/healthz") == (200, "ok\n")  # no checks: healthy


def test_failing_check_names_itself(server: HealthServer) -> None:
    leading_ok = [True]
    server.add_healthz("leader-election", lambda: leading_ok[0])
    server.add_healthz("ping", lambda: True)
    assert fetch(server.port, "/healthz") == (200, "[+]leader-election ok\n[+]ping ok\nok\n")
    leading_ok[0] = False
    status, body = fetch(server.port, "/healthz")
    assert status == 500
    assert "[-]leader-election failed" in body
    assert "[+]ping ok" in body


def test_raising_check_is_a_failure(server: HealthServer) -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    server.add_readyz("broken", broken)
    assert fetch(server.port, "/readyz")[0] == 500
    assert fetch(server.port, "/healthz")[0] == 200  # readiness checks do not affect liveness


def test_readyz_follows_informer_sync(server: HealthServer) -> None:
    pods, jobs = Synced(True), Synced(False)
    server.add_readyz("informers", lambda: pods.synced and jobs.synced)
    assert fetch(server.port, "/readyz")[0] == 500
    jobs.synced = True
    assert fetch(server.port, "/readyz?verbose") == (200, "[+]informers ok\nok\n")


def test_unknown_path_is_404(server: HealthServer) -> None:
    assert fetch(server.port, "/metrics")[0] == 404


def test_port_requires_start() -> None:
    with pytest.raises(RuntimeError):
        _ = HealthServer("127.0.0.1", 0).port


def test_metrics_server_serves_runtime_metrics() -> None:
    RateLimitingQueue("metrics-endpoint-test").add("x")
    metrics = start_metrics_server(0, "127.0.0.1")
    try:
        status, body = fetch(metrics.port, "/metrics")
        assert status == 200
        assert 'workqueue_adds_total{name="metrics-endpoint-test"} 1.0' in body
        IS_LEADER.set(0)
        assert "\nmpi_operator_is_leader 0.0\n" in fetch(metrics.port, "/metrics")[1]
    finally:
        metrics.stop()
