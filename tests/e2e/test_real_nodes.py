"""Real nodes of the local cluster run real containers: a pod gets an address on the
cluster's bridge, its log comes back through the API server, cluster DNS answers for a
headless Service's pods, and `down` leaves nothing on the host."""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import hack.cluster as localcluster
from hack.cluster import realnodes

from .clusters import (
    ClusterProvider,
    E2ECluster,
    _api_client,
    run_cluster_tool,
    wait_until,
)
from .realpods import phase, pod_log, wait_finished

pytestmark = [pytest.mark.e2e, pytest.mark.realnodes]

# An image the images tool builds: Debian with bash and glibc's getent.
IMAGE = "docker.io/mpioperator/openmpi:latest"
REAL_NODE_LABEL = "mpi-operator.dev/real-node"


def real_pod(name: str, script: str, **spec: Any) -> dict[str, Any]:
    """A pod pinned to a real node that runs ``script`` once."""
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {REAL_NODE_LABEL: "true"},
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    # Nothing is pulled: images are imported when the node starts.
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", script],
                }
            ],
            **spec,
        },
    }


def cluster_network(c: E2ECluster) -> ipaddress.IPv4Network:
    info = localcluster.ClusterInfo.load(c.name)
    return ipaddress.IPv4Network(info.network["subnet"])


@pytest.fixture
def ns(real_cluster: E2ECluster, namespace_factory: Callable[[E2ECluster], str]) -> str:
    """A fresh namespace on the real-node cluster of the local provider."""
    if real_cluster.provider != "local":
        pytest.skip("the bridge and the node label belong to the local provider")
    return namespace_factory(real_cluster)


def test_pod_runs_on_the_real_node_with_a_bridge_address_and_its_log_is_served(
    real_cluster: E2ECluster, ns: str
) -> None:
    real_cluster.create_pod(ns, real_pod("hello", "echo hello from $(hostname); cat /etc/hostname"))

    assert wait_finished(real_cluster, ns, "hello") == "Succeeded", pod_log(
        real_cluster, ns, "hello"
    )
    pod = real_cluster.get_pod(ns, "hello")
    assert pod["spec"]["nodeName"].startswith("real-node-")
    assert ipaddress.IPv4Address(pod["status"]["podIP"]) in cluster_network(real_cluster)
    assert pod_log(real_cluster, ns, "hello").splitlines() == ["hello from hello", "hello"]


def test_headless_service_names_resolve_inside_a_pod(real_cluster: E2ECluster, ns: str) -> None:
    real_cluster.core.create_namespaced_service(
        ns,
        {
            "metadata": {"name": "job"},
            "spec": {
                "clusterIP": "None",
                "selector": {"app": "worker"},
                "publishNotReadyAddresses": True,
            },
        },
    )
    worker = real_pod("worker", "sleep 600", hostname="job-worker-0", subdomain="job")
    worker["metadata"]["labels"] = {"app": "worker"}
    real_cluster.create_pod(ns, worker)
    wait_until(
        lambda: real_cluster.get_pod(ns, "worker")["status"].get("podIP"),
        120,
        message=lambda: f"worker to get an address: {real_cluster.get_pod(ns, 'worker')}",
    )
    worker_ip = real_cluster.get_pod(ns, "worker")["status"]["podIP"]

    # The full name as MPI hostfiles write it, and the short one through the search path
    # the operator adds to its pods.
    full = f"job-worker-0.job.{ns}.svc"
    script = f"until getent hosts {full}; do sleep 1; done; getent hosts job-worker-0"
    real_cluster.create_pod(
        ns,
        real_pod(
            "client",
            script,
            activeDeadlineSeconds=60,
            dnsConfig={"searches": [f"job.{ns}.svc.cluster.local"]},
        ),
    )

    assert wait_finished(real_cluster, ns, "client") == "Succeeded", pod_log(
        real_cluster, ns, "client"
    )
    answers = [line.split()[0] for line in pod_log(real_cluster, ns, "client").splitlines()]
    assert answers == [worker_ip, worker_ip]


def test_real_node_servers_listen_on_loopback_or_the_private_bridge_only(
    real_cluster: E2ECluster,
) -> None:
    if real_cluster.provider != "local":
        pytest.skip("only the local provider records its processes")
    info = localcluster.ClusterInfo.load(real_cluster.name)
    gateway = str(next(cluster_network(real_cluster).hosts()))
    listening = {p.name: localcluster.listening_addresses(p.pid) for p in info.processes}
    # CoreDNS serves pods, and the API server reaches kubelets, at the bridge address.
    assert gateway in {ip for ip, _ in listening["coredns"]}
    assert gateway in {ip for ip, _ in listening["kubelet-real-node-0"]}
    exposed = {
        name: addrs
        for name, addrs in listening.items()
        if any(ip not in ("127.0.0.1", "::1", gateway) for ip, _ in addrs)
    }
    assert exposed == {}, f"listening beyond loopback and the bridge: {exposed}"


def test_down_leaves_no_process_mount_bridge_or_namespace(
    cluster_provider: ClusterProvider,
) -> None:
    if cluster_provider.provider != "local":
        pytest.skip(f"the {cluster_provider.provider} provider does not start local processes")
    name = f"e2e-real-down-{uuid.uuid4().hex[:6]}"
    up = run_cluster_tool("up", f"--name={name}", "--real-nodes=1", timeout=900)
    info = localcluster.ClusterInfo.load(name)
    cdir = localcluster.cluster_dir(name)
    procs: list[Any] = []
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        kubeconfig = info.kubeconfig
        c = E2ECluster(name, "default", kubeconfig, "local", _api_client(kubeconfig))
        ns = "default"
        # A running pod is what leaves traces: volumes, a network namespace, a veth.
        c.create_pod(ns, real_pod("busy", "sleep 600"))
        wait_until(lambda: phase(c, ns, "busy") == "Running", 120, message="pod busy to run")
        traces = realnodes.host_traces(name, cdir)
        assert traces.bridge and traces.mounts, traces
        netns = [m for m in traces.mounts if m.parent.name == "netns"]
        assert netns, traces.mounts
        procs = localcluster.ClusterInfo.load(name).processes
        assert {"coredns", "containerd-real-node-0", "kubelet-real-node-0"} <= {
            p.name for p in procs
        }
        c.api.close()
    finally:
        down = run_cluster_tool("down", "--name", name, timeout=180)
    assert down.returncode == 0, down.stderr
    assert not [p for p in procs if p.alive()]
    assert not cdir.exists()
    left = realnodes.host_traces(name, cdir)
    assert left.empty(), left
    assert not [p for p in _proc_cmdlines() if str(cdir) in p], "a process still uses the dir"


def _proc_cmdlines() -> list[str]:
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
    return lines
