"""Pinned tools the tests run, built where hack/cluster builds them."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def rule_permissions(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(API group, resource or resource/subresource, verb) of every grant in a role's rules."""
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


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


def run_helm(
    kubeconfig: str, home: Path, *args: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """The pinned helm against ``kubeconfig`` with its cache, configuration and data under
    ``home`` (never the user's), output captured, never raising on failure."""
    env = {
        **{k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
        "HELM_CACHE_HOME": str(home / "helm-cache"),
        "HELM_CONFIG_HOME": str(home / "helm-config"),
        "HELM_DATA_HOME": str(home / "helm-data"),
    }
    return subprocess.run(
        [helm_binary(), f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )
