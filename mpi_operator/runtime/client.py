"""A raw-JSON Kubernetes client over urllib3 (and libcurl, where it is installed).

The connection settings come from :mod:`.kubeconfig` (a kubeconfig or the pod's service
account), the ``Authorization`` header of each request from :mod:`.credentials` (tokens that
rotate or expire are renewed there). Bodies in and out are plain dicts (what ``json.loads``
gives for the response bytes, decoded by :mod:`.jsonbody`): typed models would drop fields they
do not know and cost several times the memory of the JSON. Requests are sent as the official
``kubernetes`` client sent them (the same URL encoding, headers and body bytes; a unit test
holds the two side by side).

On top of the transport this module adds what client-go would: client-side token buckets
(``--kube-api-qps``/``--kube-api-burst``; one per API group that would be a clientset of its own
in Go, see :class:`Client`), user agents, uniform :class:`ApiError`
errors, paginated lists, streaming watches and a request counter by verb, resource and code.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    Protocol,
    Self,
    TypedDict,
    TypeVar,
    Unpack,
    cast,
)
from urllib.parse import quote

from mpi_operator.runtime import jsonbody
from mpi_operator.runtime.clock import REAL_CLOCK, Clock
from mpi_operator.runtime.counts import Count
from mpi_operator.runtime.credentials import ConfigError
from mpi_operator.runtime.curl import Answer, CurlPool
from mpi_operator.runtime.kubeconfig import Configuration, load_configuration
from mpi_operator.runtime.objects import Object, name_of, namespace_of
from mpi_operator.runtime.ratelimit import TokenBucket
from mpi_operator.runtime.routes import REDIRECT_ROUTE, Route, Routes, origin_of, routes_for

if TYPE_CHECKING:
    import urllib3

log = logging.getLogger(__name__)

T = TypeVar("T")

API_REQUESTS = Count(
    "mpi_operator_api_requests_total",
    "Requests sent to the Kubernetes API server, by verb, resource and HTTP status code.",
    ("verb", "resource", "code"),
)

# The code label when no HTTP response arrived (connection refused, TLS failure, timeout),
# spelled as client-go's rest_client_requests_total spells it.
NO_RESPONSE_CODE = "<error>"

PatchType = Literal["merge", "json", "strategic", "apply"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    # Server-side apply; a JSON body is valid YAML, and the body is sent as JSON.
    "apply": "application/apply-patch+yaml",
}

DEFAULT_PAGE_SIZE = 500
"""Objects a list page holds, as client-go's pager asks. Smaller pages would spend more of the
request budget (QPS 5 at upstream's defaults); a page's objects are not all held at once
anyway, its items being decoded one at a time (:func:`jsonbody.loads_list_page`)."""


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API: ``group`` is ``""`` for the core group."""

    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str = ""
    ) -> str:
        """The URL path; ``namespace=None`` on a namespaced resource means all namespaces."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            if not name:
                raise ValueError(f"empty {self.kind} name")
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base

    def metric_label(self, subresource: str = "") -> str:
        return f"{self.plural}/{subresource}" if subresource else self.plural


# Kinds of Kubernetes itself that a controller runtime commonly needs.
NAMESPACES = Resource("", "v1", "namespaces", False, "Namespace")
PODS = Resource("", "v1", "pods", True, "Pod")
NODES = Resource("", "v1", "nodes", False, "Node")
SERVICES = Resource("", "v1", "services", True, "Service")
CONFIGMAPS = Resource("", "v1", "configmaps", True, "ConfigMap")
SECRETS = Resource("", "v1", "secrets", True, "Secret")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", True, "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", True, "RoleBinding")
EVENTS = Resource("", "v1", "events", True, "Event")
JOBS = Resource("batch", "v1", "jobs", True, "Job")
LEASES = Resource("coordination.k8s.io", "v1", "leases", True, "Lease")
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", False, "PriorityClass")


class ApiError(Exception):
    """A failed API call. ``status`` is the HTTP code, 0 when no response arrived at all."""

    def __init__(
        self, status: int, reason: str, message: str, body: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else f"{reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body: Mapping[str, Any] = body or {}

    @classmethod
    def from_status(cls, status: Mapping[str, Any], http_status: int = 0) -> ApiError:
        """From a ``Status`` object (an error body, or the object of a watch ERROR event)."""
        code = status.get("code")
        return cls(
            code if isinstance(code, int) and code else http_status,
            str(status.get("reason") or ""),
            str(status.get("message") or ""),
            status,
        )


def _status_of(error: BaseException) -> int:
    return error.status if isinstance(error, ApiError) else -1


def _reason_of(error: BaseException) -> str:
    return error.reason if isinstance(error, ApiError) else ""


def is_not_found(error: BaseException) -> bool:
    return _status_of(error) == 404


def is_already_exists(error: BaseException) -> bool:
    return _status_of(error) == 409 and _reason_of(error) == "AlreadyExists"


def is_conflict(error: BaseException) -> bool:
    """A 409 other than AlreadyExists: a stale resourceVersion on update."""
    return _status_of(error) == 409 and _reason_of(error) != "AlreadyExists"


def is_gone(error: BaseException) -> bool:
    """410: the resourceVersion is older than the server keeps (``Expired``/``Gone``)."""
    return _status_of(error) == 410


def is_forbidden(error: BaseException) -> bool:
    return _status_of(error) == 403


def is_unauthorized(error: BaseException) -> bool:
    return _status_of(error) == 401


@dataclass
class ListResult:
    items: list[Object] = field(default_factory=list)
    resource_version: str = ""


def _page_query(
    base: Sequence[tuple[str, str]], limit: int, token: str
) -> builtins.list[tuple[str, str]]:
    query = builtins.list(base)
    if limit > 0:
        query.append(("limit", str(limit)))
    if token:
        query.append(("continue", token))
    return query


def _invalid_answer(status: int, data: bytes) -> ApiError:
    return ApiError(status, "InvalidResponse", data[:200].decode(errors="replace"))


def _objects(items: Iterator[Any], status: int, data: bytes) -> Iterator[Object]:
    """A page's items, refused as the whole answer would be where one is not a JSON object."""
    try:
        for item in items:
            if not isinstance(item, dict):
                raise ApiError(status, "InvalidResponse", "a list item is not a JSON object")
            yield item
    except ValueError as error:
        raise _invalid_answer(status, data) from error


