"""What a real node of the local cluster is made of, and how every trace of it is removed.

A real node is a kubelet (built from the same pinned Kubernetes module as the control
plane) driving its own containerd, which runs pods with runc from Debian packages and
wires them with the Debian CNI plugins to a bridge private to the cluster. CoreDNS
(built from its own pinned module) answers for the cluster domain on the bridge address.

Everything a node writes lives under the cluster directory: containerd's root, state,
socket and network namespaces, runc's state, the kubelet's root and pod logs, the CNI
configuration and IP allocations. What the kernel keeps outside it is listed in
:func:`host_traces` and removed by :func:`remove_host_traces`: the bridge, mounts,
veth pairs (they vanish with their network namespaces), the CNI result cache entries
and the kubelet's legacy log links.

Pods get an address on a /24 of the bridge and no default route; the bridge has no
uplink and no NAT, so nothing a pod sends can leave the machine. The API server (on
loopback) is relayed to the bridge address, port 443, which is also the `kubernetes`
Service's ClusterIP: pods use the in-cluster configuration as in any cluster. This module builds
configuration and cleans up; starting and stopping processes is the cluster tool's job.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

NODE_PREFIX = "real-node-"
# kwok manages only nodes annotated kwok.x-k8s.io/node=fake; this label lets tests and
# users pin pods to real nodes.
NODE_LABEL = "mpi-operator.dev/real-node"
CLUSTER_DOMAIN = "cluster.local"
# Built by hack/images (busybox's sleep as the sandbox's init); pods never pull.
PAUSE_IMAGE = "localhost/pause:1"
CNI_BIN_DIR = Path("/usr/lib/cni")
RUNC = Path("/usr/sbin/runc")
CONTAINERD = Path("/usr/bin/containerd")
CTR = Path("/usr/bin/ctr")
CRI_NAMESPACE = "k8s.io"
# libcni's result cache and the kubelet's legacy log links are outside any configurable
# root; entries of this cluster are recognised by its network name and log directory.
CNI_CACHE_DIR = Path("/var/lib/cni/results")
LEGACY_LOG_DIR = Path("/var/log/containers")
CGROUP_ROOT = Path("/sys/fs/cgroup")
# Directories containerd, libcni and the kubelet create on the host; removed when empty
# (other clusters may be using them), deepest first.
SHARED_HOST_DIRS = (
    Path("/run/containerd/s"),
    Path("/run/containerd"),
    CNI_CACHE_DIR,
    CNI_CACHE_DIR.parent,
    LEGACY_LOG_DIR,
)
# Each cluster gets one /24 of this range, chosen among those no interface uses.
SUBNET_POOL = ipaddress.IPv4Network("10.250.0.0/16")


class RealNodeError(RuntimeError):
    """A real node could not be configured or cleaned up."""


@dataclass(frozen=True)
class Network:
    """The cluster's pod network: a bridge, its /24, and the bridge's own address."""

    bridge: str
    subnet: str

    @property
    def gateway(self) -> str:
        """The bridge's address: where CoreDNS listens and pods find it, and the `kubernetes`
        Service's ClusterIP (the first address of :attr:`service_range`)."""
        return str(next(ipaddress.IPv4Network(self.subnet).hosts()))

    @property
    def service_range(self) -> str:
        """The API server's --service-cluster-ip-range: the first /27 of the subnet, so the
        `kubernetes` Service gets the bridge's address and pods reach it on their own link
        (there is no kube-proxy to translate a ClusterIP elsewhere)."""
        return str(next(ipaddress.IPv4Network(self.subnet).subnets(new_prefix=27)))

    @property
    def first_pod_address(self) -> str:
        """Pods are addressed after the service range, which no pod may use."""
        return str(ipaddress.IPv4Network(self.service_range).broadcast_address + 1)

    @property
    def cni_name(self) -> str:
        return self.bridge


