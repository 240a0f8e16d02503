"""Who the client is to the API server: the ``Authorization`` header of every request.

A source is asked for the header before each request, from any thread, so a credential that
changes (a service account token the kubelet rotates, an exec plugin's token that expires) is
sent as soon as it is new, without a client being rebuilt. Client certificates are TLS
settings, not headers: :mod:`.kubeconfig` hands them to the connection pools.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from mpi_operator.runtime.clock import REAL_CLOCK, Clock

log = logging.getLogger(__name__)


class ConfigError(Exception):
    """Configuration that cannot reach a cluster; the message names where it went wrong."""


class Authorization(Protocol):
    def header(self) -> str:
        """The ``Authorization`` header's value for the next request."""
        ...


@dataclass(frozen=True)
class FixedAuthorization:
    """A header that never changes: a token written into the kubeconfig, or basic auth."""

    value: str

    def header(self) -> str:
        return self.value

    @classmethod
    def basic(cls, username: str, password: str) -> FixedAuthorization:
        encoded = base64.b64encode(f"{username}:{password}".encode()).decode()
        return cls(f"Basic {encoded}")


TOKEN_FILE_PERIOD = 60.0
"""Seconds a token read from a file is used before the file is read again, as client-go's
cached file token source does: the kubelet rewrites a projected service account token well
before it expires (at 80% of its life, an hour at the least)."""


class TokenFile:
    """A bearer token read from a file, and read again once :data:`TOKEN_FILE_PERIOD` has
    passed, so a rotated token is sent within a minute of its rotation. A file that cannot be
    read then (mid-rotation, say) leaves the last token in use; one that never could is a
    :class:`ConfigError` at once."""

    def __init__(self, path: str, *, clock: Clock = REAL_CLOCK) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._token = self._read()
        self._read_at = clock.monotonic()

    def header(self) -> str:
        with self._lock:
            if self._clock.monotonic() - self._read_at >= TOKEN_FILE_PERIOD:
                self._read_at = self._clock.monotonic()
                try:
                    self._token = self._read()
                except ConfigError as error:
                    log.warning("keeping the last token: %s", error)
            return f"Bearer {self._token}"

    def _read(self) -> str:
        try:
            with open(self.path, encoding="utf-8") as file:
                token = file.read().strip()
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"token file {self.path}: {error}") from error
        if not token:
            raise ConfigError(f"token file {self.path}: empty")
        return token


@dataclass(frozen=True)
class ExecCredential:
    """What an exec plugin answered: a token, or a client certificate and key (PEM)."""

    token: str | None
    client_certificate: str | None
    client_key: str | None
    expires: datetime | None


EXEC_EXPIRY_MARGIN = timedelta(seconds=10)
"""An exec plugin's credential is renewed this long before it expires, so that a request sent
just before the expiry does not arrive just after it."""

Run = Callable[..., "subprocess.CompletedProcess[str]"]