WatchEvent = tuple[str, Object]
"""``(type, object)``: type is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR (object = Status)."""


class _HTTPResponse(Protocol):
    """The part of urllib3's response the client reads (and a libcurl answer stands in for)."""

    status: int
    chunked: bool

    def supports_chunked_reads(self) -> bool: ...
    def read_chunked(
        self, amt: int | None = None, decode_content: bool | None = None
    ) -> Iterator[bytes]: ...
    def read1(self, amt: int | None = None, decode_content: bool | None = None) -> bytes: ...
    def read(self, amt: int | None = None, decode_content: bool | None = None) -> bytes: ...
    def shutdown(self) -> None: ...
    def close(self) -> None: ...
    def release_conn(self) -> None: ...


class LineStream(Generic[T]):
    """The lines of one streaming response (watch events, pod logs), decoded as they arrive.

    Iterate it once. :meth:`close` may be called from any thread and ends the iteration (a read
    blocked on the socket is interrupted), so a stopping reader does not wait for the
    server-side timeout.
    """

    def __init__(
        self,
        response: _HTTPResponse,
        decode: Callable[[bytes], T],
        *,
        keep_blank_lines: bool = False,
    ) -> None:
        self._response = response
        self._decode = decode
        self._keep_blank_lines = keep_blank_lines
        self._closed = False
        self._started = False
        self._released = False
        self._release_lock = threading.Lock()
        self._events = self._generate()

    def __iter__(self) -> Iterator[T]:
        self._started = True
        return self._events

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True
        # Interrupts a read blocked in another thread. Fails harmlessly when the connection is
        # already gone or the transport cannot shut down; the close below still happens.
        with contextlib.suppress(ValueError, RuntimeError, OSError):
            self._response.shutdown()
        if not self._started:
            self._release()
            return
        # ValueError: being iterated in another thread, which sees EOF from the shutdown above
        # and releases the connection itself.
        with contextlib.suppress(ValueError):
            self._events.close()

    def _chunks(self) -> Iterator[bytes]:
        response = self._response
        if response.chunked and response.supports_chunked_reads():
            # Whole chunks as they arrive; the API server writes one watch event per chunk.
            yield from response.read_chunked(None, decode_content=True)
            return
        while True:
            data = response.read1(64 * 1024)
            if not data:
                return
            yield data

    def _generate(self) -> Generator[T, None, None]:
        buffer = bytearray()
        try:
            for chunk in self._chunks():
                buffer += chunk
                start = 0
                while (end := buffer.find(b"\n", start)) >= 0:
                    line = bytes(buffer[start:end])
                    start = end + 1
                    if self._keep_blank_lines or line.strip():
                        yield self._decode(line)
                del buffer[:start]
            if bytes(buffer).strip():
                yield self._decode(bytes(buffer))
        except _transport_errors() as error:
            if self._closed:
                return
            raise ApiError(0, "WatchInterrupted", str(error)) from error
        finally:
            self._release()

    def _release(self) -> None:
        with self._release_lock:
            if self._released:
                return
            self._released = True
        try:
            # A half-read stream cannot be reused: close the connection, then hand the
            # (closed) connection back so the pool's slot is free again.
            self._response.close()
            self._response.release_conn()
        except Exception:  # cleanup must never raise into the reader
            log.debug("releasing a streaming connection failed", exc_info=True)


