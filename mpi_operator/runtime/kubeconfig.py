"""Where the API server is and how to talk to it: a kubeconfig, or the pod's service account.

Read here rather than through the official ``kubernetes`` package, whose import alone took
0.25 s of CPU and 35 MiB of the operator's start (docs/performance.md): what a client needs of
either source is a URL, TLS files and an ``Authorization`` header (:mod:`.credentials`), which
this module reads as client-go's ``clientcmd`` and ``rest.InClusterConfig`` read them. Data held in
the kubeconfig itself (``certificate-authority-data``, ``client-*-data``, an exec plugin's
certificate) is written to files of mode 0600 removed at exit, because urllib3 and libcurl take
TLS material as files. The ``auth-provider`` section is refused, as upstream's binary refuses it
(client-go dropped the gcp and azure providers; no provider is compiled in): an exec plugin
does the same job.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import ipaddress
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mpi_operator.runtime.credentials import (
    Authorization,
    ConfigError,
    ExecPlugin,
    FixedAuthorization,
    TokenFile,
)

SERVICE_ACCOUNT_DIRECTORY = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass
class Configuration:
    """A server and how to reach it. ``ca_file`` None with ``verify_tls`` means the system's CA
    store; ``proxy`` is the one proxy to go through (the kubeconfig's ``proxy-url``, else the
    environment's for this server, unless ``NO_PROXY`` names it), None for none."""

    host: str
    authorization: Authorization | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_tls: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    pool_maxsize: int = 32


def load_configuration(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    master: str | None = None,
    pool_maxsize: int = 32,
) -> Configuration:
    """Connection settings: ``kubeconfig`` if given, else ``$KUBECONFIG``, else in-cluster.

    (Upstream lets a non-empty ``$KUBECONFIG`` override its ``-kubeConfig`` flag; a command line
    that wants that passes the variable in. An explicit argument wins here so tests can point a
    client at their own cluster whatever the environment says.)

    ``master`` overrides the server URL. The pool must hold a connection for every watch plus
    the workers' requests, far more than a default pool's handful.
    """
    explicit = bool(kubeconfig)
    paths = kubeconfig or os.environ.get("KUBECONFIG") or ""
    if paths:
        configuration = from_kubeconfig(paths, context=context, explicit=explicit)
    else:
        configuration = in_cluster()
    if master:
        configuration.host = master.rstrip("/")
        configuration.proxy = environment_proxy(configuration.host)
    configuration.pool_maxsize = pool_maxsize
    return configuration


# -- in-cluster ------------------------------------------------------------------------------


def in_cluster(
    environ: Mapping[str, str] = os.environ, directory: str = SERVICE_ACCOUNT_DIRECTORY
) -> Configuration:
    """The pod's service account: the API server's Service from the environment, its CA and a
    token the kubelet rotates (re-read once a minute, :class:`.credentials.TokenFile`)."""
    host = environ.get("KUBERNETES_SERVICE_HOST", "")
    port = environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
            "are not set (not in a pod? pass --kubeconfig or set $KUBECONFIG)"
        )
    ca_file = os.path.join(directory, "ca.crt")
    try:
        with open(ca_file, "rb") as file:
            if not file.read().strip():
                raise ConfigError(f"in-cluster configuration: {ca_file}: empty")
    except OSError as error:
        raise ConfigError(f"in-cluster configuration: {error}") from error
    # An IPv6 address goes in brackets (Go's net.JoinHostPort).
    netloc = f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"
    url = f"https://{netloc}"
    return Configuration(
        host=url,
        authorization=TokenFile(os.path.join(directory, "token")),
        ca_file=ca_file,
        proxy=environment_proxy(url),
    )


# -- kubeconfig ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    """A named cluster, user or context, and the file that defined it (relative paths in it
    are relative to that file's directory)."""

    name: str
    value: Mapping[str, Any]
    source: str

    @property
    def directory(self) -> str:
        return os.path.dirname(os.path.abspath(self.source))


