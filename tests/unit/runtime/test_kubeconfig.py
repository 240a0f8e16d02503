"""Connection settings from a kubeconfig or the pod's service account, and the credentials
they yield: each kind of setting, checked on the requests a client then sends."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mpi_operator.runtime.client import PODS, ApiError, Client
from mpi_operator.runtime.clock import FakeClock
from mpi_operator.runtime.credentials import ConfigError, ExecPlugin, TokenFile
from mpi_operator.runtime.kubeconfig import (
    Configuration,
    environment_proxy,
    in_cluster,
    load_configuration,
)
from tests.unit.runtime.scripted_server import FakeApiServer, Reply, serving


@pytest.fixture
def server() -> Iterator[tuple[FakeApiServer, str]]:
    state = FakeApiServer()
    with serving(state) as port:
        yield state, f"http://127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)


def kubeconfig(
    path: Path,
    cluster: dict[str, Any],
    user: dict[str, Any] | None = None,
    *,
    name: str = "c",
    current: str | None = "ctx",
) -> Path:
    context: dict[str, Any] = {"cluster": name}
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "contexts": [{"name": "ctx", "context": context}],
    }
    if user is not None:
        context["user"] = "u"
        document["users"] = [{"name": "u", "user": user}]
    if current:
        document["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def authorization_sent(configuration: Configuration, state: FakeApiServer) -> list[str]:
    client = Client(configuration, qps=0)
    state.replies.append(Reply(body={"kind": "Pod"}))
    try:
        client.get(PODS, "p", "ns")
    finally:
        client.close()
    return state.seen[-1].headers.get("authorization", [])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_files_and_data_of_the_cluster_and_the_user(tmp_path: Path) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "client.crt").write_text("CERT")
    (tmp_path / "certs" / "client.key").write_text("KEY")
    path = kubeconfig(
        tmp_path / "config" / "kubeconfig",
        {"server": "https://api.example:6443/", "certificate-authority-data": b64(b"CA"),
         "tls-server-name": "kubernetes", "proxy-url": "http://proxy.example:3128"},
        {"client-certificate": "../certs/client.crt", "client-key": "../certs/client.key"},
    )  # fmt: skip
    configuration = load_configuration(str(path))
    assert configuration.host == "https://api.example:6443"
    assert configuration.ca_file is not None and Path(configuration.ca_file).read_bytes() == b"CA"
    assert stat.S_IMODE(os.stat(configuration.ca_file).st_mode) == 0o600
    assert configuration.cert_file == str(tmp_path / "certs" / "client.crt")
    assert configuration.key_file == str(tmp_path / "certs" / "client.key")
    assert (configuration.verify_tls, configuration.tls_server_name) == (True, "kubernetes")
    assert configuration.proxy == "http://proxy.example:3128"
    assert configuration.authorization is None


def test_data_wins_over_a_file_as_in_client_go(tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "kubeconfig",
        {"server": "https://api.example", "certificate-authority": "missing.crt",
         "certificate-authority-data": b64(b"CA")},
        {"client-certificate-data": b64(b"CERT"), "client-key-data": b64(b"KEY")},
    )  # fmt: skip
    configuration = load_configuration(str(path))
    assert Path(str(configuration.ca_file)).read_bytes() == b"CA"
    assert Path(str(configuration.cert_file)).read_bytes() == b"CERT"
    assert Path(str(configuration.key_file)).read_bytes() == b"KEY"


@pytest.mark.parametrize(
    ("user", "header"),
    [
        ({"token": "abc"}, "Bearer abc"),
        ({"username": "ann", "password": "pw"}, f"Basic {b64(b'ann:pw')}"),
        ({"token": "abc", "tokenFile": "token"}, "Bearer abc"),
        ({"tokenFile": "token"}, "Bearer from-file"),
    ],
    ids=["token", "basic", "token before its file", "token file"],
)
def test_each_kind_of_user_authorizes_the_requests(
    server: tuple[FakeApiServer, str], tmp_path: Path, user: dict[str, Any], header: str
) -> None:
    state, url = server
    (tmp_path / "token").write_text("from-file\n")
    path = kubeconfig(tmp_path / "kubeconfig", {"server": url}, user)
    assert authorization_sent(load_configuration(str(path)), state) == [header]


def test_a_rotated_token_file_is_sent_within_a_minute(
    server: tuple[FakeApiServer, str], tmp_path: Path
) -> None:
    state, url = server
    token = tmp_path / "token"
    token.write_text("first")
    clock = FakeClock()
    configuration = Configuration(host=url, authorization=TokenFile(str(token), clock=clock))
    assert authorization_sent(configuration, state) == ["Bearer first"]
    token.write_text("second")  # the kubelet rotates the projected token
    clock.advance(59)
    assert authorization_sent(configuration, state) == ["Bearer first"]
    clock.advance(1)
    assert authorization_sent(configuration, state) == ["Bearer second"]
    token.unlink()  # mid-rotation: the last token stays in use
    clock.advance(60)
    assert authorization_sent(configuration, state) == ["Bearer second"]


@pytest.mark.parametrize(
    ("host", "url"),
    [("10.96.0.1", "https://10.96.0.1:443"), ("fd00::1", "https://[fd00::1]:443")],
    ids=["IPv4", "IPv6"],
)
def test_in_cluster_reads_the_service_and_the_service_account(
    tmp_path: Path, host: str, url: str
) -> None:
    (tmp_path / "ca.crt").write_text("CA")
    (tmp_path / "token").write_text("sa-token")
    environ = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}
    configuration = in_cluster(environ, str(tmp_path))
    assert (configuration.host, configuration.ca_file) == (url, str(tmp_path / "ca.crt"))
    assert isinstance(configuration.authorization, TokenFile)
    assert configuration.authorization.path == str(tmp_path / "token")
    assert configuration.authorization.header() == "Bearer sa-token"


@pytest.mark.parametrize(
    ("environ", "files", "message"),
    [
        ({}, {"ca.crt": "CA", "token": "t"}, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT"),
        (None, {"token": "t"}, "ca.crt"),
        (None, {"ca.crt": "", "token": "t"}, "ca.crt: empty"),
        (None, {"ca.crt": "CA"}, "token"),
        (None, {"ca.crt": "CA", "token": "\n"}, "token: empty"),
    ],
    ids=["not in a pod", "no CA", "empty CA", "no token", "empty token"],
)
def test_in_cluster_refusals_name_what_is_missing(
    tmp_path: Path, environ: dict[str, str] | None, files: dict[str, str], message: str
) -> None:
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    service = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(ConfigError, match=message):
        in_cluster(service if environ is None else environ, str(tmp_path))


PLUGIN = """#!{python}
import json, os, sys
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
call = {{"info": info, "argv": sys.argv[1:], "team": os.environ.get("TEAM")}}
with open({calls!r}, "a") as calls:
    calls.write(json.dumps(call) + "\\n")
