"""Requests answered whole (every verb but watches and logs) sent through libcurl, where pycurl
is installed (the extra ``mpi-operator[curl]``; the image and ``make venv`` have it).

A create through urllib3 and ``http.client`` cost 660 to 750 µs of the operator's CPU, most of
it Python code building the request and parsing the answer's status line and headers
(docs/performance.md); through pycurl, libcurl does that work in C and the same create costs
300 to 380 µs. The request is the one urllib3 sent: the same method, target, headers and body
bytes, over HTTP/1.1 with keep-alive, verified against the same CA with the same client
certificate.

Only settings libcurl is given exactly the same way take this path (:mod:`.routes` chooses): a
proxy, a TLS server name of its own or the system's CA store stay with urllib3, and so does a
target urllib3 would escape (:func:`sent_as_is`). So does what needs the answer as a stream
(watches, ``pods/log``); a redirect, which the API server does not send, is sent again through
urllib3's pool manager by the caller (:attr:`Answer.redirected`).

A handle is not thread-safe, and each holds its own TLS state (about 200 KiB): a request takes
an idle handle, with its open connection, or makes one, and gives it back. At most
``in_flight`` handles exist; a request beyond them waits for one to come back, which bounds the
memory a burst of writes can take.

Without pycurl (:data:`INSTALLED`), every request goes through urllib3,
at the cost docs/performance.md measures; nothing else changes.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

try:
    import pycurl
except ImportError:
    INSTALLED = False
else:
    INSTALLED = True

# A request target urllib3 sends unchanged: only characters valid in a path or query (RFC 3986)
# and percent-escapes in upper case. urllib3 escapes anything else (a name in Unicode, a space,
# a fragment) on its way out; such a target stays with urllib3 so that the same bytes go out.
_TARGET_SENT_AS_IS = re.compile(r"(?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-F]{2})*")


def sent_as_is(target: str) -> bool:
    """Whether urllib3 would send this path and query exactly as given."""
    return _TARGET_SENT_AS_IS.fullmatch(target) is not None


class CurlError(ConnectionError):
    """No HTTP answer: libcurl's error (refused, TLS, timeout), with its code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"libcurl error {code}: {message}")
        self.code = code


@dataclass(frozen=True)
class Answer:
    """A whole answer: what the caller reads of it."""

    status: int
    data: bytes
    redirected: bool = False


class CurlPool:
    """libcurl handles for one server, each keeping its connection open between requests."""

    def __init__(
        self,
        *,
        verify: bool,
        ca_file: str | None,
        cert_file: str | None,
        key_file: str | None,
        in_flight: int,
    ) -> None:
        self._verify = verify
        self._ca_file = ca_file
        self._cert_file = cert_file
        self._key_file = key_file
        self._slots = threading.BoundedSemaphore(max(1, in_flight))
        self._idle: list[pycurl.Curl] = []
        self._lock = threading.Lock()
        self._closed = False

    def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float | None,
    ) -> Answer:
        """Send one request and read its whole answer; :class:`CurlError` if none came."""
        with self._slots:
            handle = self._take()
            chunks: list[bytes] = []
            try:
                self._prepare(handle, method, url, headers, body, timeout, chunks.append)
                try:
                    handle.perform()
                except pycurl.error as error:
                    # pycurl's error carries (libcurl's code, its message).
                    code, message = (*error.args, 0, "")[:2]
                    raise CurlError(int(code), str(message)) from None
                status = int(handle.getinfo(pycurl.RESPONSE_CODE))
                redirected = 300 <= status < 400 and bool(handle.getinfo(pycurl.REDIRECT_URL))
            except BaseException:
                handle.close()  # its connection may hold half an answer
                raise
            self._give_back(handle)
        return Answer(status, b"".join(chunks), redirected)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for handle in idle:
            handle.close()

    def _take(self) -> pycurl.Curl:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return pycurl.Curl()

    def _give_back(self, handle: pycurl.Curl) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(handle)
                return
        handle.close()

    def _prepare(
        self,
        handle: pycurl.Curl,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float | None,
        write: Callable[[bytes], None],
    ) -> None:
        # reset() clears the last request's options and keeps the open connection.
        handle.reset()
        handle.setopt(pycurl.NOSIGNAL, 1)
        handle.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
        handle.setopt(pycurl.URL, url)
        if not self._verify:
            handle.setopt(pycurl.SSL_VERIFYPEER, 0)
            handle.setopt(pycurl.SSL_VERIFYHOST, 0)
        elif self._ca_file:
            handle.setopt(pycurl.CAINFO, self._ca_file)
        if self._cert_file:
            handle.setopt(pycurl.SSLCERT, self._cert_file)
        if self._key_file:
            handle.setopt(pycurl.SSLKEY, self._key_file)
        if timeout:
            handle.setopt(pycurl.TIMEOUT_MS, max(1, round(timeout * 1000)))
        if method == "GET" and body is None:
            handle.setopt(pycurl.HTTPGET, 1)
        else:
            handle.setopt(pycurl.CUSTOMREQUEST, method)
            if body is not None:
                handle.setopt(pycurl.POSTFIELDS, body)
        # The headers urllib3 sent: those given, and "Accept-Encoding: identity" (http.client's
        # own). libcurl's defaults are turned off: "Expect: 100-continue" before a large body,
        # a form's content type for any body ("Accept: */*" is replaced by the caller's).
        given = {name.lower() for name in headers}
        lines = [f"{name}: {value}" for name, value in headers.items()]
        if "accept-encoding" not in given:
            lines.append("Accept-Encoding: identity")
        lines.append("Expect:")
        if body is not None and "content-type" not in given:
            lines.append("Content-Type:")
        handle.setopt(pycurl.HTTPHEADER, lines)
        handle.setopt(pycurl.WRITEFUNCTION, write)