@dataclass(frozen=True)
class NodePaths:
    """Where one node keeps its state, all below the cluster directory."""

    root: Path

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd" / "state"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd" / "config.toml"

    @property
    def socket(self) -> Path:
        # Short: containerd adds ".ttrpc", and a Unix socket path has at most 104 bytes.
        return self.root / "ctr.sock"

    @property
    def runc_root(self) -> Path:
        return self.root / "runc"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet-config.yaml"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    def create(self) -> None:
        for path in (
            self.containerd_root,
            self.containerd_state,
            self.runc_root,
            self.cni_conf_dir,
            self.kubelet_root,
            self.pod_logs,
        ):
            path.mkdir(parents=True, exist_ok=True)


def node_names(count: int) -> list[str]:
    return [f"{NODE_PREFIX}{i}" for i in range(count)]


def node_paths(cluster_dir: Path, node: str) -> NodePaths:
    """The node's directory is named by its index alone: the kubelet binds Unix sockets
    deep below its root (:data:`KUBELET_DEEPEST_SOCKET`), and every byte counts."""
    return NodePaths(cluster_dir / "nodes" / node.removeprefix(NODE_PREFIX))


def bridge_name(cluster: str) -> str:
    """A name unique to the cluster that fits IFNAMSIZ (15 characters)."""
    return "mpi" + hashlib.sha256(cluster.encode()).hexdigest()[:10]


def ipam_dir(cluster_dir: Path) -> Path:
    """host-local's allocations, shared by the cluster's nodes so addresses never repeat."""
    return cluster_dir / "cni-ipam"


# --- configuration -----------------------------------------------------------


def cni_conflist(network: Network, cluster_dir: Path) -> dict[str, Any]:
    """The bridge network: no gateway role (the plugin would turn on IP forwarding), no
    masquerading and no routes, so a pod reaches only the bridge and its peers."""
    return {
        "cniVersion": "1.0.0",
        "name": network.cni_name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": network.bridge,
                "isGateway": False,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [
                        [
                            {
                                "subnet": network.subnet,
                                "gateway": network.gateway,
                                "rangeStart": network.first_pod_address,
                            }
                        ]
                    ],
                    "routes": [],
                    "dataDir": str(ipam_dir(cluster_dir)),
                },
            },
            {"type": "loopback"},
        ],
    }


def _toml_string(value: str) -> str:
    return json.dumps(value)


def containerd_config(paths: NodePaths) -> str:
    """containerd 1.6 with the CRI settings this kind of machine needs (docs/local-cluster.md).

    restrict_oom_score_adj: without CAP_SYS_RESOURCE runc cannot lower a container's
    oom_score_adj and fails with "can't get final child's PID from pipe: EOF".
    """
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    q = _toml_string
    return "\n".join(
        [
            "version = 2",
            f"root = {q(str(paths.containerd_root))}",
            f"state = {q(str(paths.containerd_state))}",
            # The opt plugin would create /opt/containerd; the others probe host features.
            "disabled_plugins = ["
            + ", ".join(
                q(p)
                for p in (
                    "io.containerd.internal.v1.opt",
                    "io.containerd.snapshotter.v1.aufs",
                    "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.tracing.processor.v1.otlp",
                    "io.containerd.internal.v1.tracing",
                )
            )
            + "]",
            "[grpc]",
            f"  address = {q(str(paths.socket))}",
            "[ttrpc]",
            '  address = ""',
            "[debug]",
            '  address = ""',
            "[metrics]",
            '  address = ""',
            f"[{cri}]",
            f"  sandbox_image = {q(PAUSE_IMAGE)}",
            "  restrict_oom_score_adj = true",
            "  netns_mounts_under_state_dir = true",
            "  enable_selinux = false",
            '  stream_server_address = "127.0.0.1"',
            '  stream_server_port = "0"',
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            f"[{cri}.containerd.runtimes.runc]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{cri}.containerd.runtimes.runc.options]",
            f"  BinaryName = {q(str(RUNC))}",
            f"  Root = {q(str(paths.runc_root))}",
            "  SystemdCgroup = false",
            f"[{cri}.cni]",
            f"  bin_dir = {q(str(CNI_BIN_DIR))}",
            f"  conf_dir = {q(str(paths.cni_conf_dir))}",
            "  max_conf_num = 1",
            "",
        ]
    )