class WatchStream(LineStream[WatchEvent]):
    """Events of one watch request: ``(type, object)`` per line."""

    def __init__(self, response: _HTTPResponse) -> None:
        super().__init__(response, _decode_event)


def _decode_text(line: bytes) -> str:
    return line.rstrip(b"\r").decode(errors="replace")


def _decode_event(line: bytes) -> WatchEvent:
    try:
        event = jsonbody.loads(line)
    except ValueError as error:
        raise ApiError(0, "InvalidWatchEvent", f"undecodable watch line: {line[:200]!r}") from error
    if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
        raise ApiError(0, "InvalidWatchEvent", f"unexpected watch line: {line[:200]!r}")
    return str(event.get("type") or ""), event["object"]


# -- construction ------------------------------------------------------------------------------


class _Transport(Protocol):
    def __call__(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: Any,
        timeout: float | tuple[float, float | None] | None,
        stream: bool,
    ) -> _HTTPResponse: ...


class _WholeAnswer:
    """libcurl's answer, read whole, as the part of urllib3's response ``_json`` reads."""

    chunked = False

    def __init__(self, answer: Answer) -> None:
        self.status = answer.status
        self._data = answer.data

    def supports_chunked_reads(self) -> bool:
        return False

    def read_chunked(
        self, amt: int | None = None, decode_content: bool | None = None
    ) -> Iterator[bytes]:
        raise NotImplementedError("a whole answer is not read in chunks")

    def read1(self, amt: int | None = None, decode_content: bool | None = None) -> bytes:
        return self.read(amt)

    def read(self, amt: int | None = None, decode_content: bool | None = None) -> bytes:
        data, self._data = self._data, b""
        return data

    def shutdown(self) -> None:
        pass

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def _pool_manager(configuration: Configuration) -> urllib3.PoolManager:
    """urllib3's pools for the server, with the configuration's TLS settings and proxy."""
    import urllib3

    settings: dict[str, Any] = {
        "cert_reqs": "CERT_REQUIRED" if configuration.verify_tls else "CERT_NONE",
        "ca_certs": configuration.ca_file,
        "cert_file": configuration.cert_file,
        "key_file": configuration.key_file,
        "maxsize": configuration.pool_maxsize,
    }
    if configuration.tls_server_name:
        settings["server_hostname"] = configuration.tls_server_name
    proxy = configuration.proxy
    if not proxy:
        return urllib3.PoolManager(**settings)
    if proxy.split("://", 1)[0].lower() in ("socks4", "socks4a", "socks5", "socks5h"):
        # Only then: urllib3's SOCKS support needs PySocks.
        from urllib3.contrib.socks import SOCKSProxyManager

        return SOCKSProxyManager(proxy, **settings)
    return urllib3.ProxyManager(proxy, **settings)


class _Urllib3Pools:
    """urllib3's pool manager, built at the first request one of urllib3's routes takes. Where
    libcurl answers whole requests that is the first stream, a watch only the leader starts:
    urllib3's import is then no part of the start (docs/performance.md)."""

    def __init__(self, configuration: Configuration) -> None:
        self._configuration = configuration
        self._lock = threading.Lock()
        self._built: tuple[urllib3.PoolManager, urllib3.util.Url] | None = None

    def manager(self) -> urllib3.PoolManager:
        return self._build()[0]

    def server_pool(self) -> urllib3.HTTPConnectionPool:
        """The pool of the configuration's server."""
        manager, server = self._build()
        return manager.connection_from_host(server.host, port=server.port, scheme=server.scheme)

    def clear(self) -> None:
        with self._lock:
            if self._built is not None:
                self._built[0].clear()

    def _build(self) -> tuple[urllib3.PoolManager, urllib3.util.Url]:
        built = self._built
        if built is None:
            with self._lock:
                if self._built is None:
                    import urllib3

                    server = urllib3.util.parse_url(self._configuration.host)
                    self._built = (_pool_manager(self._configuration), server)
                built = self._built
        return built


