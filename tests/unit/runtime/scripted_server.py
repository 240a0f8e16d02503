"""A local stdlib HTTP server that plays a scripted API server, for the client's tests: it
answers each request with the next scripted reply and records what it was sent."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    chunks: list[bytes] | None = None  # a streamed (chunked) reply, e.g. a watch
    raw: bytes | None = None  # the body's bytes as given, instead of json.dumps(body)
    hold: threading.Event | None = None  # keep the stream open until set
    location: str | None = None  # a redirect's target
    delay: float = 0.0  # seconds a whole reply waits before it is sent


@dataclass
class Seen:
    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, list[str]]
    body: Any
    raw: bytes
    client_port: int = 0


@dataclass
class FakeApiServer:
    replies: deque[Reply] = field(default_factory=deque)
    seen: list[Seen] = field(default_factory=list)
    # Requests being answered at once, and the most there were.
    answering: int = 0
    most_answering: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(state: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            with state.lock:
                state.answering += 1
                state.most_answering = max(state.most_answering, state.answering)
            try:
                self._answer()
            finally:
                with state.lock:
                    state.answering -= 1

        def _answer(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers: dict[str, list[str]] = {}
            for key in set(self.headers.keys()):
                headers[key.lower()] = self.headers.get_all(key) or []
            state.seen.append(
                Seen(self.command, url.path, parse_qsl(url.query), headers,
                     json.loads(raw) if raw else None, raw, self.client_address[1])
            )  # fmt: skip
            with state.lock:
                reply = state.replies.popleft() if state.replies else Reply(404, {"kind": "x"})
            if reply.delay:
                time.sleep(reply.delay)
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            if reply.location is not None:
                self.send_header("Location", reply.location)
            if reply.chunks is not None:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in reply.chunks:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                if reply.hold is not None:
                    reply.hold.wait(10)
                self.wfile.write(b"0\r\n\r\n")
                return
            data = reply.raw if reply.raw is not None else b""
            if reply.body is not None:
                data = json.dumps(reply.body).encode()
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_PUT(self) -> None:
            self._serve()

        def do_PATCH(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@contextmanager
def serving(state: FakeApiServer, tls: ssl.SSLContext | None = None) -> Iterator[int]:
    """Serve ``state`` on a free loopback port (over TLS with ``tls``) while in the block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()


def page(*names: str, resource_version: str, continue_token: str = "") -> Reply:
    """One page of a list reply, with an item of each name."""
    metadata = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return Reply(
        body={"items": [{"metadata": {"name": name}} for name in names], "metadata": metadata}
    )


def status(code: int, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "status": "Failure", "code": code, "reason": reason,
            "message": f"{reason} message"}  # fmt: skip
