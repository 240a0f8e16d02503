"""Probe endpoints and the metrics listener.

:class:`HealthServer` answers ``/healthz`` (liveness: the leader-election watchdog) and
``/readyz`` (readiness: informer caches synced) from a stdlib ``ThreadingHTTPServer`` on a
daemon thread. Each endpoint runs its named checks; any failing or raising check makes it answer
500 and name the check, in the ``[+]name ok`` / ``[-]name failed`` style of Kubernetes
components (the list is always in the body, so a probe failure is self-explaining in logs).

Metrics are served by prometheus-client's WSGI app on their own port, by every replica, leader
or not: :func:`start_metrics_server`. They include the counts the process keeps from its first
request on (:mod:`.counts`), which this module's import registers.

Both servers give a connection :data:`REQUEST_TIMEOUT` seconds to send its whole request and
as long again for each write of the answer, then close it: a client that connects and sends
nothing, or a byte now and then, does not hold a thread for good.
"""

from __future__ import annotations

import io
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseServer, ThreadingMixIn
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from mpi_operator.runtime.counts import EXPOSED, Count

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

log = logging.getLogger(__name__)

Check = Callable[[], bool]
"""True when healthy; raising counts as unhealthy."""

REQUEST_TIMEOUT: Final = 5.0
"""Seconds a connection has to send its request line and headers (probes and scrapes send them
at once), and for each write of the answer."""


class _Deadline(io.RawIOBase):
    """A connection's reads, each waiting only for what is left of one deadline."""

    def __init__(self, connection: socket.socket, seconds: float) -> None:
        super().__init__()
        self._connection = connection
        self._deadline = time.monotonic() + seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self._connection.settimeout(left)
        return self._connection.recv_into(buffer)


class _BoundedHandler(BaseHTTPRequestHandler):
    """A request handler whose connection has ``request_timeout`` seconds to send the request;
    quiet, as probes and scrapes come every few seconds."""

    request_timeout: float = REQUEST_TIMEOUT

    def setup(self) -> None:
        super().setup()
        self.rfile.close()
        self.rfile = io.BufferedReader(_Deadline(self.connection, self.request_timeout))

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        # The request is in: the answer's writes get a timeout of their own.
        self.connection.settimeout(self.request_timeout)
        return parsed

    def log_message(self, format: str, *args: object) -> None:
        return


def _serve(server: BaseServer, name: str) -> threading.Thread:
    """Serve on a daemon thread. A short poll interval only makes shutdown() prompt; the
    select() costs nothing."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name=name, daemon=True)
    thread.start()
    return thread


class HealthServer:
    """``/healthz`` and ``/readyz``. Port 0 picks a free port; read it from :attr:`port`."""

    def __init__(
        self, host: str = "0.0.0.0", port: int = 8080, request_timeout: float = REQUEST_TIMEOUT
    ) -> None:
        self.host = host
        self.requested_port = port
        self.request_timeout = request_timeout
        self._checks: dict[str, dict[str, Check]] = {"/healthz": {}, "/readyz": {}}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def add_healthz(self, name: str, check: Check) -> None:
        self._add("/healthz", name, check)

    def add_readyz(self, name: str, check: Check) -> None:
        self._add("/readyz", name, check)

    def _add(self, path: str, name: str, check: Check) -> None:
        with self._lock:
            self._checks[path][name] = check

    def evaluate(self, path: str) -> tuple[bool, list[str]]:
        """Run the checks of ``/healthz`` or ``/readyz``: (all ok, one line per check)."""
        with self._lock:
            checks = dict(self._checks[path])
        ok = True
        lines = []
        for name, check in sorted(checks.items()):
            try:
                passed = bool(check())
            except Exception:
                log.exception("%s check %s raised", path, name)
                passed = False
            ok = ok and passed
            lines.append(f"[{'+' if passed else '-'}]{name} {'ok' if passed else 'failed'}")
        return ok, lines

    def start(self) -> None:
        """Bind and serve on a daemon thread (raises OSError if the port is taken)."""
        if self._server is not None:
            return
        owner = self

        class Handler(_BoundedHandler):
            request_timeout = owner.request_timeout

            def do_GET(self) -> None:
                path = urlsplit(self.path).path.rstrip("/") or "/"
                if path not in ("/healthz", "/readyz"):
                    self._reply(404, "not found\n")
                    return
                ok, lines = owner.evaluate(path)
                verdict = "ok" if ok else f"{path.lstrip('/')} check failed"
                self._reply(200 if ok else 500, "\n".join([*lines, verdict]) + "\n")

            def _reply(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

        server = ThreadingHTTPServer((self.host, self.requested_port), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = _serve(server, "health-server")
        log.info("serving /healthz and /readyz on %s:%d", self.host, self.port)

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was requested)."""
        if self._server is None:
            raise RuntimeError("health server not started")
        return int(self._server.server_address[1])

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(5.0)


@dataclass
class MetricsServer:
    port: int
    _shutdown: Callable[[], None]

    def stop(self) -> None:
        self._shutdown()


class _MetricsHandler(_BoundedHandler, WSGIRequestHandler):
    def handle(self) -> None:
        try:
            super().handle()
        except TimeoutError:
            return  # nothing to answer: the server closes the connection


class _Counts(Collector):
    """The metrics of :mod:`.counts`, read when scraped."""

    def collect(self) -> Iterator[Metric]:
        for metric in EXPOSED:
            if isinstance(metric, Count):
                family = CounterMetricFamily(
                    metric.name, metric.documentation, labels=metric.labelnames
                )
                for labels, value in metric.samples():
                    family.add_metric(labels, value)
                yield family
            else:
                yield GaugeMetricFamily(metric.name, metric.documentation, value=metric.value)


REGISTRY.register(_Counts())


def start_metrics_server(
    port: int, addr: str = "0.0.0.0", request_timeout: float = REQUEST_TIMEOUT
) -> MetricsServer:
    """Serve the default Prometheus registry at ``/metrics`` on a daemon thread, as
    prometheus-client's ``start_http_server`` does (an IPv6 ``addr`` too); port 0 picks a free
    port."""
    infos = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = infos[0]

    class Server(ThreadingMixIn, WSGIServer):
        address_family = family
        daemon_threads = True

    seconds = request_timeout

    class Handler(_MetricsHandler):
        request_timeout = seconds

    server = make_server(str(sockaddr[0]), port, make_wsgi_app(), Server, Handler)
    thread = _serve(server, "metrics-server")

    def shutdown() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5.0)

    return MetricsServer(int(server.server_port), shutdown)
