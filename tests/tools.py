"""Pinned tools the tests run, built where hack/cluster builds them."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from gang import select_gang_scheduler

REPO = Path(__file__).resolve().parents[1]
GANG_COMPONENTS = REPO / "deploy" / "components"
GANG_FLAG = "--gang-scheduling="


def rule_permissions(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(API group, resource or resource/subresource, verb) of every grant in a role's rules."""
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def gang_component_rules(component: Path) -> list[dict[str, Any]]:
    """The rules a ``deploy/components/gang-*`` component adds to the operator's ClusterRole
    (the values of its JSON patch's ``add /rules/-`` operations)."""
    operations = yaml.safe_load((component / "cluster-role.yaml").read_text())
    assert all(op["op"] == "add" and op["path"] == "/rules/-" for op in operations), component
    return [op["value"] for op in operations]


def gang_component_flag(component: Path) -> str:
    """The --gang-scheduling value a component adds to the operator's arguments."""
    operations = yaml.safe_load((component / "deployment.yaml").read_text())
    values = [op["value"] for op in operations]
    assert len(values) == 1 and values[0].startswith(GANG_FLAG), component
    return str(values[0]).removeprefix(GANG_FLAG)


def gang_components() -> list[Path]:
    return sorted(path.parent for path in GANG_COMPONENTS.glob("gang-*/kustomization.yaml"))


def gang_scheduling_values() -> list[str]:
    """--gang-scheduling values that select each strategy once, and off: the empty value and
    each component's own."""
    return ["", *(gang_component_flag(component) for component in gang_components())]


def gang_component_for(gang_scheduling: str) -> Path | None:
    """The component that grants what a --gang-scheduling value needs: the one whose own value
    selects the same strategy (any coscheduling scheduler name, say); None without gang
    scheduling."""
    strategy = select_gang_scheduler(gang_scheduling)
    if strategy is None:
        return None
    found = [
        component
        for component in gang_components()
        if type(select_gang_scheduler(gang_component_flag(component))) is type(strategy)
    ]
    assert len(found) == 1, f"components for --gang-scheduling={gang_scheduling}: {found}"
    return found[0]


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