def kubelet_config(
    paths: NodePaths, network: Network, port: int, healthz_port: int, client_ca: Path
) -> dict[str, Any]:
    """A kubelet the API server reaches with its client certificate on the bridge address,
    the node's InternalIP (a kubelet refuses a loopback node IP and then reports no
    address at all)."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": network.gateway,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(client_ca)},
        },
        # Only holders of a certificate from the cluster's CA get past authentication.
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": f"unix://{paths.socket}",
        "podLogsDir": str(paths.pod_logs),
        # This machine: cgroup v1 beside an empty v2 mount, no systemd, a shared host.
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        "failCgroupV1": False,
        "failSwapOn": False,
        "evictionHard": {},
        # Imported images cannot be pulled again: never collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # No iptables chains on a machine other people use.
        "makeIPTablesUtilChains": False,
        "clusterDNS": [network.gateway],
        "clusterDomain": CLUSTER_DOMAIN,
        # No upstream resolver: pods resolve cluster names only.
        "resolvConf": "",
        "serializeImagePulls": False,
        "maxPods": 110,
    }


def corefile(network: Network, kubeconfig: str, ready_port: int) -> str:
    """Cluster names only: other names get REFUSED, nothing is forwarded."""
    return (
        f"{CLUSTER_DOMAIN}:53 in-addr.arpa:53 ip6.arpa:53 {{\n"
        f"    bind {network.gateway}\n"
        "    errors\n"
        f"    ready 127.0.0.1:{ready_port}\n"
        f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
        f"        kubeconfig {kubeconfig}\n"
        "        ttl 5\n"
        "    }\n"
        "}\n"
    )


MAX_SOCKET_PATH = 104 - len(".ttrpc")
# Linux's limit on a Unix socket path (sun_path holds 108 bytes with the final NUL), and the
# deepest socket the kubelet binds below its root (pod-resources/ gets a 10-digit temporary
# name first, 3 bytes shorter).
MAX_UNIX_SOCKET_PATH = 107
KUBELET_DEEPEST_SOCKET = "device-plugins/kubelet.sock"


def write_node_files(
    paths: NodePaths,
    network: Network,
    cluster_dir: Path,
    port: int,
    healthz_port: int,
    client_ca: Path,
) -> None:
    kubelet_socket = paths.kubelet_root / KUBELET_DEEPEST_SOCKET
    for owner, socket, limit in (
        ("containerd", paths.socket, MAX_SOCKET_PATH),
        ("the kubelet", kubelet_socket, MAX_UNIX_SOCKET_PATH),
    ):
        if len(str(socket)) > limit:
            raise RealNodeError(
                f"{owner}'s socket path {socket} is longer than {limit} "
                "bytes: use a shorter cluster name or MPI_OPERATOR_CACHE"
            )
    paths.create()
    paths.containerd_config.write_text(containerd_config(paths))
    (paths.cni_conf_dir / "10-bridge.conflist").write_text(
        json.dumps(cni_conflist(network, cluster_dir), indent=2)
    )
    paths.kubelet_config.write_text(
        yaml.safe_dump(kubelet_config(paths, network, port, healthz_port, client_ca))
    )


# --- the network -------------------------------------------------------------


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and res.returncode != 0:
        raise RealNodeError(f"ip {' '.join(args)} failed: {res.stderr.strip()}")
    return res


def _subnets_in_use() -> set[ipaddress.IPv4Network]:
    out = _ip("-j", "-4", "addr", "show").stdout
    used: set[ipaddress.IPv4Network] = set()
    for link in json.loads(out or "[]"):
        for addr in link.get("addr_info", []):
            used.add(ipaddress.IPv4Interface(f"{addr['local']}/{addr['prefixlen']}").network)
    return used


@contextlib.contextmanager
def _host_lock(lock_file: Path) -> Iterator[None]:
    """Serialises subnet choice between clusters started at the same time."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def create_network(cluster: str, lock_file: Path) -> Network:
    """Creates the cluster's bridge with its address on a /24 no interface uses yet.

    The bridge exists before any pod so that CoreDNS can listen on its address.
    """
    bridge = bridge_name(cluster)
    with _host_lock(lock_file):
        delete_bridge(bridge)
        used = _subnets_in_use()
        for subnet in SUBNET_POOL.subnets(new_prefix=24):
            if not any(subnet.overlaps(u) for u in used):
                break
        else:
            raise RealNodeError(f"no free /24 left in {SUBNET_POOL}")
        network = Network(bridge, str(subnet))
        _ip("link", "add", "name", bridge, "type", "bridge")
        _ip("addr", "add", f"{network.gateway}/{subnet.prefixlen}", "dev", bridge)
        _ip("link", "set", bridge, "up")
    return network