def from_kubeconfig(
    paths: str, *, context: str | None = None, explicit: bool = True
) -> Configuration:
    """Settings from one kubeconfig file, or from a ``:``-separated list merged as client-go
    merges ``$KUBECONFIG``: the first file to name a cluster, user or context wins, as does the
    first ``current-context``; files of the list that do not exist are skipped. An
    ``explicit`` single path must exist."""
    entries: dict[str, dict[str, _Entry]] = {"clusters": {}, "users": {}, "contexts": {}}
    current = ""
    read_any = False
    for path in (p for p in paths.split(os.pathsep) if p):
        path = os.path.expanduser(path)
        if not explicit and not os.path.exists(path):
            continue
        document = _read_kubeconfig(path)
        read_any = True
        current = current or str(document.get("current-context") or "")
        for section, named in entries.items():
            for entry in _named_entries(document, section, path):
                named.setdefault(entry.name, entry)
    if not read_any:
        raise ConfigError(f"kubeconfig {paths}: no such file")
    name = context or current
    if not name:
        raise ConfigError(f"kubeconfig {paths}: no current-context, and no context given")
    chosen = entries["contexts"].get(name)
    if chosen is None:
        raise ConfigError(f"kubeconfig {paths}: contexts: no context named {name!r}")
    where = f"kubeconfig {chosen.source}: contexts[{name}].context"
    cluster_name = chosen.value.get("cluster")
    cluster = entries["clusters"].get(str(cluster_name or ""))
    if cluster is None:
        raise ConfigError(f"{where}.cluster: no cluster named {cluster_name!r}")
    user_name = chosen.value.get("user")
    user = entries["users"].get(str(user_name)) if user_name else None
    if user_name and user is None:
        raise ConfigError(f"{where}.user: no user named {user_name!r}")
    configuration = _cluster_settings(cluster)
    if user is not None:
        _add_user_settings(configuration, user, cluster)
    return configuration


def _read_kubeconfig(path: str) -> Mapping[str, Any]:
    # Only here: in a pod, where the service account is read, nothing else needs YAML.
    import yaml

    # libyaml's loader where PyYAML has it: the pure-Python one takes milliseconds of the start.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with open(path, encoding="utf-8") as file:
            document = yaml.load(file, Loader=loader)
    except OSError as error:
        raise ConfigError(f"kubeconfig {path}: {error.strerror or error}") from error
    except (UnicodeDecodeError, yaml.YAMLError) as error:
        raise ConfigError(f"kubeconfig {path}: {error}") from error
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(f"kubeconfig {path}: not a mapping")
    return document


def _named_entries(document: Mapping[str, Any], section: str, path: str) -> list[_Entry]:
    items = document.get(section) or []
    if not isinstance(items, list):
        raise ConfigError(f"kubeconfig {path}: {section}: must be a list")
    singular = section[:-1]
    found = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ConfigError(f"kubeconfig {path}: {section}[{index}].name: required")
        value = item.get(singular) or {}
        if not isinstance(value, dict):
            raise ConfigError(
                f"kubeconfig {path}: {section}[{item['name']}].{singular}: not a mapping"
            )
        found.append(_Entry(item["name"], value, path))
    return found


def _cluster_settings(cluster: _Entry) -> Configuration:
    where = f"kubeconfig {cluster.source}: clusters[{cluster.name}].cluster"
    server = cluster.value.get("server")
    if not isinstance(server, str) or not server:
        raise ConfigError(f"{where}.server: required")
    host = server.rstrip("/")
    insecure = cluster.value.get("insecure-skip-tls-verify") is True
    ca_file = _file_or_data(cluster, "certificate-authority", where)
    if insecure and ca_file:
        # As client-go: a CA that would not be checked is a mistake, not a setting.
        raise ConfigError(
            f"{where}: certificate-authority and insecure-skip-tls-verify together; keep one"
        )
    proxy = cluster.value.get("proxy-url")
    if proxy is not None and (not isinstance(proxy, str) or "://" not in proxy):
        raise ConfigError(f"{where}.proxy-url: must be a URL, not {proxy!r}")
    tls_server_name = cluster.value.get("tls-server-name")
    return Configuration(
        host=host,
        ca_file=ca_file,
        verify_tls=not insecure,
        tls_server_name=str(tls_server_name) if tls_server_name else None,
        proxy=proxy or environment_proxy(host),
    )


def _add_user_settings(configuration: Configuration, user: _Entry, cluster: _Entry) -> None:
    where = f"kubeconfig {user.source}: users[{user.name}].user"
    spec = user.value
    if spec.get("auth-provider"):
        raise ConfigError(
            f"{where}.auth-provider: not supported (nor by client-go's kubectl since 1.26); "
            "use an exec credential plugin (users[].user.exec)"
        )
    configuration.cert_file = _file_or_data(user, "client-certificate", where)
    configuration.key_file = _file_or_data(user, "client-key", where)
    if bool(configuration.cert_file) != bool(configuration.key_file):
        raise ConfigError(f"{where}: client-certificate and client-key go together")
    token = spec.get("token")
    token_file = spec.get("tokenFile")
    if token:
        configuration.authorization = FixedAuthorization(f"Bearer {token}")
    elif token_file:
        configuration.authorization = TokenFile(_resolve(user, str(token_file)))
    elif spec.get("exec"):
        if not isinstance(spec["exec"], dict):
            raise ConfigError(f"{where}.exec: not a mapping")
        plugin = ExecPlugin(
            spec["exec"],
            where=f"{where}.exec",
            directory=user.directory,
            cluster=_exec_cluster_info(configuration, cluster),
        )
        credential = plugin.credential()
        if credential.token is not None:
            configuration.authorization = plugin
        elif not configuration.cert_file:
            # A certificate is a TLS setting of the pools, taken once here.
            configuration.cert_file = _file_holding(str(credential.client_certificate).encode())
            configuration.key_file = _file_holding(str(credential.client_key).encode())
    elif spec.get("username") or spec.get("password"):
        configuration.authorization = FixedAuthorization.basic(
            str(spec.get("username") or ""), str(spec.get("password") or "")
        )


