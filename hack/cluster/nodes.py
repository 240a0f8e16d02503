"""A cluster's nodes: kwok's fake ones, and real ones (a kubelet and a containerd each) started
and stopped here from what realnodes.py makes them of."""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import json
import socket
import subprocess
import sys
import urllib.parse
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from hack.cluster import realnodes
from hack.cluster.images import IMAGES_TOOL
from hack.cluster.kube import Cluster, http_ok, wait_for
from hack.cluster.kwok import KWOK_NODE_ANNOTATION, pki_dir
from hack.cluster.processes import free_port, stop_processes
from hack.cluster.state import HERE, ClusterError, Proc, cache_root, cluster_dir, log

# A directory of image tarballs to import instead of what IMAGES_TOOL builds.
IMAGES_DIR_ENV = "MPI_OPERATOR_IMAGES_DIR"
NODE_PREFIX = "kwok-node-"
DEFAULT_NODES = 2
DEFAULT_NODE_CPU = "8"
DEFAULT_NODE_MEMORY = "32Gi"
DEFAULT_NODE_GPU = 0
DEFAULT_NODE_PODS = "110"


FAKE_NODE_DISK = "1Ti"


def node_manifest(name: str, cpu: str, memory: str, gpu: int, pods: str) -> dict[str, Any]:
    # A kubelet reports its disk as well; a pod asking for some (training-operator's launcher
    # does) is unschedulable on a node without it.
    res: dict[str, str] = {
        "cpu": cpu,
        "memory": memory,
        "pods": pods,
        "ephemeral-storage": FAKE_NODE_DISK,
    }
    if gpu:
        res["nvidia.com/gpu"] = str(gpu)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        # No taints and no addresses: kwok fills InternalIP 127.0.0.1.
        "status": {"allocatable": dict(res), "capacity": dict(res)},
    }


def start_fake_nodes(cluster: Cluster, count: int, cpu: str, memory: str, gpu: int) -> None:
    """``count`` kwok nodes of that size, named kwok-node-<i>, once they are Ready."""
    names = [f"{NODE_PREFIX}{i}" for i in range(count)]
    create_nodes(cluster, (node_manifest(n, cpu, memory, gpu, DEFAULT_NODE_PODS) for n in names))
    wait_nodes_ready(cluster, names)


def create_nodes(cluster: Cluster, manifests: Iterable[dict[str, Any]]) -> None:
    items = list(manifests)
    if not items:
        return
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    cluster.kubectl("create", "-f", "-", stdin=body)


def wait_nodes_ready(cluster: Cluster, names: Sequence[str], timeout: float = 60) -> None:
    if not names:
        return
    res = cluster.kubectl(
        "wait",
        "--for=condition=Ready",
        f"--timeout={int(timeout)}s",
        *[f"node/{n}" for n in names],
        timeout=timeout + 10,
        check=False,
    )
    if res.returncode != 0:
        raise ClusterError(f"nodes not Ready: {res.stderr.strip()}")


# --- real nodes -------------------------------------------------------------


def create_pod_network(cluster: Cluster, count: int) -> realnodes.Network:
    """The real nodes' bridge, made before the control plane: the API server's certificate
    and Service range name its address."""
    needed = (realnodes.CONTAINERD, realnodes.CTR, realnodes.RUNC, realnodes.CNI_BIN_DIR / "bridge")
    missing = [p for p in needed if not p.exists()]
    if missing:
        raise ClusterError(
            f"real nodes need {', '.join(map(str, missing))}: "
            "apt-get install containerd runc containernetworking-plugins"
        )
    network = realnodes.create_network(cluster.info.name, cache_root() / "real-nodes.lock")
    cluster.info.real_nodes = count
    cluster.info.network = {"bridge": network.bridge, "subnet": network.subnet}
    cluster.info.save()
    log(f"real nodes: bridge {network.bridge} on {network.subnet}, DNS at {network.gateway}")
    return network


# Where pods find the API server: the `kubernetes` Service's port, on its ClusterIP.
APISERVER_SERVICE_PORT = 443


def start_apiserver_relay(cluster: Cluster, network: realnodes.Network) -> None:
    """Relays the bridge address's port 443 to the API server on loopback: in-cluster clients
    (the operator's Deployment) connect to the `kubernetes` Service's ClusterIP and port as in
    any cluster; no kube-proxy, NAT or forwarding is involved."""
    kubeconfig = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    server = urllib.parse.urlsplit(kubeconfig["clusters"][0]["cluster"]["server"])
    listen = f"{network.gateway}:{APISERVER_SERVICE_PORT}"
    cluster.spawn(
        "apiserver-relay", [sys.executable, "-I", str(HERE / "relay.py"), listen, server.netloc]
    )

    def accepting() -> bool:
        with (
            contextlib.suppress(OSError),
            socket.create_connection((network.gateway, APISERVER_SERVICE_PORT), timeout=2),
        ):
            return True
        return False

    wait_for(
        "the API server relay",
        accepting,
        timeout=30,
        on_timeout=lambda: cluster.log_tail("apiserver-relay"),
    )