def delete_bridge(bridge: str) -> bool:
    """Deletes the bridge if it exists; its veths go with their network namespaces."""
    if _ip("link", "show", "dev", bridge, check=False).returncode != 0:
        return False
    _ip("link", "delete", "dev", bridge)
    return True


# --- containers --------------------------------------------------------------


def ctr(paths: NodePaths, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [str(CTR), f"--address={paths.socket}", f"--namespace={CRI_NAMESPACE}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if res.returncode != 0:
        raise RealNodeError(f"ctr {' '.join(args)} failed: {res.stderr.strip()}")
    return res


def containerd_ready(paths: NodePaths) -> bool:
    try:
        ctr(paths, "version", timeout=10)
    except (RealNodeError, subprocess.TimeoutExpired):
        return False
    return True


def import_images(paths: NodePaths, tarballs: Sequence[Path]) -> None:
    """Loads OCI image tarballs into the node's containerd, where the CRI finds them."""
    for tarball in tarballs:
        ctr(paths, "images", "import", str(tarball), timeout=600)


def kill_containers(paths: NodePaths) -> list[str]:
    """Kills and deletes every task of the node's containerd (which must be running).

    Deleting a task unmounts its root filesystem and ends its shim; the sandbox network
    namespaces are left to :func:`remove_host_traces`.
    """
    tasks = ctr(paths, "tasks", "list", "--quiet").stdout.split()
    for task in tasks:
        with contextlib.suppress(RealNodeError):
            ctr(paths, "tasks", "kill", "--all", "--signal=SIGKILL", task)
    for task in tasks:
        with contextlib.suppress(RealNodeError):
            ctr(paths, "tasks", "delete", "--force", task)
    return tasks


# --- cleanup -----------------------------------------------------------------


def mounts_under(root: Path) -> list[Path]:
    """Mount points at or below ``root``, deepest first, from this mount namespace."""
    prefix = str(root.resolve())
    found: list[Path] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = _unescape(line.split()[4])
        if point == prefix or point.startswith(prefix + "/"):
            found.append(Path(point))
    return sorted(set(found), key=lambda p: (len(p.parts), str(p)), reverse=True)


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal.
    return (
        field.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
    )


def unmount_all(root: Path) -> list[Path]:
    """Unmounts everything below ``root`` (kubelet volumes, shm, network namespaces,
    overlay root filesystems, the kubelet's shared bind mount of its root)."""
    unmounted: list[Path] = []
    for _ in range(5):
        points = mounts_under(root)
        if not points:
            return unmounted
        for point in points:
            res = subprocess.run(
                ["umount", str(point)], capture_output=True, text=True, timeout=30, check=False
            )
            if res.returncode != 0:
                # Busy: detach now; the kernel frees it when the last user goes.
                subprocess.run(
                    ["umount", "--lazy", str(point)],
                    capture_output=True,
                    timeout=30,
                    check=False,
                )
            unmounted.append(point)
    left = mounts_under(root)
    if left:
        raise RealNodeError(f"could not unmount {', '.join(map(str, left))}")
    return unmounted


@dataclass
class HostTraces:
    """What a cluster's real nodes left outside its directory (plus mounts inside it)."""

    mounts: list[Path]
    bridge: bool
    cgroups: list[Path]
    cni_cache: list[Path]
    log_links: list[Path]

    def empty(self) -> bool:
        return not (self.mounts or self.bridge or self.cgroups or self.cni_cache or self.log_links)


def host_traces(cluster: str, cluster_dir: Path) -> HostTraces:
    bridge = bridge_name(cluster)
    ids = _container_ids(cluster_dir)
    return HostTraces(
        mounts=mounts_under(cluster_dir) if cluster_dir.exists() else [],
        bridge=_ip("link", "show", "dev", bridge, check=False).returncode == 0,
        cgroups=_cgroups(ids),
        cni_cache=_cni_cache_entries(ids),
        log_links=_legacy_log_links(cluster_dir),
    )


def _container_ids(cluster_dir: Path) -> set[str]:
    """Containers and pod sandboxes the nodes' containerds still hold, read from their
    state on disk so that this works even when a containerd is gone."""
    ids: set[str] = set()
    for kind in ("containers", "sandboxes"):
        pattern = f"nodes/*/containerd/root/io.containerd.grpc.v1.cri/{kind}/*"
        ids.update(entry.name for entry in cluster_dir.glob(pattern))
    return ids


def _cgroups(ids: set[str]) -> list[Path]:
    """Cgroups runc left for the given containers. With cgroupsPerQOS off the kubelet
    names no parent, so every containerd puts its containers in /k8s.io/<id>."""
    found = [
        path
        for container in ids
        for path in CGROUP_ROOT.glob(f"*/{CRI_NAMESPACE}/{container}")
        if path.is_dir()
    ]
    return sorted(found)


def _cni_cache_entries(ids: set[str]) -> list[Path]:
    """libcni's cached results, named <network>-<sandbox id>-<interface>."""
    if not ids or not CNI_CACHE_DIR.is_dir():
        return []
    return sorted(
        entry for entry in CNI_CACHE_DIR.iterdir() if any(f"-{i}-" in entry.name for i in ids)
    )


def _legacy_log_links(cluster_dir: Path) -> list[Path]:
    if not LEGACY_LOG_DIR.is_dir():
        return []
    prefix = str(cluster_dir.resolve()) + "/"
    links = []
    for entry in LEGACY_LOG_DIR.iterdir():
        with contextlib.suppress(OSError):
            if entry.is_symlink() and os.readlink(entry).startswith(prefix):
                links.append(entry)
    return sorted(links)


def remove_host_traces(cluster: str, cluster_dir: Path) -> None:
    """Removes every trace of the cluster's real nodes; the processes must be stopped.

    Unmounting a sandbox's network namespace frees it and with it the pod's veth pair.
    """
    traces = host_traces(cluster, cluster_dir)
    if cluster_dir.exists():
        unmount_all(cluster_dir)
    delete_bridge(bridge_name(cluster))
    for path in [*traces.cni_cache, *traces.log_links]:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    for cgroup in traces.cgroups:
        # A cgroup without processes is removed by rmdir, control files and all.
        with contextlib.suppress(FileNotFoundError):
            cgroup.rmdir()
    for directory in [*CGROUP_ROOT.glob(f"*/{CRI_NAMESPACE}"), *SHARED_HOST_DIRS]:
        with contextlib.suppress(OSError):
            directory.rmdir()