def _exec_cluster_info(configuration: Configuration, cluster: _Entry) -> dict[str, Any]:
    """The cluster as an ExecCredential's ``spec.cluster`` describes it
    (``provideClusterInfo``), the CA as base64 data whichever way the kubeconfig gave it."""
    info: dict[str, Any] = {"server": configuration.host}
    if configuration.tls_server_name:
        info["tls-server-name"] = configuration.tls_server_name
    if not configuration.verify_tls:
        info["insecure-skip-tls-verify"] = True
    if configuration.ca_file:
        with open(configuration.ca_file, "rb") as file:
            info["certificate-authority-data"] = base64.b64encode(file.read()).decode()
    if cluster.value.get("proxy-url"):
        info["proxy-url"] = cluster.value["proxy-url"]
    for extension in cluster.value.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == (
            "client.authentication.k8s.io/exec"
        ):
            info["config"] = extension.get("extension")
    return info


def _file_or_data(entry: _Entry, key: str, where: str) -> str | None:
    """The file holding ``key``: ``<key>-data`` (base64, preferred, as client-go prefers it)
    written to a file, or ``<key>`` resolved against the kubeconfig's directory."""
    data = entry.value.get(f"{key}-data")
    if data:
        try:
            decoded = base64.b64decode(str(data), validate=True)
        except (binascii.Error, ValueError) as error:
            raise ConfigError(f"{where}.{key}-data: not base64: {error}") from error
        return _file_holding(decoded)
    path = entry.value.get(key)
    if not path:
        return None
    resolved = _resolve(entry, str(path))
    if not os.path.isfile(resolved):
        raise ConfigError(f"{where}.{key}: no such file: {resolved}")
    return resolved


def _resolve(entry: _Entry, path: str) -> str:
    return os.path.normpath(os.path.join(entry.directory, os.path.expanduser(path)))


_held_files: dict[bytes, str] = {}
_held_lock = threading.Lock()


def _file_holding(content: bytes) -> str:
    """A private file with this content, one per distinct content, removed at exit."""
    with _held_lock:
        existing = _held_files.get(content)
        if existing is not None and os.path.isfile(existing):
            return existing
        if not _held_files:
            atexit.register(_remove_held_files)
        descriptor, path = tempfile.mkstemp(prefix="kubeconfig-")
        with os.fdopen(descriptor, "wb") as file:
            file.write(content)
        _held_files[content] = path
        return path


def _remove_held_files() -> None:
    with _held_lock:
        for path in _held_files.values():
            with contextlib.suppress(OSError):
                os.remove(path)
        _held_files.clear()


# -- proxies ---------------------------------------------------------------------------------


def environment_proxy(url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy ``$HTTPS_PROXY``/``$HTTP_PROXY`` (``$ALL_PROXY``) name for this URL, unless
    ``$NO_PROXY`` names its host, domain or network; read once, when the settings are made."""
    proxies = _proxies_of(os.environ if environ is None else environ)
    parts = urlsplit(url)
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or _bypassed(parts.hostname or "", parts.port, proxies.get("no", "")):
        return None
    return proxy


def _proxies_of(environ: Mapping[str, str]) -> dict[str, str]:
    """Each variable under its upper-case name first, then its lower-case one, as Go's
    ``httpproxy`` (so client-go) reads them; an empty one counts as unset."""
    proxies: dict[str, str] = {}
    for scheme in ("http", "https", "all", "no"):
        value = environ.get(f"{scheme.upper()}_PROXY") or environ.get(f"{scheme}_proxy")
        if value:
            proxies[scheme] = value
    return proxies


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether ``$NO_PROXY`` covers the host: ``*``, the host itself (with or without its
    port), a domain it is in (``.example.com`` or ``example.com``), or a network holding its
    address (``10.0.0.0/8``), as Go's ``httpproxy`` reads the variable."""
    host = host.lower()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for rule in (part.strip().lower() for part in no_proxy.split(",")):
        if not rule:
            continue
        if rule == "*":
            return True
        if address is not None and "/" in rule:
            try:
                if address in ipaddress.ip_network(rule, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name, _, rule_port = rule.rpartition(":") if rule.count(":") == 1 else (rule, "", "")
        if rule_port and str(port or "") != rule_port:
            continue
        name = name.lstrip(".")
        if host == name or host.endswith("." + name):
            return True
    return False
