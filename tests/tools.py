"""Pinned tools the tests run, built where hack/cluster builds them."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@functools.cache
def helm_binary() -> str:
    """Helm built by hack/cluster/build-helm.sh: built on first use (about a minute cold),
    then read from the cache, as the local cluster's binaries are."""
    built = subprocess.run(
        ["bash", str(REPO / "hack" / "cluster" / "build-helm.sh")],
        stdout=subprocess.PIPE,
        stderr=sys.stderr,
        text=True,
        check=True,
    )
    return built.stdout.strip().splitlines()[-1]