count = sum(1 for _ in open({calls!r}))
status = json.loads({status!r})
if "token" in status:
    status["token"] = status["token"] + "-" + str(count)
print(json.dumps({{"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}}))
"""


def plugin(directory: Path, status: dict[str, Any], name: str = "plugin") -> tuple[Path, Path]:
    """An executable credential plugin answering with ``status`` (its token numbered by call),
    and the file where it records each call."""
    calls = directory / f"{name}.calls"
    script = directory / name
    script.write_text(
        PLUGIN.format(python=sys.executable, calls=str(calls), status=json.dumps(status))
    )
    script.chmod(0o755)
    return script, calls


def calls_of(calls: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in calls.read_text().splitlines()]


def test_an_exec_plugin_is_run_as_client_go_runs_it(
    server: tuple[FakeApiServer, str], tmp_path: Path
) -> None:
    state, url = server
    (tmp_path / "bin").mkdir()
    plugin(tmp_path / "bin", {"token": "exec"})
    exec_spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "./bin/plugin",  # relative to the kubeconfig's directory
        "args": ["--cluster", "one"],
        "env": [{"name": "TEAM", "value": "ml"}],
        "provideClusterInfo": True,
        "interactiveMode": "Never",
    }
    cluster = {"server": url, "extensions": [
        {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "x"}}]}  # fmt: skip
    path = kubeconfig(tmp_path / "kubeconfig", cluster, {"exec": exec_spec})
    configuration = load_configuration(str(path))
    assert authorization_sent(configuration, state) == ["Bearer exec-1"]
    # No expiry: the credential is kept for the life of the process, as client-go keeps it.
    assert authorization_sent(configuration, state) == ["Bearer exec-1"]
    [call] = calls_of(tmp_path / "bin" / "plugin.calls")
    assert call["argv"] == ["--cluster", "one"]
    assert call["team"] == "ml"
    assert call["info"] == {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "spec": {"interactive": False, "cluster": {"server": url, "config": {"audience": "x"}}},
    }


def test_an_expiring_exec_credential_is_renewed_before_it_expires(tmp_path: Path) -> None:
    clock = FakeClock()  # 2026-01-01T00:00:00Z
    script, calls = plugin(tmp_path, {"token": "t", "expirationTimestamp": "2026-01-01T00:10:00Z"})
    spec = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(script)}
    exec_plugin = ExecPlugin(spec, where="exec", directory=str(tmp_path), cluster=None, clock=clock)
    assert exec_plugin.header() == "Bearer t-1"
    clock.advance(timedelta(minutes=9, seconds=49).total_seconds())
    assert exec_plugin.header() == "Bearer t-1"
    clock.advance(2)  # within 10 s of the expiry
    assert exec_plugin.header() == "Bearer t-2"
    assert len(calls_of(calls)) == 2


def test_an_exec_plugins_client_certificate_becomes_the_clients(tmp_path: Path) -> None:
    script, _ = plugin(
        tmp_path,
        {"clientCertificateData": "-----CERT-----", "clientKeyData": "-----KEY-----"},
    )
    spec = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script)}
    path = kubeconfig(tmp_path / "kubeconfig", {"server": "https://api.example"}, {"exec": spec})
    configuration = load_configuration(str(path))
    assert configuration.authorization is None
    assert Path(str(configuration.cert_file)).read_text() == "-----CERT-----"
    assert Path(str(configuration.key_file)).read_text() == "-----KEY-----"


def test_a_failing_exec_plugin_is_refused_with_its_message(tmp_path: Path) -> None:
    script = tmp_path / "plugin"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.exit('login expired, run sso')\n")
    script.chmod(0o755)
    spec = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script)}
    path = kubeconfig(tmp_path / "kubeconfig", {"server": "https://api.example"}, {"exec": spec})
    with pytest.raises(ConfigError) as caught:
        load_configuration(str(path))
    assert "users[u].user.exec" in str(caught.value)
    assert "exited with 1: login expired, run sso" in str(caught.value)


def test_a_credential_that_fails_to_renew_is_an_api_error_of_the_request(
    server: tuple[FakeApiServer, str],
) -> None:
    state, url = server

    class Expired:
        def header(self) -> str:
            raise ConfigError("users[u].user.exec: plugin exited with 1")

    client = Client(Configuration(host=url, authorization=Expired()), qps=0)
    with pytest.raises(ApiError) as caught:
        client.get(PODS, "p", "ns")
    client.close()
    assert (caught.value.status, caught.value.reason) == (0, "CredentialError")
    assert state.seen == []


def test_a_kubeconfig_list_is_merged_as_client_go_merges_it(
    server: tuple[FakeApiServer, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, url = server
    first = kubeconfig(tmp_path / "first", {"server": url}, {"token": "first"})
    second = kubeconfig(
        tmp_path / "second", {"server": "https://second.invalid"}, {"token": "second"},
        current="other",
    )  # fmt: skip
    missing = tmp_path / "missing"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(map(str, (missing, first, second))))
    configuration = load_configuration()
    assert configuration.host == url
    assert authorization_sent(configuration, state) == ["Bearer first"]


@pytest.mark.parametrize(
    ("cluster", "user", "context", "message"),
    [
        ({"server": "https://a"}, {"auth-provider": {"name": "oidc"}}, None,
         r"users\[u\]\.user\.auth-provider: not supported .* use an exec credential plugin"),
        ({"server": "https://a"}, None, "elsewhere", "contexts: no context named 'elsewhere'"),
        ({}, None, None, r"clusters\[c\]\.cluster\.server: required"),
        ({"server": "https://a", "certificate-authority-data": "not base64!"}, None, None,
         r"clusters\[c\]\.cluster\.certificate-authority-data: not base64"),
        ({"server": "https://a", "certificate-authority": "ca.crt"}, None, None,
         r"clusters\[c\]\.cluster\.certificate-authority: no such file"),
        ({"server": "https://a", "insecure-skip-tls-verify": True,
          "certificate-authority-data": b64(b"CA")}, None, None,
         "certificate-authority and insecure-skip-tls-verify together"),
        ({"server": "https://a"}, {"client-certificate-data": b64(b"C")}, None,
         "client-certificate and client-key go together"),
        ({"server": "https://a"}, {"exec": {"command": "x"}}, None,
         r"users\[u\]\.user\.exec\.apiVersion: required"),
        ({"server": "https://a"}, {"exec": {"command": "x", "apiVersion": "v1",
                                            "interactiveMode": "Sometimes"}}, None,
         r"exec\.interactiveMode: must be Never, IfAvailable or Always"),
    ],
    ids=["auth-provider", "context", "server", "CA data", "CA file", "insecure with a CA",
         "certificate without key", "exec apiVersion", "exec interactiveMode"],
)  # fmt: skip
def test_what_cannot_reach_a_cluster_is_refused_by_its_path(
    tmp_path: Path,
    cluster: dict[str, Any],
    user: dict[str, Any] | None,
    context: str | None,
    message: str,
) -> None:
    path = kubeconfig(tmp_path / "kubeconfig", cluster, user)
    with pytest.raises(ConfigError, match=message) as caught:
        load_configuration(str(path), context=context)
    assert str(path) in str(caught.value)


def test_a_missing_kubeconfig_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing: No such file or directory$"):
        load_configuration(str(tmp_path / "missing"))


def test_master_overrides_the_server(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kubeconfig", {"server": "https://a"}, {"token": "t"})
    configuration = load_configuration(str(path), master="http://127.0.0.1:8080/")
    assert configuration.host == "http://127.0.0.1:8080"
    assert configuration.authorization is not None
    assert configuration.authorization.header() == "Bearer t"


@pytest.mark.parametrize(
    ("url", "no_proxy", "proxied"),
    [
        ("https://api.example:6443", "", True),
        ("https://api.example:6443", "*", False),
        ("https://api.example:6443", "example", False),
        ("https://api.example:6443", ".example", False),
        ("https://api.example:6443", "other.example", True),
        ("https://api.example:6443", "api.example:6443", False),
        ("https://api.example:6443", "api.example:443", True),
        ("https://10.1.2.3:6443", "10.0.0.0/8", False),
        ("https://10.1.2.3:6443", "192.168.0.0/16, 10.1.2.3", False),
        ("https://11.1.2.3:6443", "10.0.0.0/8", True),
        ("https://[fd00::1]:6443", "fd00::/8", False),
    ],
)
def test_no_proxy_as_gos_httpproxy_reads_it(url: str, no_proxy: str, proxied: bool) -> None:
    environ = {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": no_proxy}
    expected = "http://proxy:3128" if proxied else None
    assert environment_proxy(url, environ) == expected


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"https_proxy": "http://lower:1"}, "http://lower:1"),
        ({"https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:2"}, "http://upper:2"),
        ({"HTTPS_PROXY": "", "https_proxy": "http://lower:1"}, "http://lower:1"),
        ({"HTTP_PROXY": "http://plain:3"}, None),
        ({"all_proxy": "http://any:4"}, "http://any:4"),
        ({"HTTPS_PROXY": "http://upper:2", "no_proxy": "api.example"}, None),
    ],
)
def test_proxy_variables_as_gos_httpproxy_reads_them(
    environ: dict[str, str], expected: str | None
) -> None:
    assert environment_proxy("https://api.example:6443", environ) == expected


def test_the_operator_stops_with_one_line_naming_the_entry(tmp_path: Path) -> None:
    user = {"auth-provider": {"name": "oidc"}}
    path = kubeconfig(tmp_path / "kubeconfig", {"server": "https://a"}, user)
    done = subprocess.run(
        [sys.executable, "-m", "mpi_operator", "--kubeconfig", str(path), "--log-format=json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    [line] = [json.loads(text) for text in done.stderr.splitlines() if "configuration" in text]
    assert line["msg"].startswith(f"cannot load the cluster configuration: kubeconfig {path}: ")
    assert "users[u].user.auth-provider: not supported" in line["msg"]
