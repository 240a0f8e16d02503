"""``mpi-operator deliver-kubectl``: the operator's image as a kubeflow.org/v1 launcher's
kubectl-delivery image. A launcher runs that image with no command and no arguments and
$TARGET_DIR set (training-operator's interface); the operator's image then copies its kubectl
there, as the command does, and never starts the operator."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mpi_operator.cli import main

KUBECTL_BYTES = b"#!/bin/sh\necho kubectl\n"


@pytest.fixture
def image_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A $PATH whose only kubectl is a known file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_bytes(KUBECTL_BYTES)
    kubectl.chmod(0o700)
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


@pytest.fixture
def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "kube"
    directory.mkdir()
    monkeypatch.setenv("TARGET_DIR", str(directory))
    return directory


@pytest.mark.parametrize("argv", [[], ["deliver-kubectl"]], ids=["no-arguments", "command"])
def test_copies_kubectl_to_the_target_directory_executable_by_anyone(
    image_path: Path, target: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main(argv) == 0
    delivered = target / "kubectl"
    assert delivered.read_bytes() == KUBECTL_BYTES
    assert stat.S_IMODE(delivered.stat().st_mode) == 0o755
    assert sorted(os.listdir(target)) == ["kubectl"]
    out = capsys.readouterr().out
    assert out == f"mpi-operator deliver-kubectl: copied {image_path}/kubectl to {delivered}\n"


def test_a_rerun_replaces_what_an_earlier_run_left(image_path: Path, target: Path) -> None:
    (target / "kubectl").write_bytes(b"old")
    (target / "kubectl").chmod(0o500)
    assert main(["deliver-kubectl"]) == 0
    assert (target / "kubectl").read_bytes() == KUBECTL_BYTES


def test_without_target_dir_no_arguments_start_the_operator_not_a_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TARGET_DIR", raising=False)
    started: list[object] = []
    monkeypatch.setattr("mpi_operator.cli._operator", lambda argv: started.append(argv) or 0)
    assert main([]) == 0
    assert started == [[]]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "is not a directory this user can write to"),
        ("no-kubectl", "no kubectl on $PATH in this image"),
        ("unset", "$TARGET_DIR must name a directory"),
    ],
)
def test_a_delivery_that_cannot_work_says_why_in_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    setup: str,
    message: str,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("TARGET_DIR", str(tmp_path))
    if setup == "missing":
        monkeypatch.setenv("TARGET_DIR", str(tmp_path / "absent"))
    elif setup == "unset":
        monkeypatch.delenv("TARGET_DIR")
    assert main(["deliver-kubectl"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith("mpi-operator deliver-kubectl: ")
    assert message in err
