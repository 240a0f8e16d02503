"""What the tests on real pods share: the examples, and reading what the launcher printed.

The pi program (hack/images/files/pi.c) prints one ``rank N on HOST`` line per rank and
``pi is approximately 3.14159...``; a job whose pods run for real is judged by those lines.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .clusters import REPO, E2ECluster, wait_until
from .operator import pods_of

EXAMPLES = REPO / "examples" / "pi"
RANK_LINE = re.compile(r"^rank (\d+) on (\S+)$", re.MULTILINE)
PI_LINE = re.compile(r"^pi is approximately (3\.\d+)", re.MULTILINE)


def example(file: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLES / file).read_text())
    return job


def containers(job: dict[str, Any], role: str) -> list[dict[str, Any]]:
    spec: list[dict[str, Any]] = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"][
        "containers"
    ]
    return spec


def launcher_log(cluster: E2ECluster, namespace: str, job_name: str) -> str:
    """The log of the job's one launcher pod."""
    pods = pods_of(cluster, namespace, job_name, "launcher")
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return pod_log(cluster, namespace, pods[0].metadata.name)


def pod_log(cluster: E2ECluster, namespace: str, pod: str) -> str:
    return str(cluster.core.read_namespaced_pod_log(pod, namespace))


def phase(cluster: E2ECluster, namespace: str, pod: str) -> str:
    return str(cluster.get_pod(namespace, pod)["status"].get("phase", ""))


def wait_finished(cluster: E2ECluster, namespace: str, pod: str, timeout: float = 120) -> str:
    """The pod's phase once it is Succeeded or Failed."""

    def finished() -> str | None:
        now = phase(cluster, namespace, pod)
        return now if now in ("Succeeded", "Failed") else None

    return wait_until(
        finished,
        timeout,
        message=lambda: f"pod {pod} to finish: {cluster.get_pod(namespace, pod)['status']}",
    )


def rank_hosts(log: str) -> list[str]:
    """The host of every rank the pi program reported, sorted."""
    return sorted(host for _, host in RANK_LINE.findall(log))


def assert_pi(log: str) -> None:
    """The launcher printed pi, right to 6 decimals."""
    pi = PI_LINE.search(log)
    assert pi is not None, log
    assert pi.group(1)[:8] == "3.141592", log


def set_image(job: dict[str, Any], image: str) -> None:
    """Every container of the job runs ``image``."""
    for spec in job["spec"]["mpiReplicaSpecs"].values():
        for container in spec["template"]["spec"]["containers"]:
            container["image"] = image


def wrap_command(container: dict[str, Any], script: str, name: str) -> None:
    """The container runs bash ``script`` with its command and arguments as ``"$@"``.

    A container without a command keeps its image's entrypoint (the MPICH and Intel images'
    prepares the environment), which then runs the script."""
    wrapper = ["bash", "-c", script, name]
    if "command" in container:
        container["command"] = [*wrapper, *container["command"], *container.pop("args", [])]
    else:
        container["args"] = [*wrapper, *container.get("args", [])]
