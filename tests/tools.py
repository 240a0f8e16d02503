"""Pinned tools the tests run, found where hack/cluster builds them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def helm_binary() -> str:
    """Helm built by hack/cluster/build-helm.sh; skips the test when it is not built."""
    printed = subprocess.run(
        ["bash", str(REPO / "hack" / "cluster" / "build-helm.sh"), "--print"],
        capture_output=True,
        text=True,
        check=True,
    )
    binary = Path(printed.stdout.strip())
    if not binary.is_file():
        pytest.skip("helm is not built: run hack/cluster/build-helm.sh (.ci/run does)")
    return str(binary)