class ExecPlugin:
    """A client-go credential plugin (``users[].user.exec``): the command is run when a
    credential is first needed and again once the last one has (nearly) expired; a credential
    without ``expirationTimestamp`` is kept for the life of the process, as client-go keeps it.

    ``where`` names the kubeconfig entry in error messages."""

    def __init__(
        self,
        spec: Mapping[str, Any],
        *,
        where: str,
        directory: str,
        cluster: Mapping[str, Any] | None,
        clock: Clock = REAL_CLOCK,
        run: Run = subprocess.run,
    ) -> None:
        self._where = where
        self._api_version = _required_string(spec, "apiVersion", where)
        command = _required_string(spec, "command", where)
        if os.sep in command and not os.path.isabs(command):
            # client-go resolves a relative path with a separator against the kubeconfig's
            # directory; a bare name is looked up on $PATH.
            command = os.path.join(directory, command)
        args = spec.get("args") or []
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise ConfigError(f"{where}.args: must be a list of strings")
        self._argv = [command, *args]
        self._env = dict(os.environ)
        for index, item in enumerate(spec.get("env") or []):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise ConfigError(f"{where}.env[{index}]: must have a name and a value")
            self._env[item["name"]] = str(item.get("value") or "")
        mode = spec.get("interactiveMode") or "IfAvailable"
        if mode not in ("Never", "IfAvailable", "Always"):
            raise ConfigError(
                f"{where}.interactiveMode: must be Never, IfAvailable or Always, not {mode!r}"
            )
        self._interactive = mode != "Never" and sys.stdin is not None and sys.stdin.isatty()
        if mode == "Always" and not self._interactive:
            raise ConfigError(
                f"{where}.interactiveMode: Always, but standard input is not a terminal"
            )
        self._cluster = cluster if spec.get("provideClusterInfo") else None
        self._clock = clock
        self._run = run
        self._lock = threading.Lock()
        self._credential: ExecCredential | None = None

    def credential(self) -> ExecCredential:
        """The current credential, from the plugin when there is none or it is expiring."""
        with self._lock:
            current = self._credential
            if current is None or (
                current.expires is not None
                and self._clock.now() >= current.expires - EXEC_EXPIRY_MARGIN
            ):
                current = self._credential = self._call()
            return current

    def header(self) -> str:
        token = self.credential().token
        if token is None:
            raise ConfigError(f"{self._where}: the plugin gave a client certificate, no token")
        return f"Bearer {token}"

    def _call(self) -> ExecCredential:
        spec: dict[str, Any] = {"interactive": self._interactive}
        if self._cluster is not None:
            spec["cluster"] = self._cluster
        request = {"apiVersion": self._api_version, "kind": "ExecCredential", "spec": spec}
        env = {**self._env, "KUBERNETES_EXEC_INFO": json.dumps(request)}
        try:
            done = self._run(
                self._argv,
                env=env,
                stdin=None if self._interactive else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=None if self._interactive else subprocess.PIPE,
                text=True,
                check=False,
            )
        except OSError as error:
            raise ConfigError(f"{self._where}.command: {error}") from error
        if done.returncode != 0:
            stderr = (done.stderr or "").strip()
            raise ConfigError(
                f"{self._where}: {self._argv[0]} exited with {done.returncode}"
                + (f": {stderr}" if stderr else "")
            )
        return self._parse(done.stdout)

    def _parse(self, output: str) -> ExecCredential:
        where = f"{self._where}: the plugin's answer"
        try:
            answer = json.loads(output)
        except ValueError as error:
            raise ConfigError(f"{where}: not JSON: {error}") from error
        if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
            raise ConfigError(f"{where}: not an ExecCredential")
        if answer.get("apiVersion") != self._api_version:
            raise ConfigError(
                f"{where}.apiVersion: {answer.get('apiVersion')!r}, "
                f"the kubeconfig asks for {self._api_version!r}"
            )
        status = answer.get("status")
        if not isinstance(status, dict):
            raise ConfigError(f"{where}.status: missing")
        token = _optional_string(status, "token", where)
        certificate = _optional_string(status, "clientCertificateData", where)
        key = _optional_string(status, "clientKeyData", where)
        if not token and not (certificate and key):
            raise ConfigError(
                f"{where}.status: needs a token, or clientCertificateData and clientKeyData"
            )
        expires = status.get("expirationTimestamp")
        return ExecCredential(
            token or None,
            certificate or None,
            key or None,
            None if expires is None else _timestamp(expires, f"{where}.status.expirationTimestamp"),
        )


def _timestamp(value: object, where: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as error:
        raise ConfigError(f"{where}: not an RFC 3339 time: {value!r}") from error
    if parsed.tzinfo is None:
        raise ConfigError(f"{where}: needs a time zone: {value!r}")
    return parsed


def _required_string(spec: Mapping[str, Any], key: str, where: str) -> str:
    value = spec.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}.{key}: required")
    return value


def _optional_string(spec: Mapping[str, Any], key: str, where: str) -> str:
    value = spec.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{where}.status.{key}: must be a string")
    return value or ""
