"""Which way each request reaches the API server: chosen once per client from its settings, then
per request from what it asks for; a redirect is sent again through the pool manager."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import urllib3
from hypothesis import given, settings
from hypothesis import strategies as st

from mpi_operator.runtime import curl
from mpi_operator.runtime.client import PODS, Client
from mpi_operator.runtime.kubeconfig import Configuration
from mpi_operator.runtime.routes import REDIRECT_ROUTE, Route, origin_of, routes_for
from tests.unit.runtime.scripted_server import FakeApiServer, Reply

LIBCURL, SERVER_POOL, POOL_MANAGER = Route.LIBCURL, Route.SERVER_POOL, Route.POOL_MANAGER
TARGET = "/api/v1/namespaces/ns/pods/p"
ESCAPED_TARGET = "/api/v1/namespaces/ns/pods/π"

TLS_CLIENT_CERTS = {"cert_file": "/tls.crt", "key_file": "/tls.key"}
PROXY = {"proxy": "http://proxy.invalid:3128"}


def configuration(host: str = "https://127.0.0.1:6443", **settings: Any) -> Configuration:
    return Configuration(**{"host": host, "ca_file": "/ca.crt", **settings})


@pytest.mark.parametrize(
    ("settings", "whole", "stream"),
    [
        ({}, LIBCURL, SERVER_POOL),
        (TLS_CLIENT_CERTS, LIBCURL, SERVER_POOL),
        ({"host": "http://127.0.0.1:8080", "ca_file": None}, LIBCURL, SERVER_POOL),
        ({"verify_tls": False, "ca_file": None}, LIBCURL, SERVER_POOL),
        ({"host": "https://127.0.0.1:6443/prefix"}, LIBCURL, SERVER_POOL),
        (PROXY, POOL_MANAGER, POOL_MANAGER),
        ({**PROXY, **TLS_CLIENT_CERTS}, POOL_MANAGER, POOL_MANAGER),
        ({"proxy": "socks5h://proxy.invalid:1080"}, POOL_MANAGER, POOL_MANAGER),
        ({"ca_file": None}, SERVER_POOL, SERVER_POOL),  # the system's CA store
        ({"ca_file": None, **TLS_CLIENT_CERTS}, SERVER_POOL, SERVER_POOL),
        ({"tls_server_name": "kubernetes"}, SERVER_POOL, SERVER_POOL),
        ({"host": "unix:///run/api.sock"}, POOL_MANAGER, POOL_MANAGER),
        ({"host": "HTTPS://127.0.0.1:6443"}, POOL_MANAGER, POOL_MANAGER),
    ],
)
@pytest.mark.parametrize("installed", [True, False], ids=["with pycurl", "without pycurl"])
def test_the_route_of_each_request(
    monkeypatch: pytest.MonkeyPatch,
    settings: dict[str, Any],
    whole: Route,
    stream: Route,
    installed: bool,
) -> None:
    monkeypatch.setattr(curl, "INSTALLED", installed)
    if not installed and whole is LIBCURL:
        whole = SERVER_POOL
    routes = routes_for(configuration(**settings))
    assert routes.of(TARGET, stream=False, split_timeout=False) is whole
    # A watch or a log streams; a (connect, read) timeout or a target urllib3 would escape
    # is urllib3's too.
    assert routes.of(TARGET, stream=True, split_timeout=False) is stream
    assert routes.of(TARGET, stream=False, split_timeout=True) is stream
    assert routes.of(ESCAPED_TARGET, stream=False, split_timeout=False) is stream


def test_the_reason_says_why_libcurl_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "system's CA store" in routes_for(configuration(ca_file=None)).reason
    assert "proxy" in routes_for(configuration(**PROXY)).reason
    monkeypatch.setattr(curl, "INSTALLED", False)
    assert "pycurl is not installed" in routes_for(configuration()).reason


def test_the_client_chooses_once_and_logs_its_choice_at_debug(
    api: tuple[FakeApiServer, Client], caplog: pytest.LogCaptureFixture
) -> None:
    _, client = api
    with caplog.at_level(logging.DEBUG, logger="mpi_operator.runtime.client"):
        other = client.with_options(user_agent="other")
    try:
        assert other.routes == routes_for(client.configuration)
        assert other.routes.reason in caplog.text
    finally:
        other.close()


@pytest.mark.parametrize("installed", [True, False], ids=["with pycurl", "without pycurl"])
def test_a_redirect_is_sent_again_through_the_pool_manager(
    api: tuple[FakeApiServer, Client],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    installed: bool,
) -> None:
    server, fixture_client = api
    monkeypatch.setattr(curl, "INSTALLED", installed)
    client = Client(fixture_client.configuration, qps=0)
    first = client.routes.whole
    assert first is (LIBCURL if installed else SERVER_POOL)
    moved = Reply(307, raw=b"", location="/api/v1/namespaces/other/pods/p")
    server.replies.extend([moved, moved, Reply(body={"a": 1})])
    try:
        with caplog.at_level(logging.DEBUG, logger="mpi_operator.runtime.client"):
            assert client.get(PODS, "p", "ns") == {"a": 1}
    finally:
        client.close()
    assert REDIRECT_ROUTE is POOL_MANAGER
    assert f"a redirect through {first.value}, sent again through {POOL_MANAGER.value}" in (
        caplog.text
    )
    assert [seen.path for seen in server.seen] == [
        "/api/v1/namespaces/ns/pods/p",
        "/api/v1/namespaces/ns/pods/p",
        "/api/v1/namespaces/other/pods/p",
    ]


_LABELS = st.from_regex(r"[a-zA-Z0-9_-]{1,4}", fullmatch=True)
_HOSTS = st.one_of(
    st.lists(_LABELS, min_size=1, max_size=3).map(".".join),
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda address: f"[{address}]"),
)
_PORTS = st.one_of(
    st.just(""),
    st.integers(0, 70000).map(lambda port: f":{port}"),
    st.integers(0, 999).map(lambda port: f":0{port}"),
)


@settings(max_examples=400)
@given(
    scheme=st.sampled_from(["http", "https", "HTTPS"]),
    host=_HOSTS,
    port=_PORTS,
    rest=st.text(alphabet="/?#:@[]%aZ.9-_ ", max_size=6),
)
def test_the_origin_is_the_one_urllib3_writes(scheme: str, host: str, port: str, rest: str) -> None:
    address = f"{scheme}://{host}{port}{rest}"
    try:
        server = urllib3.util.parse_url(address)
    except urllib3.exceptions.LocationParseError:
        with pytest.raises(urllib3.exceptions.LocationParseError):
            origin_of(address)
        return
    assert origin_of(address) == f"{server.scheme}://{server.netloc}"
