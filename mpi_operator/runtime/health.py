"""Probe endpoints and the metrics listener.

:class:`HealthServer` answers ``/healthz`` (liveness: the leader-election watchdog) and
``/readyz`` (readiness: informer caches synced) from a stdlib ``ThreadingHTTPServer`` on a
daemon thread. Each endpoint runs its named checks; any failing or raising check makes it answer
500 and name the check, in the ``[+]name ok`` / ``[-]name failed`` style of Kubernetes
components (the list is always in the body, so a probe failure is self-explaining in logs).

Metrics are served by prometheus-client's own server on its own port (upstream serves them
before and regardless of leader election): :func:`start_metrics_server`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from prometheus_client import start_http_server

log = logging.getLogger(__name__)

Check = Callable[[], bool]
"""True when healthy; raising counts as unhealthy."""


class HealthServer:
    """``/healthz`` and ``/readyz``. Port 0 picks a free port; read it from :attr:`port`."""

    def __init__(self, host: str = "0.0.0.0", port: int = 8080) -> None:
        self.host = host
        self.requested_port = port
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

        class Handler(BaseHTTPRequestHandler):
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

            def log_message(self, format: str, *args: object) -> None:
                # Probes hit these every few seconds; access logs would drown everything else.
                return

        server = ThreadingHTTPServer((self.host, self.requested_port), Handler)
        server.daemon_threads = True
        self._server = server
        # A short poll interval only makes stop() prompt; the select() costs nothing.
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="health-server", daemon=True
        )
        self._thread.start()
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


def start_metrics_server(port: int, addr: str = "0.0.0.0") -> MetricsServer:
    """Serve the default Prometheus registry at ``/metrics`` on a daemon thread; port 0 picks a
    free port."""
    server, thread = start_http_server(port, addr)

    def shutdown() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5.0)

    return MetricsServer(int(server.server_port), shutdown)
