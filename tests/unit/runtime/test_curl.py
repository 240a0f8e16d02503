"""Requests answered whole go through libcurl: over TLS with the kubeconfig's CA and client
certificate, a bounded number at once, with the client's timeout (which settings libcurl would
not take the same way: test_routes.py)."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hack.cluster.kueue import serving_certificate
from mpi_operator.runtime import curl
from mpi_operator.runtime.client import PODS, ApiError, Client
from mpi_operator.runtime.curl import sent_as_is
from mpi_operator.runtime.kubeconfig import Configuration
from tests.unit.runtime.scripted_server import FakeApiServer, Reply, serving


@dataclass(frozen=True)
class Pki:
    """A server certificate for 127.0.0.1 and a client certificate, each from its own CA."""

    server_ca: Path
    server_cert: Path
    server_key: Path
    client_ca: Path
    client_cert: Path
    client_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    files: dict[str, Path] = {}
    for side in ("server", "client"):
        directory = root / side
        ca = directory / "ca.crt"
        ca_pem = serving_certificate(directory)
        ca.write_bytes(ca_pem)
        files[f"{side}_ca"] = ca
        files[f"{side}_cert"] = directory / "tls.crt"
        files[f"{side}_key"] = directory / "tls.key"
    return Pki(**files)


@pytest.fixture
def tls_server(pki: Pki) -> Iterator[tuple[FakeApiServer, int]]:
    """A server that asks every client for a certificate signed by the client CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(pki.client_ca)
    state = FakeApiServer()
    with serving(state, tls=context) as port:
        yield state, port


def https_client(port: int, **settings: Any) -> Client:
    return Client(Configuration(host=f"https://127.0.0.1:{port}", **settings), qps=0)