def _transport(
    configuration: Configuration,
    routes: Routes,
    pools: _Urllib3Pools,
    curl: CurlPool | None,
) -> _Transport:
    """Each request through its route (:mod:`.routes`), the body as ``json.dumps`` writes it."""
    origin_length = len(origin_of(configuration.host))

    def transport(
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: Any,
        timeout: float | tuple[float, float | None] | None,
        stream: bool,
    ) -> _HTTPResponse:
        data = None if body is None else json.dumps(body)
        target = url[origin_length:]
        route = routes.of(target, stream=stream, split_timeout=isinstance(timeout, tuple))
        # The route implies both; the type checker needs them said.
        if route is Route.LIBCURL and curl is not None and not isinstance(timeout, tuple):
            encoded = None if data is None else data.encode()
            answer = curl.request(method, url, headers, encoded, timeout)
            if not answer.redirected:
                return _WholeAnswer(answer)
            return through_pool_manager(method, url, data, headers, timeout, route)
        if route is Route.SERVER_POOL:
            response = pools.server_pool().urlopen(
                method,
                target,
                redirect=False,
                assert_same_host=False,
                **_urllib3_options(data, headers, timeout),
            )
            if not response.get_redirect_location():
                return cast(_HTTPResponse, response)
            response.drain_conn()
            response.release_conn()
            return through_pool_manager(method, url, data, headers, timeout, route)
        return through_pool_manager(method, url, data, headers, timeout)

    def through_pool_manager(
        method: str,
        url: str,
        data: str | None,
        headers: Mapping[str, str],
        timeout: float | tuple[float, float | None] | None,
        redirected_from: Route | None = None,
    ) -> _HTTPResponse:
        """The pool manager picks the pool (or the proxy) and follows a redirect."""
        if redirected_from is not None:
            log.debug(
                "%s %s: a redirect through %s, sent again through %s",
                method,
                url,
                redirected_from.value,
                REDIRECT_ROUTE.value,
            )
        options = _urllib3_options(data, headers, timeout)
        return cast(_HTTPResponse, pools.manager().urlopen(method, url, **options))

    return transport


def _curl_pool(configuration: Configuration, in_flight: int) -> CurlPool:
    return CurlPool(
        verify=configuration.verify_tls,
        ca_file=configuration.ca_file,
        cert_file=configuration.cert_file,
        key_file=configuration.key_file,
        in_flight=in_flight,
    )


def _urllib3_options(
    data: str | None,
    headers: Mapping[str, str],
    timeout: float | tuple[float, float | None] | None,
) -> dict[str, Any]:
    from urllib3 import HTTPHeaderDict

    return {
        "body": data,
        "headers": HTTPHeaderDict(headers),
        "timeout": _urllib3_timeout(timeout),
        "preload_content": False,
    }


def _urllib3_timeout(
    timeout: float | tuple[float, float | None] | None,
) -> urllib3.Timeout | None:
    """urllib3's timeout: one number is the whole request's, a pair (connect, read)."""
    import urllib3

    if not timeout:
        return None
    if isinstance(timeout, tuple):
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return urllib3.Timeout(total=timeout)


def _transport_errors() -> tuple[type[Exception], ...]:
    """What a request or a read that got no answer raises: OSError (libcurl's errors too) and
    urllib3's. Evaluated only as an exception passes, so the start does not import urllib3 for
    it; a request through urllib3 has imported it already."""
    import urllib3

    return (urllib3.exceptions.HTTPError, OSError)


class _Request(TypedDict, total=False):
    """What a request sends besides its method and path (and which subresource it is for)."""

    subresource: str

    query: Sequence[tuple[str, str]] | None
    body: Object | builtins.list[Object] | None
    content_type: str | None


