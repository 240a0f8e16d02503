"""Probe endpoints and the metrics listener on 127.0.0.1 with OS-chosen ports."""

from __future__ import annotations

import socket
import time
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
        IS_LEADER.set(1)
        assert "\nmpi_operator_is_leader 1.0\n" in fetch(metrics.port, "/metrics")[1]
        IS_LEADER.set(0)
    finally:
        metrics.stop()


# Short, so that the tests wait little; what they assert holds for any value.
QUICK = 0.3
# Far beyond QUICK: only a server that never closes a connection fails to meet it.
GENEROUS = 30.0


@pytest.fixture(params=["health", "metrics"])
def quick(request: pytest.FixtureRequest) -> Iterator[tuple[int, str]]:
    """A server whose connections have QUICK seconds to send their request: port and path."""
    if request.param == "health":
        health = HealthServer("127.0.0.1", 0, request_timeout=QUICK)
        health.start()
        yield health.port, "/healthz"
        health.stop()
    else:
        metrics = start_metrics_server(0, "127.0.0.1", request_timeout=QUICK)
        yield metrics.port, "/metrics"
        metrics.stop()


def closed_by_server(connection: socket.socket) -> bool:
    """Whether the server closes the connection (within GENEROUS seconds), answering nothing."""
    connection.settimeout(GENEROUS)
    try:
        return connection.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_silent_client_is_closed_and_others_are_answered(
    quick: tuple[int, str], capfd: pytest.CaptureFixture[str]
) -> None:
    port, path = quick
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
    clients = [connection.getsockname() for connection in silent]
    try:
        assert fetch(port, path)[0] == 200
        assert all(closed_by_server(connection) for connection in silent)
        assert fetch(port, path)[0] == 200
    finally:
        for connection in silent:
            connection.close()
    # Closed quietly: socketserver prints a traceback naming the client of a request that raised.
    err = capfd.readouterr().err
    assert not [client for client in clients if str(client) in err]


def test_a_client_that_sends_its_request_a_byte_at_a_time_is_closed(
    quick: tuple[int, str],
) -> None:
    port, path = quick
    with socket.create_connection(("127.0.0.1", port)) as slow:
        slow.sendall(f"GET {path} HTTP/1.1\r\n".encode())
        # Each byte comes well within the timeout; the headers never end.
        gave_up = time.monotonic() + GENEROUS
        while time.monotonic() < gave_up:
            try:
                slow.sendall(b"X")
            except (BrokenPipeError, ConnectionResetError):
                break
            slow.settimeout(QUICK / 3)
            try:
                if slow.recv(1024) == b"":
                    break
            except TimeoutError:
                continue
            except ConnectionResetError:
                break
        else:
            pytest.fail(f"the connection was still open after {GENEROUS} s")
    assert fetch(port, path)[0] == 200
