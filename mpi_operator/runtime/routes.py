"""Which way each request of a client reaches the API server.

There are three ways, and which one a request takes depends on the client's connection settings
(decided once per client, :func:`routes_for`) and on the request (:meth:`Routes.of`):

- libcurl (:mod:`.curl`) sends a request answered whole whose target urllib3 would send as is,
  with one timeout for the whole request: urllib3's Python code cost most of a write's CPU
  (docs/performance.md). Only where pycurl is installed and the settings are ones libcurl takes
  exactly as urllib3 does.
- The server's urllib3 pool sends the rest (watches and logs, which stream; a (connect, read)
  timeout; a target urllib3 would escape), and everything where libcurl cannot: the pool
  manager's own work (parsing the URL, choosing the pool) costs a share of a write's CPU.
- urllib3's pool manager sends everything through a proxy (it picks the proxy's pool and the
  URL's form) or to an address urllib3 would write otherwise (``HTTPS://Host``, a socket
  path), and sends again every request answered with a redirect, which the API server does not send:
  it asks again and follows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Final
from urllib.parse import urlsplit

from mpi_operator.runtime import curl
from mpi_operator.runtime.kubeconfig import Configuration


class Route(Enum):
    LIBCURL = "libcurl"
    SERVER_POOL = "the server's urllib3 pool"
    POOL_MANAGER = "urllib3's pool manager"


REDIRECT_ROUTE = Route.POOL_MANAGER
"""Where a request answered with a redirect is sent again, whichever route it took first."""


@dataclass(frozen=True)
class Routes:
    """The routes of one client's requests."""

    whole: Route
    """A request answered whole, its target sent as is, with one timeout."""
    other: Route
    """Every other request: a stream, a (connect, read) timeout, a target urllib3 escapes."""
    reason: str
    """Why, in words: the client logs it at debug when it is made."""

    def of(self, target: str, *, stream: bool, split_timeout: bool) -> Route:
        """The route of one request; ``target`` is its path and query."""
        if self.whole is self.other or stream or split_timeout or not curl.sent_as_is(target):
            return self.other
        return self.whole


def routes_for(configuration: Configuration) -> Routes:
    if configuration.proxy:
        return _everything(Route.POOL_MANAGER, "through a proxy, which the pool manager picks")
    if not configuration.host.startswith(origin_of(configuration.host)):
        return _everything(Route.POOL_MANAGER, "an address urllib3 would write otherwise")
    refusal = curl_refusal(configuration)
    if refusal:
        return _everything(Route.SERVER_POOL, f"not libcurl: {refusal}")
    return Routes(
        Route.LIBCURL,
        Route.SERVER_POOL,
        "answered whole through libcurl; streams and targets urllib3 escapes through "
        "the server's urllib3 pool",
    )


def curl_refusal(configuration: Configuration) -> str:
    """Why libcurl may not send this server's requests, or "": pycurl is not installed, or a
    setting is one libcurl would not take the same way as urllib3."""
    scheme = urlsplit(configuration.host).scheme
    if not curl.INSTALLED:
        return "pycurl is not installed"
    if scheme not in ("http", "https"):
        return f"the scheme {scheme!r}"
    if configuration.tls_server_name:
        return "a TLS server name of its own"
    if scheme == "https" and configuration.verify_tls and not configuration.ca_file:
        # urllib3 trusts the system's store; libcurl's may be another.
        return "the system's CA store"
    return ""


_LABEL: Final = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_WRITTEN_AS_GIVEN: Final = re.compile(
    rf"https?://{_LABEL}(?:\.{_LABEL})*(?::(?:[1-9][0-9]{{0,3}}|[1-5][0-9]{{4}}))?(?=[/?#]|$)"
)
"""An origin urllib3 writes as given: a lower-case scheme, host name or IPv4 address, and a
port without leading zeros, below 60000."""


def origin_of(host: str) -> str:
    """The scheme and authority of ``host``, as urllib3 writes them. The usual address is read
    here: urllib3 is imported for another (a unit test holds the two to each other), so a
    client through libcurl never imports it before its first stream."""
    written = _WRITTEN_AS_GIVEN.match(host)
    if written:
        return written.group(0)
    import urllib3

    server = urllib3.util.parse_url(host)
    return f"{server.scheme}://{server.netloc}"


def _everything(route: Route, reason: str) -> Routes:
    return Routes(route, route, f"every request through {route.value}: {reason}")