class Client:
    """Raw-JSON API calls; thread-safe (one urllib3 pool and one set of libcurl handles shared
    by all threads).

    ``max_requests_in_flight`` bounds the requests sent through libcurl at once (each holds a
    handle with its TLS state; see :mod:`.curl`), by default the connection pool's size.

    ``qps <= 0`` disables client-side throttling (controller-runtime's default, relying on API
    Priority and Fairness); upstream mpi-operator uses 5 qps with a burst of 10.

    A Go operator talks to each API group through a generated clientset with a token bucket of
    its own (upstream: one for Kubernetes' own groups, one for kubeflow.org, one for the gang
    scheduler's group). ``own_budget_groups`` names the groups that get such a bucket here, each
    with the same ``qps`` and ``burst``; every other group shares the default bucket.
    """

    def __init__(
        self,
        configuration: Configuration,
        *,
        user_agent: str = "operator-runtime",
        qps: float = 5.0,
        burst: int = 10,
        request_timeout: float = 60.0,
        own_budget_groups: Sequence[str] = (),
        clock: Clock = REAL_CLOCK,
        max_requests_in_flight: int | None = None,
    ) -> None:
        self.configuration = configuration
        self.user_agent = user_agent
        self.request_timeout = request_timeout
        self._clock = clock
        self._bucket = TokenBucket(qps, burst, clock)
        self._group_buckets = {
            group: TokenBucket(qps, burst, clock) for group in own_budget_groups if group
        }
        self._pools = _Urllib3Pools(configuration)
        self._in_flight = max_requests_in_flight or configuration.pool_maxsize
        self.routes = routes_for(configuration)
        log.debug("requests to %s: %s", configuration.host, self.routes.reason)
        self._curl = (
            _curl_pool(configuration, self._in_flight)
            if self.routes.whole is Route.LIBCURL
            else None
        )
        self._transport = _transport(configuration, self.routes, self._pools, self._curl)

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | None = None,
        *,
        context: str | None = None,
        master: str | None = None,
        pool_maxsize: int = 32,
        **kwargs: Any,
    ) -> Client:
        """Build from a kubeconfig path, ``$KUBECONFIG`` or the in-cluster service account."""
        configuration = load_configuration(
            kubeconfig, context=context, master=master, pool_maxsize=pool_maxsize
        )
        return cls(configuration, **kwargs)

    def with_options(
        self,
        *,
        user_agent: str | None = None,
        qps: float | None = None,
        burst: int | None = None,
        request_timeout: float | None = None,
    ) -> Client:
        """Another client on the same connection settings with its own pool and token bucket
        (upstream gives each clientset — kube, leader election, … — a bucket of its own).

        Leader election wants a ``request_timeout`` within its renew deadline."""
        return Client(
            self.configuration,
            user_agent=user_agent or self.user_agent,
            qps=self._bucket.qps if qps is None else qps,
            burst=self._bucket.burst if burst is None else burst,
            request_timeout=self.request_timeout if request_timeout is None else request_timeout,
            own_budget_groups=tuple(self._group_buckets),
            clock=self._clock,
            max_requests_in_flight=self._in_flight,
        )

    def close(self) -> None:
        if self._curl is not None:
            self._curl.close()
        self._pools.clear()

    @property
    def host(self) -> str:
        return str(self.configuration.host)

    # -- the verbs -----------------------------------------------------------------------------

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Object:
        path = resource.path(self._namespace(resource, namespace), name)
        return self._json("GET", "get", resource, path)

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        transform: Callable[[Object], Object] | None = None,
    ) -> ListResult:
        """Every object, fetched ``limit`` at a time (``limit=0``: one unpaginated request).

        Items get ``apiVersion`` and ``kind`` filled in: the server omits them inside lists,
        but watch events carry them, and cached objects should look the same either way.
        ``transform`` is applied to each item as its page arrives, so that a cache trimming
        what it keeps holds whole objects of one page at a time, not of the whole list.
        """
        path = resource.path(namespace or None)
        base: list[tuple[str, str]] = []
        if label_selector:
            base.append(("labelSelector", label_selector))
        if field_selector:
            base.append(("fieldSelector", field_selector))
        result = ListResult()
        token = ""
        while True:
            try:
                meta, items = self._list_page(resource, path, base, limit, token)
            except ApiError as error:
                if token and is_gone(error):
                    # The continue token expired mid-list (client-go falls back the same way):
                    # start over with one consistent, unpaginated read.
                    log.info("list of %s: continue token expired, listing in one request", path)
                    return self.list(
                        resource,
                        namespace,
                        label_selector=label_selector,
                        field_selector=field_selector,
                        limit=0,
                        transform=transform,
                    )
                raise
            for item in items:
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                result.items.append(item if transform is None else transform(item))
            result.resource_version = str(meta.get("resourceVersion") or "")
            token = str(meta.get("continue") or "")
            if not token:
                return result

    def list_first_page(self, resource: Resource, namespace: str | None, limit: int) -> Object:
        """One request for the first ``limit`` objects, as the server answered it; its
        continue token is not followed (enough to learn whether the resource is served)."""
        path = resource.path(namespace or None)
        return self._json("GET", "list", resource, path, query=_page_query([], limit, ""))

    def _list_page(
        self,
        resource: Resource,
        path: str,
        base: Sequence[tuple[str, str]],
        limit: int,
        token: str,
    ) -> tuple[Object, Iterator[Object]]:
        """A page's metadata, and its items, each decoded as it is taken."""
        query = _page_query(base, limit, token)
        status, data = self._read("GET", "list", resource, path, query=query)
        try:
            metadata, items = jsonbody.loads_list_page(data or b"{}")
        except ValueError as error:
            raise _invalid_answer(status, data) from error
        return metadata, _objects(items, status, data)

    def create(
        self,
        resource: Resource,
        obj: Object,
        namespace: str | None = None,
        *,
        field_manager: str | None = None,
    ) -> Object:
        path = resource.path(self._namespace(resource, namespace, obj))
        query = [("fieldManager", field_manager)] if field_manager else None
        return self._json("POST", "create", resource, path, query=query, body=obj)

    def update(
        self,
        resource: Resource,
        obj: Object,
        namespace: str | None = None,
        *,
        subresource: str = "",
        field_manager: str | None = None,
    ) -> Object:
        """PUT the whole object, or one of its subresources; its ``metadata.resourceVersion``
        makes it a conditional write."""
        path = resource.path(self._namespace(resource, namespace, obj), name_of(obj), subresource)
        query = [("fieldManager", field_manager)] if field_manager else None
        return self._json(
            "PUT", "update", resource, path, subresource=subresource, query=query, body=obj
        )

    def update_status(
        self, resource: Resource, obj: Object, namespace: str | None = None
    ) -> Object:
        """PUT to the ``status`` subresource (spec changes in ``obj`` are ignored there)."""
        return self.update(resource, obj, namespace, subresource="status")

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: Object | builtins.list[Object],
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str = "",
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> Object:
        """``json`` takes a list of operations; the others take an object.

        ``apply`` is server-side apply and needs ``field_manager``."""
        if (patch_type == "json") != isinstance(patch, list):
            raise TypeError("a json patch is a list of operations; other patches are objects")
        if patch_type == "apply" and not field_manager:
            raise ValueError("server-side apply needs a field manager")
        path = resource.path(self._namespace(resource, namespace), name, subresource)
        query: list[tuple[str, str]] = []
        if field_manager:
            query.append(("fieldManager", field_manager))
        if force is not None:
            query.append(("force", "true" if force else "false"))
        return self._json(
            "PATCH",
            "patch",
            resource,
            path,
            subresource=subresource,
            query=query,
            body=patch,
            content_type=_PATCH_CONTENT_TYPES[patch_type],
        )

    def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: Literal["Foreground", "Background", "Orphan"] | None = None,
        preconditions: Mapping[str, str] | None = None,
        grace_period_seconds: int | None = None,
    ) -> Object:
        """Returns what the server answers: the object (being finalized) or a Status."""
        path = resource.path(self._namespace(resource, namespace), name)
        options: Object = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        return self._json("DELETE", "delete", resource, path, body=options)

    def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str = "",
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> WatchStream:
        """Open a watch; iterate the result for ``(type, object)``, close it to stop early.

        An ERROR event is passed through as is (its object is a Status; 410 means the
        resourceVersion is too old and the caller must list again)."""
        path = resource.path(namespace or None)
        query: list[tuple[str, str]] = [("watch", "true")]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if timeout_seconds:
            query.append(("timeoutSeconds", str(timeout_seconds)))
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        # The server ends the watch after timeoutSeconds; reading may legitimately stay silent
        # that long, so the socket read timeout must exceed it.
        read_timeout = float(timeout_seconds) + 30.0 if timeout_seconds else None
        timeout = (10.0, read_timeout) if read_timeout else None
        response = self._send(
            "GET", "watch", resource, path, query=query, timeout=timeout, stream=True
        )
        return WatchStream(response)

    def stream_lines(
        self,
        resource: Resource,
        name: str,
        namespace: str | None,
        subresource: str,
        *,
        query: Sequence[tuple[str, str]] = (),
    ) -> LineStream[str]:
        """The text lines of a streaming subresource (``pods/log``), as they arrive.

        The connection stays open until the server ends the stream or the iterator is closed;
        a line keeps no trailing newline."""
        path = resource.path(self._namespace(resource, namespace), name, subresource)
        response = self._send(
            "GET",
            "get",
            resource,
            path,
            subresource=subresource,
            query=query,
            accept="text/plain, */*",
            timeout=(10.0, None),
            stream=True,
        )
        return LineStream(response, _decode_text, keep_blank_lines=True)

    # -- plumbing ------------------------------------------------------------------------------

    @staticmethod
    def _namespace(resource: Resource, namespace: str | None, obj: Object | None = None) -> str:
        if not resource.namespaced:
            return ""
        namespace = namespace or (namespace_of(obj) if obj is not None else "")
        if not namespace:
            raise ValueError(f"{resource.kind} is namespaced: a namespace is required")
        return namespace

    def _json(
        self, method: str, verb: str, resource: Resource, path: str, **request: Unpack[_Request]
    ) -> Object:
        status, data = self._read(method, verb, resource, path, **request)
        if not data:
            return {}
        try:
            decoded = jsonbody.loads(data)
        except ValueError as error:
            raise _invalid_answer(status, data) from error
        if not isinstance(decoded, dict):
            raise ApiError(status, "InvalidResponse", "response is not a JSON object")
        return decoded

    def _read(
        self, method: str, verb: str, resource: Resource, path: str, **request: Unpack[_Request]
    ) -> tuple[int, bytes]:
        """The answer's status and whole body."""
        request.setdefault("content_type", "application/json")
        response = self._send(method, verb, resource, path, timeout=self.request_timeout, **request)
        try:
            return response.status, response.read()
        except _transport_errors() as error:
            raise ApiError(0, "ReadError", str(error)) from error
        finally:
            response.release_conn()

    def _send(
        self,
        method: str,
        verb: str,
        resource: Resource,
        path: str,
        *,
        subresource: str = "",
        query: Sequence[tuple[str, str]] | None = None,
        body: Object | builtins.list[Object] | None = None,
        content_type: str | None = None,
        timeout: float | tuple[float, float | None] | None = None,
        accept: str = "application/json",
        stream: bool = False,
    ) -> _HTTPResponse:
        """One request through its group's token bucket; raises ApiError unless 2xx."""
        self._group_buckets.get(resource.group, self._bucket).wait()
        resource_label = resource.metric_label(subresource)
        headers: dict[str, str] = {"Accept": accept}
        if content_type:
            headers["Content-Type"] = content_type
        headers["User-Agent"] = self.user_agent
        url = self.configuration.host + path
        if query:
            # Each value escaped as the official client escaped it (``/`` kept), which is what
            # libcurl's path takes as is (:func:`.curl.sent_as_is`).
            url += "?" + "&".join(f"{name}={quote(str(value))}" for name, value in query)
        try:
            if self.configuration.authorization is not None:
                headers["authorization"] = self.configuration.authorization.header()
            response = self._transport(method, url, headers, body, timeout, stream)
        except _transport_errors() as error:
            API_REQUESTS.inc(verb, resource_label, NO_RESPONSE_CODE)
            raise ApiError(0, type(error).__name__, str(error)) from error
        except ConfigError as error:  # an exec plugin that failed to renew its credential
            API_REQUESTS.inc(verb, resource_label, NO_RESPONSE_CODE)
            raise ApiError(0, "CredentialError", str(error)) from error
        API_REQUESTS.inc(verb, resource_label, str(response.status))
        if not 200 <= response.status < 300:
            try:
                data = response.read()
            except _transport_errors():
                data = b""
            finally:
                response.release_conn()
            raise _error_from_body(response.status, data)
        return response


def _error_from_body(status: int, data: bytes) -> ApiError:
    try:
        decoded = jsonbody.loads(data) if data else None
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status":
        return ApiError.from_status(decoded, status)
    text = data[:500].decode(errors="replace")
    return ApiError(status, _HTTP_REASONS.get(status, "Unknown"), text)


_HTTP_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
