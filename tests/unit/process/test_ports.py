"""A port the operator cannot bind stops it with one line naming the flag, not a traceback."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mpi_operator.operator.options import Options
from mpi_operator.testing.launch import operator_command


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.fixture
def refusing_server() -> str:
    """An address where nothing listens: every request to the API server is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("health_port", "cannot serve /healthz and /readyz on --health-port"),
        ("monitoring_port", "cannot serve metrics on --monitoring-port"),
    ],
)
def test_a_taken_port_stops_the_operator_with_one_line_naming_its_flag(
    tmp_path: Path, taken_port: int, refusing_server: str, flag: str, message: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{refusing_server}'}}}}]\n"
        "users: [{name: u, user: {}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    options = Options(kubeconfig=str(kubeconfig), bind_address="127.0.0.1", health_port=0)
    argv = operator_command(options, [f"--{flag.replace('_', '-')}={taken_port}"])
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.splitlines()[-1]
    assert f"{message} {taken_port}: Address already in use" in last, result.stderr