def refuse_urllib3(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a request reaches urllib3's pools."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("urllib3 was used")

    monkeypatch.setattr(client._pools, "manager", refuse)
    monkeypatch.setattr(client._pools, "server_pool", refuse)


def test_requests_answered_whole_go_through_libcurl_on_one_kept_connection(
    api: tuple[FakeApiServer, Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, client = api
    refuse_urllib3(client, monkeypatch)
    server.replies.extend(Reply(body={"kind": "Pod"}) for _ in range(4))
    assert client.get(PODS, "p", "ns") == {"kind": "Pod"}
    assert client.create(PODS, {"kind": "Pod"}, "ns") == {"kind": "Pod"}
    assert client.update(PODS, {"metadata": {"name": "p", "namespace": "ns"}}) == {"kind": "Pod"}
    assert client.delete(PODS, "p", "ns") == {"kind": "Pod"}
    assert [seen.method for seen in server.seen] == ["GET", "POST", "PUT", "DELETE"]
    assert len({seen.client_port for seen in server.seen}) == 1


def test_libcurl_sends_the_headers_urllib3_sent(
    api: tuple[FakeApiServer, Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, client = api
    monkeypatch.setattr(curl, "INSTALLED", False)  # as without the extra: urllib3 sends
    through_urllib3 = Client(client.configuration, user_agent=client.user_agent, qps=0)
    assert client._curl is not None and through_urllib3._curl is None
    obj = {"metadata": {"name": "p", "namespace": "ns"}, "data": {"k": "v" * 2000}}
    try:
        for sender in (client, through_urllib3):
            for send in (sender.create, sender.update):
                server.replies.append(Reply(body={}))
                send(PODS, obj)
            server.replies.append(Reply(body={}))
            sender.patch(PODS, "p", {"a": 1}, "ns")
            server.replies.append(Reply(body={}))
            sender.get(PODS, "p", "ns")
    finally:
        through_urllib3.close()
    for ours, theirs in zip(server.seen[:4], server.seen[4:], strict=True):
        assert (ours.method, ours.path, ours.query, ours.raw) == (
            theirs.method, theirs.path, theirs.query, theirs.raw,
        )  # fmt: skip
        assert ours.headers == theirs.headers


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("π-1", "/api/v1/namespaces/ns/pods/%CF%80-1"),
        ("a b", "/api/v1/namespaces/ns/pods/a%20b"),
        ("a%zz", "/api/v1/namespaces/ns/pods/a%25zz"),
        ("a#b", "/api/v1/namespaces/ns/pods/a"),
    ],
)
def test_a_target_urllib3_would_escape_is_sent_by_urllib3(
    api: tuple[FakeApiServer, Client], name: str, path: str
) -> None:
    server, client = api
    server.replies.append(Reply(body={"kind": "Pod"}))
    assert client.get(PODS, name, "ns") == {"kind": "Pod"}
    assert server.seen[-1].path == path


def test_tls_with_the_kubeconfigs_ca_and_client_certificate(
    pki: Pki, tls_server: tuple[FakeApiServer, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, port = tls_server
    client = https_client(
        port,
        ca_file=str(pki.server_ca),
        cert_file=str(pki.client_cert),
        key_file=str(pki.client_key),
    )
    refuse_urllib3(client, monkeypatch)
    server.replies.extend([Reply(body={"kind": "Pod"}), Reply(body={"kind": "Pod"})])
    try:
        assert client.get(PODS, "p", "ns") == {"kind": "Pod"}
        assert client.create(PODS, {"metadata": {"name": "p"}}, "ns") == {"kind": "Pod"}
    finally:
        client.close()
    assert [(seen.method, seen.path) for seen in server.seen] == [
        ("GET", "/api/v1/namespaces/ns/pods/p"),
        ("POST", "/api/v1/namespaces/ns/pods"),
    ]
    assert len({seen.client_port for seen in server.seen}) == 1


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({"ca_file": "client_ca", "cert_file": "client_cert",
                      "key_file": "client_key"}, id="server not signed by the CA given"),
        pytest.param({"ca_file": "server_ca"}, id="no client certificate"),
    ],
)  # fmt: skip
def test_a_refused_tls_handshake_is_status_zero(
    pki: Pki, tls_server: tuple[FakeApiServer, int], settings: dict[str, str]
) -> None:
    server, port = tls_server
    client = https_client(
        port, **{name: str(getattr(pki, value)) for name, value in settings.items()}
    )
    assert client._curl is not None
    try:
        with pytest.raises(ApiError) as caught:
            client.get(PODS, "p", "ns")
    finally:
        client.close()
    assert (caught.value.status, caught.value.reason) == (0, "CurlError")
    assert server.seen == []


def test_without_verification_no_ca_is_needed(
    pki: Pki, tls_server: tuple[FakeApiServer, int]
) -> None:
    server, port = tls_server
    client = https_client(
        port, verify_tls=False, cert_file=str(pki.client_cert), key_file=str(pki.client_key)
    )
    assert client._curl is not None
    server.replies.append(Reply(body={"kind": "Pod"}))
    try:
        assert client.get(PODS, "p", "ns") == {"kind": "Pod"}
    finally:
        client.close()


def test_at_most_the_bound_of_requests_are_in_flight(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    bounded = Client(client.configuration, qps=0, max_requests_in_flight=2)
    server.replies.extend(Reply(body={"kind": "Pod"}, delay=0.2) for _ in range(6))
    answers: list[Any] = []

    def get() -> None:
        answers.append(bounded.get(PODS, "p", "ns"))

    threads = [threading.Thread(target=get) for _ in range(6)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    finally:
        bounded.close()
    assert answers == [{"kind": "Pod"}] * 6
    assert server.most_answering == 2
    assert len({seen.client_port for seen in server.seen}) == 2


def test_a_request_past_its_timeout_is_status_zero_and_the_next_one_is_answered(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    impatient = client.with_options(request_timeout=0.2)
    server.replies.extend([Reply(body={"kind": "Pod"}, delay=2), Reply(body={"kind": "Pod"})])
    try:
        with pytest.raises(ApiError) as caught:
            impatient.get(PODS, "late", "ns")
        assert (caught.value.status, caught.value.reason) == (0, "CurlError")
        assert impatient.get(PODS, "p", "ns") == {"kind": "Pod"}
    finally:
        impatient.close()


@pytest.mark.parametrize(
    ("target", "as_is"),
    [
        ("/api/v1/namespaces/ns/pods/p-1.x_y~z", True),
        ("/api/v1/pods?labelSelector=a%3Db%2Cc+in+%28d%29&limit=500", True),
        ("/apis/x/v1/namespaces/ns/things/a:b@c!$&'()*,;=", True),
        ("/api/v1/namespaces/ns/pods/π", False),
        ("/api/v1/namespaces/ns/pods/a b", False),
        ("/api/v1/namespaces/ns/pods/a#b", False),
        ("/api/v1/namespaces/ns/pods/a%2f", False),  # urllib3 writes escapes in upper case
        ("/api/v1/namespaces/ns/pods/a%zz", False),
        ('/api/v1/namespaces/ns/pods/"a"', False),
    ],
)
def test_only_targets_urllib3_sends_unchanged_go_through_libcurl(target: str, as_is: bool) -> None:
    assert sent_as_is(target) is as_is


@pytest.mark.parametrize("transport", ["libcurl", "urllib3 alone"])
def test_a_kubeconfigs_certificate_data_reaches_the_tls_server(
    pki: Pki,
    tls_server: tuple[FakeApiServer, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
) -> None:
    server, port = tls_server
    if transport != "libcurl":
        monkeypatch.setattr(curl, "INSTALLED", False)

    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {
                    "server": f"https://127.0.0.1:{port}",
                    "certificate-authority-data": data(pki.server_ca)}}],
                "users": [{"name": "u", "user": {
                    "client-certificate-data": data(pki.client_cert),
                    "client-key-data": data(pki.client_key)}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )  # fmt: skip
    client = Client.from_kubeconfig(str(kubeconfig), qps=0)
    assert (client._curl is not None) == (transport == "libcurl")
    server.replies.append(Reply(body={"kind": "Pod"}))
    try:
        assert client.get(PODS, "p", "ns") == {"kind": "Pod"}
    finally:
        client.close()
    assert [(seen.method, seen.path) for seen in server.seen] == [
        ("GET", "/api/v1/namespaces/ns/pods/p")
    ]


def test_the_client_imports_and_sends_without_pycurl(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    server.replies.append(Reply(body={"kind": "Pod"}))
    program = (
        "import sys; sys.modules['pycurl'] = None  # as if the extra were not installed\n"
        "from mpi_operator.runtime import curl\n"
        "from mpi_operator.runtime.client import PODS, Client\n"
        "from mpi_operator.runtime.kubeconfig import Configuration\n"
        "assert not curl.INSTALLED\n"
        f"print(Client(Configuration(host={client.host!r}), qps=0).get(PODS, 'p', 'ns'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "{'kind': 'Pod'}"), done.stderr