def start_real_nodes(
    cluster: Cluster, network: realnodes.Network, count: int, images: Sequence[Path]
) -> list[str]:
    """The API server relay and CoreDNS on the bridge address, then per node a containerd
    (images imported) and a kubelet; waits until CoreDNS is ready and the nodes are Ready."""
    start_apiserver_relay(cluster, network)
    ready_port = free_port()
    corefile = cluster.dir / "Corefile"
    corefile.write_text(realnodes.corefile(network, cluster.kubeconfig, ready_port))
    cluster.spawn("coredns", [str(cluster.bins / "coredns"), "-conf", str(corefile)])

    names = realnodes.node_names(count)
    ca = pki_dir(cluster) / "ca.crt"
    nodes = [realnodes.node_paths(cluster.dir, node) for node in names]
    for node, paths in zip(names, nodes, strict=True):
        realnodes.write_node_files(
            paths, network, cluster.dir, port=free_port(), healthz_port=free_port(), client_ca=ca
        )
        cluster.spawn(
            f"containerd-{node}",
            [str(realnodes.CONTAINERD), f"--config={paths.containerd_config}"],
        )
    for node, paths in zip(names, nodes, strict=True):
        wait_for(
            f"containerd of {node}",
            functools.partial(realnodes.containerd_ready, paths),
            timeout=30,
            on_timeout=functools.partial(cluster.log_tail, f"containerd-{node}"),
        )
    # Reading and unpacking the tarballs dominates a start; the nodes import side by side.
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        list(pool.map(lambda paths: realnodes.import_images(paths, images), nodes))
    for node, paths in zip(names, nodes, strict=True):
        cluster.spawn(
            f"kubelet-{node}",
            [
                str(cluster.bins / "kubelet"),
                f"--config={paths.kubelet_config}",
                f"--kubeconfig={cluster.kubeconfig}",
                f"--root-dir={paths.kubelet_root}",
                f"--cert-dir={paths.kubelet_root / 'pki'}",
                f"--hostname-override={node}",
                f"--node-ip={network.gateway}",
                f"--node-labels={realnodes.NODE_LABEL}=true",
                "--v=1",
            ],
        )
    wait_for(
        "CoreDNS /ready",
        lambda: http_ok(f"http://127.0.0.1:{ready_port}/ready"),
        timeout=60,
        on_timeout=lambda: cluster.log_tail("coredns"),
    )
    wait_for(
        "real nodes to register",
        lambda: all(cluster.kubectl("get", "node", n, check=False).returncode == 0 for n in names),
        timeout=60,
        on_timeout=lambda: "\n".join(cluster.log_tail(f"kubelet-{n}") for n in names),
    )
    wait_nodes_ready(cluster, names, timeout=90)
    return names


def image_tarballs(directory: Path | None) -> list[Path]:
    """The OCI image tarballs real nodes import: every ``*.tar`` of ``directory`` if given,
    else what hack/images/build.py prints (it builds what is missing, cached by key)."""
    if directory is not None:
        tarballs = sorted(directory.glob("*.tar"))
    elif IMAGES_TOOL.is_file():
        log("building or locating images with hack/images (a cold build takes minutes)")
        res = subprocess.run(
            [sys.executable, str(IMAGES_TOOL)],
            stdout=subprocess.PIPE,
            stderr=sys.stderr,
            text=True,
            timeout=3600,
            check=False,
        )
        if res.returncode != 0:
            raise ClusterError(f"{IMAGES_TOOL} failed with exit code {res.returncode}")
        tarballs = [Path(line) for line in res.stdout.split() if line.endswith(".tar")]
    else:
        tarballs = []
    if not tarballs:
        raise ClusterError(
            f"real nodes need OCI image tarballs ({realnodes.PAUSE_IMAGE} at least): "
            f"none in {directory or IMAGES_TOOL}"
        )
    return tarballs


def stop_real_node_pods(name: str, procs: Sequence[Proc]) -> list[Proc]:
    """Kubelets first (they would restart containers), then every container, while each
    node's containerd still runs; the rest stops with the other processes."""
    stopped = stop_processes([p for p in procs if p.name.startswith("kubelet-")])
    for containerd in procs:
        if not (containerd.name.startswith("containerd-") and containerd.alive()):
            continue
        node = containerd.name.removeprefix("containerd-")
        paths = realnodes.node_paths(cluster_dir(name), node)
        if paths.socket.exists():
            with contextlib.suppress(realnodes.RealNodeError, subprocess.TimeoutExpired):
                realnodes.kill_containers(paths)
    return stopped
