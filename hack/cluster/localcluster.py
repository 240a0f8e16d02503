#!/usr/bin/env python3
"""Local Kubernetes cluster for development and end-to-end tests.

A real control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler) started by kwokctl's binary runtime from binaries that
build.sh compiled from pinned Go modules, fake nodes and pods simulated by
kwok, and optionally a gang scheduler: Volcano, or the scheduler-plugins
Coscheduling scheduler or Koordinator's koord-scheduler running as a second
scheduler. Everything listens on
127.0.0.1. CRDs and upstream default configs are read from the pinned modules
in the Go module cache, never copied into the repository.

    localcluster.py up [--scheduler default|volcano|scheduler-plugins|koordinator] [--name N]
                       [--nodes 2] [--node-cpu 8] [--node-memory 32Gi] [--node-gpu 0]
                       [--real-nodes 0] [--images-dir DIR]
                       [--kueue [--kueue-pods-ready-timeout SECONDS]] [--audit-policy FILE]
    localcluster.py down [--name N | --scheduler S | --all]
    localcluster.py status [--name N]
    localcluster.py add-node --name N NODE [--cpu ..] [--memory ..] [--gpu ..]

`--real-nodes N` adds N real nodes beside the fake ones: a kubelet with its own
containerd each, pods on a bridge private to the cluster, and CoreDNS for the
cluster domain (see realnodes.py). `--kueue` adds Kueue's controller manager,
admitting MPIJobs that name a LocalQueue (see kueue.py); with a pods-ready timeout it
evicts a job whose pods are not all running that long after admission.
`--audit-policy FILE` has the API server log what the policy asks for to
`audit_log(NAME)`.

`up` prints `export KUBECONFIG=<path>` as its last line. Every process a
cluster runs is recorded with its pid and kernel start time, so `down` stops
exactly those processes and never a recycled pid.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import koordinator
import kueue
import realnodes
import yaml

HERE = Path(__file__).resolve().parent
# Kueue admits MPIJobs only when their CRD is there before it starts.
MPIJOB_CRD = HERE.parent.parent / "crds" / "kubeflow.org_mpijobs.yaml"
IMAGES_TOOL = HERE.parent / "images" / "build.py"
# A directory of image tarballs to import instead of what IMAGES_TOOL builds.
IMAGES_DIR_ENV = "MPI_OPERATOR_IMAGES_DIR"
SCHEDULERS = ("default", "volcano", "scheduler-plugins", "koordinator")
# Scheduler names pods use to opt into a gang scheduler.
SCHEDULER_NAMES = {
    "default": "default-scheduler",
    "volcano": "volcano",
    "scheduler-plugins": "scheduler-plugins-scheduler",
    "koordinator": koordinator.SCHEDULER_NAME,
}
NODE_PREFIX = "kwok-node-"
DEFAULT_NODES = 2
DEFAULT_NODE_CPU = "8"
DEFAULT_NODE_MEMORY = "32Gi"
DEFAULT_NODE_GPU = 0
DEFAULT_NODE_PODS = "110"


class ClusterError(RuntimeError):
    """Raised when a cluster cannot be built, started, or found."""


def log(msg: str) -> None:
    print(f"[localcluster] {msg}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    if env := os.environ.get("MPI_OPERATOR_CACHE"):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "mpi-operator"


def clusters_root() -> Path:
    return cache_root() / "clusters"


def cluster_dir(name: str) -> Path:
    return clusters_root() / name


def default_name(scheduler: str) -> str:
    return f"mpi-{scheduler}"


# --- binaries and pinned modules -------------------------------------------


def bin_dir(build: bool = True, real_nodes: bool = False) -> Path:
    """The built binaries; with ``real_nodes`` also the kubelet and CoreDNS."""
    script = HERE / "build.sh"
    extra = ["--real-nodes"] if real_nodes else []
    out = subprocess.run(
        ["bash", str(script), "--print", *extra], capture_output=True, text=True, timeout=60
    )
    if out.returncode not in (0, 3):
        raise ClusterError(f"build.sh --print failed: {out.stderr.strip()}")
    path = Path(out.stdout.strip())
    if out.returncode == 0 and (path / ".complete").is_file():
        return path
    if not build:
        raise ClusterError(f"binaries are not built in {path}; run `make cluster-build`")
    log(f"binaries missing in {path}; building (a cold build takes 20-40 minutes)")
    # Build output goes to stderr so that `up` keeps the export line last on stdout.
    subprocess.run(["bash", str(script), *extra], check=True, stdout=sys.stderr)
    return path


def tool_dir(script_name: str, what: str, cold_cost: str, build: bool) -> Path:
    """The cache directory a build script fills (a Go tool and its manifests), built first
    if missing."""
    script = HERE / script_name
    path = Path(subprocess.check_output(["bash", str(script), "--print"], text=True).strip())
    if (path / ".complete").is_file():
        return path
    if not build:
        raise ClusterError(f"{what} is not built in {path}; run `bash {script}`")
    log(f"{what} missing in {path}; building (a cold build takes {cold_cost})")
    subprocess.run(["bash", str(script)], check=True, stdout=sys.stderr)
    return path


def kueue_dir(build: bool = True) -> Path:
    """Kueue's binary and manifests (build-kueue.sh)."""
    return tool_dir("build-kueue.sh", "Kueue", "about 5 minutes", build)


def koordinator_dir(build: bool = True) -> Path:
    """koord-scheduler and Koordinator's CRDs (build-koordinator.sh)."""
    return tool_dir("build-koordinator.sh", "koord-scheduler", "about 7 minutes", build)


def module_dirs(bins: Path) -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for line in (bins.parent / "modules.env").read_text().splitlines():
        key, _, value = line.partition("=")
        if key and value:
            mods[key] = Path(value)
    return mods


def versions(bins: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (bins.parent / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key] = value
    return out


# --- processes --------------------------------------------------------------


@dataclass
class Proc:
    """A process the cluster owns, identified by pid plus kernel start time."""

    name: str
    pid: int
    start_time: int

    def alive(self) -> bool:
        return proc_start_time(self.pid) == self.start_time


def proc_start_time(pid: int) -> int | None:
    """Kernel start time of a live (non-zombie) process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def record(name: str, pid: int) -> Proc | None:
    start = proc_start_time(pid)
    return None if start is None else Proc(name, pid, start)


def reap(pid: int) -> None:
    # Processes started by this interpreter must be reaped or they linger as
    # zombies; for any other pid waitpid simply fails.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


# Clients before servers: stopping etcd and the API server last keeps the
# other components from spending their shutdown retrying a dead API server.
STOP_ORDER = ("kube-apiserver", "etcd")


def stop_cluster_processes(procs: Sequence[Proc]) -> list[Proc]:
    stopped = stop_processes([p for p in procs if p.name not in STOP_ORDER])
    for name in STOP_ORDER:
        # A throwaway API server has nothing worth a long graceful shutdown.
        stopped += stop_processes([p for p in procs if p.name == name], grace=5.0)
    return stopped


def stop_processes(
    procs: Sequence[Proc], grace: float = 15.0, sig: int = signal.SIGTERM
) -> list[Proc]:
    """`sig` (SIGTERM), then SIGKILL after `grace` seconds, exactly the given processes."""
    live = [p for p in procs if p.alive()]
    for p in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, sig)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        for p in live:
            reap(p.pid)
        if not any(p.alive() for p in live):
            break
        time.sleep(0.1)
    for p in live:
        if p.alive():
            log(f"{p.name} (pid {p.pid}) ignored SIGTERM; sending SIGKILL")
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(p.alive() for p in live):
        for p in live:
            reap(p.pid)
        time.sleep(0.05)
    left = [p for p in live if p.alive()]
    if left:
        raise ClusterError(f"processes still running after SIGKILL: {left}")
    # An exited process stays a zombie until its parent (init, for daemons
    # kwokctl started) reaps it; give that a moment so `ps` right after
    # `down` is clean. Zombies hold no ports or memory, so this is best effort.
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and any(Path(f"/proc/{p.pid}").exists() for p in live):
        time.sleep(0.05)
    return live


def listening_addresses(pid: int) -> list[tuple[str, int]]:
    """TCP (ip, port) pairs a process listens on, read from /proc."""
    inodes: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    found: list[tuple[str, int]] = []
    for table, v6 in ((f"/proc/{pid}/net/tcp", False), (f"/proc/{pid}/net/tcp6", True)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            # Column 3 is the socket state; 0A is LISTEN.
            if len(cols) < 10 or cols[3] != "0A" or cols[9] not in inodes:
                continue
            hex_ip, hex_port = cols[1].split(":")
            found.append((_proc_ip(hex_ip, v6), int(hex_port, 16)))
    return found


def _proc_ip(hex_ip: str, v6: bool) -> str:
    raw = bytes.fromhex(hex_ip)
    # /proc prints each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, words)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- cluster state ----------------------------------------------------------


@dataclass
class ClusterInfo:
    name: str
    scheduler: str
    kubeconfig: str
    processes: list[Proc]
    started_at: float
    up_seconds: float = 0.0
    # Real nodes: how many, and the pod network they share (bridge, subnet).
    real_nodes: int = 0
    network: dict[str, str] | None = None
    # Kueue's controller manager runs beside the scheduler (admission, not scheduling).
    kueue: bool = False
    # Kueue's waitForPodsReady timeout in seconds; 0: off.
    kueue_pods_ready_timeout: int = 0
    # The API server's audit policy, by its content's SHA-256 (kwokctl copies the file, so
    # its path says nothing); empty: no audit log.
    audit_policy: str = ""

    @classmethod
    def load(cls, name: str) -> ClusterInfo | None:
        path = cluster_dir(name) / "cluster.json"
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        raw["processes"] = [Proc(**p) for p in raw.get("processes", [])]
        return cls(**raw)

    def save(self) -> None:
        path = cluster_dir(self.name) / "cluster.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)


class Cluster:
    """A cluster being brought up; knows how to run kubectl against it."""

    def __init__(self, info: ClusterInfo, bins: Path) -> None:
        self.info = info
        self.bins = bins
        self.dir = cluster_dir(info.name)

    @property
    def kubeconfig(self) -> str:
        return self.info.kubeconfig

    def kubectl(
        self, *args: str, stdin: str | None = None, timeout: float = 60, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        cmd = [
            str(self.bins / "kubectl"),
            f"--kubeconfig={self.kubeconfig}",
            # Keeps kubectl's discovery cache with the cluster, not in ~/.kube.
            f"--cache-dir={self.dir / 'kube-cache'}",
            *args,
        ]
        res = subprocess.run(
            cmd, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and res.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed: {res.stderr.strip()}")
        return res

    def add_process(self, proc: Proc) -> None:
        self.info.processes.append(proc)
        self.info.save()

    def spawn(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> Proc:
        logs = self.dir / "logs"
        logs.mkdir(exist_ok=True)
        with (logs / f"{name}.log").open("ab") as out:
            child = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        proc = record(name, child.pid)
        if proc is None:
            raise ClusterError(f"{name} exited at once; see {logs / (name + '.log')}")
        self.add_process(proc)
        return proc

    def wait_healthy(self, name: str, url: str, timeout: float = 60) -> None:
        """Waits until process ``name`` answers 200 at ``url``; on timeout the error holds
        the tail of its log."""
        check = https_ok if url.startswith("https:") else http_ok
        wait_for(
            f"{name} {url}", lambda: check(url), timeout, on_timeout=lambda: self.log_tail(name)
        )

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.dir / "logs" / f"{name}.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def wait_for(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    interval: float = 0.25,
    on_timeout: Callable[[], str] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(ClusterError, OSError, subprocess.TimeoutExpired):
            if check():
                return
        if time.monotonic() >= deadline:
            detail = on_timeout() if on_timeout else ""
            raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}\n{detail}")
        time.sleep(interval)


def https_ok(url: str) -> bool:
    # Component health endpoints use self-signed serving certificates.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


# --- configuration ----------------------------------------------------------


def audit_log(name: str) -> Path:
    """The API server's audit log of a cluster brought up with an audit policy."""
    return cluster_dir(name) / "kwok" / "clusters" / name / "logs" / "audit.log"


def audit_policy_digest(policy: Path | None) -> str:
    """What ``ClusterInfo.audit_policy`` records for a policy file (empty for none)."""
    return hashlib.sha256(policy.read_bytes()).hexdigest() if policy else ""


def pki_dir(cluster: Cluster) -> Path:
    """kwokctl's CA and the admin certificate every component uses."""
    return cluster.dir / "kwok" / "clusters" / cluster.info.name / "pki"


def kwok_config(
    bins: Path,
    mods: dict[str, Path],
    vers: dict[str, str],
    pki: Path,
    network: realnodes.Network | None,
    audit_policy: Path | None = None,
) -> str:
    """kwokctl's configuration; ``network`` is the real nodes' pod network, if any."""
    real_nodes = network is not None
    kwok = mods["sigs.k8s.io/kwok"] / "kustomize" / "stage"
    ctl = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "options": {
            "runtime": "binary",
            "bindAddress": "127.0.0.1",
            "kubeVersion": vers["K8S_VERSION"],
            "kubeApiserverBinary": str(bins / "kube-apiserver"),
            "kubeControllerManagerBinary": str(bins / "kube-controller-manager"),
            "kubeSchedulerBinary": str(bins / "kube-scheduler"),
            "kubectlBinary": str(bins / "kubectl"),
            "etcdBinary": str(bins / "etcd"),
            "kwokControllerBinary": str(bins / "kwok"),
            "disableQPSLimits": True,
            # Pods reach the API server at the bridge address (the `kubernetes` Service's).
            **({"kubeApiserverCertSANs": [network.gateway]} if network else {}),
            # The API server then writes what the policy asks for to audit_log(name).
            **({"kubeAuditPolicy": str(audit_policy)} if audit_policy else {}),
        },
        "componentsPatches": [
            # A throwaway cluster does not need durable writes; fsync dominates
            # etcd latency on a shared disk.
            {"name": "etcd", "extraArgs": [{"key": "unsafe-no-fsync", "value": "true"}]},
            # One instance of each needs no election; with it, an API server away for longer
            # than the renew deadline (10 s) makes them exit, and chaos tests restart it.
            {
                "name": "kube-controller-manager",
                "extraArgs": [{"key": "leader-elect", "value": "false"}],
            },
            {"name": "kube-scheduler", "extraArgs": [{"key": "leader-elect", "value": "false"}]},
            *([real_nodes_apiserver_patch(pki, network)] if network else []),
            {
                "name": "kwok-controller",
                "extraArgs": [
                    # Nodes get 127.0.0.1 as InternalIP, so the API server
                    # reaches "kubelets" (logs, exec) only on loopback.
                    {"key": "node-ip", "value": "127.0.0.1"},
                    # Pod IPs are labels nobody serves. They cannot be loopback
                    # (EndpointSlice validation rejects 127.0.0.0/8); a /16
                    # leaves room for more than 254 concurrent pods.
                    {"key": "cidr", "value": "10.244.0.0/16"},
                    # kwokctl's binary runtime makes kwok manage every node; a real
                    # node's status and pods belong to its kubelet.
                    *(KWOK_FAKE_NODES_ONLY if real_nodes else []),
                ],
            },
        ],
    }
    docs = [yaml.safe_dump(ctl, sort_keys=False)]
    # Supplying any Stage replaces all of kwok's defaults, so the stock node
    # stages and the stock pod-ready stage come from the module; the project's
    # stages decide how running pods end and how deleted pods go.
    for rel in (
        "node/fast/node-initialize.yaml",
        "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
        "pod/fast/pod-ready.yaml",
    ):
        docs.append((kwok / rel).read_text())
    docs.append((HERE / "stages.yaml").read_text())
    return "\n---\n".join(d.strip("\n") for d in docs) + "\n"


KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_FAKE_NODES_ONLY = (
    {"key": "manage-all-nodes", "value": "false", "override": True},
    {"key": "manage-nodes-with-annotation-selector", "value": f"{KWOK_NODE_ANNOTATION}=fake"},
)


def real_nodes_apiserver_patch(pki: Path, network: realnodes.Network) -> dict[str, Any]:
    """The API server proves itself to real kubelets (logs, exec) with the admin
    certificate, and dials them at their InternalIP, never by host name. Its Service range
    starts at the bridge address, so the `kubernetes` Service is where pods find it."""
    return {
        "name": "kube-apiserver",
        "extraArgs": [
            {"key": "kubelet-client-certificate", "value": str(pki / "admin.crt")},
            {"key": "kubelet-client-key", "value": str(pki / "admin.key")},
            {"key": "kubelet-preferred-address-types", "value": "InternalIP"},
            {"key": "service-cluster-ip-range", "value": network.service_range},
        ],
    }


def node_manifest(name: str, cpu: str, memory: str, gpu: int, pods: str) -> dict[str, Any]:
    res: dict[str, str] = {"cpu": cpu, "memory": memory, "pods": pods}
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


def apply_crds(cluster: Cluster, paths: Sequence[Path], timeout: float = 60) -> None:
    args = ["apply", "--server-side", "--force-conflicts"]
    for p in paths:
        args += ["-f", str(p)]
    out = cluster.kubectl(*args, "-o", "name", timeout=120).stdout.split()
    crds = [n for n in out if n.startswith("customresourcedefinition")]
    if not crds:
        return
    # Not `kubectl wait --for=condition=Established`: on a brand-new CRD it can fail with a
    # .status.conditions accessor error before the API server has written any condition.
    # Poll what the API server reports instead; no conditions yet just means "not yet".
    seen: list[str] = []

    def established() -> bool:
        listing = json.loads(cluster.kubectl("get", *crds, "-o", "json").stdout)
        seen[:] = not_established(listing)
        return not seen

    wait_for(
        "CRDs Established",
        established,
        timeout,
        on_timeout=lambda: "not Established: " + ", ".join(seen),
    )


def not_established(listing: dict[str, Any]) -> list[str]:
    """Names of the CRDs in a ``kubectl get -o json`` answer (a List, or one object) that
    the API server has not reported Established, whatever part of their status is missing."""
    items = listing.get("items") if listing.get("kind") == "List" else [listing]
    waiting = []
    for crd in items or []:
        conditions = (crd.get("status") or {}).get("conditions") or []
        if not any(
            c.get("type") == "Established" and c.get("status") == "True" for c in conditions
        ):
            waiting.append(str((crd.get("metadata") or {}).get("name", "?")))
    return waiting


# --- gang schedulers --------------------------------------------------------


def start_scheduler_plugins(cluster: Cluster, mods: dict[str, Path]) -> None:
    sp = mods["sigs.k8s.io/scheduler-plugins"]
    apply_crds(cluster, [sp / "config" / "crd" / "bases"])
    # The upstream Coscheduling example config, run as a second scheduler
    # under the name upstream's second-scheduler deployment uses.
    text = (sp / "manifests" / "coscheduling" / "scheduler-config.yaml").read_text()
    for old, new in (
        ("REPLACE_ME_WITH_KUBE_CONFIG_PATH", cluster.kubeconfig),
        ("schedulerName: default-scheduler", "schedulerName: scheduler-plugins-scheduler"),
    ):
        if old not in text:
            raise ClusterError(f"unexpected scheduler-plugins config: {old!r} not found")
        text = text.replace(old, new)
    cfg = cluster.dir / "sp-scheduler-config.yaml"
    cfg.write_text(text)
    sched_port = free_port()
    cluster.spawn(
        "sp-scheduler",
        [
            str(cluster.bins / "sp-scheduler"),
            f"--config={cfg}",
            f"--authentication-kubeconfig={cluster.kubeconfig}",
            f"--authorization-kubeconfig={cluster.kubeconfig}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--bind-address=127.0.0.1",
            f"--secure-port={sched_port}",
            "-v=2",
        ],
    )
    probe_port = free_port()
    cluster.spawn(
        "sp-controller",
        [
            str(cluster.bins / "sp-controller"),
            "--metricsAddr=0",
            f"--probeAddr=127.0.0.1:{probe_port}",
        ],
        env={"KUBECONFIG": cluster.kubeconfig},
    )
    cluster.wait_healthy("sp-scheduler", f"https://127.0.0.1:{sched_port}/readyz")
    cluster.wait_healthy("sp-controller", f"http://127.0.0.1:{probe_port}/readyz")


def start_volcano(cluster: Cluster, mods: dict[str, Path]) -> None:
    vc = mods["volcano.sh/volcano"]
    apply_crds(cluster, [vc / "config" / "crd" / "volcano" / "bases"])
    conf = vc / "installer" / "helm" / "chart" / "volcano" / "config" / "volcano-scheduler.conf"
    common = [f"--kubeconfig={cluster.kubeconfig}", "--leader-elect=false", "-v=2"]
    cluster.spawn(
        "vc-scheduler",
        [
            str(cluster.bins / "vc-scheduler"),
            *common,
            f"--scheduler-conf={conf}",
            # The cache dumper writes into /tmp on a signal; nothing here needs it.
            "--cache-dumper=false",
        ],
    )
    # The queue controller is what opens the `default` queue (the scheduler
    # only creates it); the podgroup controller gives plain volcano pods a group.
    cluster.spawn(
        "vc-controller-manager",
        [
            str(cluster.bins / "vc-controller-manager"),
            *common,
            "--controllers=queue-controller,pg-controller",
        ],
    )

    def default_queue_open() -> bool:
        res = cluster.kubectl(
            "get", "queue", "default", "-o", "jsonpath={.status.state}", check=False
        )
        return res.stdout.strip() == "Open"

    wait_for(
        "Volcano queue `default` to be Open",
        default_queue_open,
        timeout=90,
        on_timeout=lambda: (
            cluster.log_tail("vc-scheduler") + cluster.log_tail("vc-controller-manager")
        ),
    )


def start_koordinator(cluster: Cluster, directory: Path) -> None:
    """koord-scheduler beside kube-scheduler, with Koordinator's gang plugin only (see
    koordinator.py)."""
    apply_crds(cluster, koordinator.crd_paths(directory))
    config = cluster.dir / "koord-scheduler-config.yaml"
    config.write_text(yaml.safe_dump(koordinator.configuration(cluster.kubeconfig)))
    port = free_port()
    cluster.spawn(
        "koord-scheduler",
        koordinator.command(directory / "bin" / "koord-scheduler", config, port),
    )
    cluster.wait_healthy("koord-scheduler", f"http://127.0.0.1:{port}/healthz", timeout=90)


# --- admission ---------------------------------------------------------------


def start_kueue(cluster: Cluster, directory: Path, pods_ready_timeout: int) -> None:
    """Kueue's controller manager on loopback, its CRDs converted and its webhooks served
    there (see kueue.py), with the MPIJob integration on."""
    apply_crds(cluster, [MPIJOB_CRD])
    cluster.kubectl("create", "namespace", kueue.NAMESPACE)
    state = cluster.dir / "kueue"
    # One certificate serves the webhooks and the metrics, whose path Kueue fixes under /etc.
    certs = state / "etc" / kueue.METRICS_CERTS
    ca_pem = kueue.serving_certificate(certs)
    webhook_port, health_port = free_port(), free_port()
    converted = kueue.converted_crds(
        yaml.safe_load((directory / "crd-kustomization.yaml").read_text())
    )
    crds = state / "crds"
    crds.mkdir()
    for source in sorted((directory / "crd").glob("*.yaml")):
        crd = yaml.safe_load(source.read_text())
        if crd["spec"]["names"]["plural"] in converted:
            crd = kueue.with_conversion_webhook(crd, webhook_port, ca_pem)
        (crds / source.name).write_text(yaml.safe_dump(crd))
    apply_crds(cluster, [crds])
    config = state / "config.yaml"
    config.write_text(
        yaml.safe_dump(kueue.configuration(webhook_port, health_port, certs, pods_ready_timeout))
    )
    cluster.spawn(
        "kueue",
        kueue.command(directory / "bin" / "kueue", config, state / "etc"),
        env={"KUBECONFIG": cluster.kubeconfig},
    )
    cluster.wait_healthy("kueue", f"http://127.0.0.1:{health_port}/readyz", timeout=90)
    hooks = kueue.webhook_configurations(
        kueue.load_all(directory / "webhook-manifests.yaml"), webhook_port, ca_pem
    )
    cluster.kubectl(
        "apply", "--server-side", "-f", "-", stdin="\n---\n".join(yaml.safe_dump(h) for h in hooks)
    )


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
            lambda paths=paths: realnodes.containerd_ready(paths),
            timeout=30,
            on_timeout=lambda node=node: cluster.log_tail(f"containerd-{node}"),
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


# --- commands ---------------------------------------------------------------


def kwok_processes(name: str) -> list[Proc]:
    pids = cluster_dir(name) / "kwok" / "clusters" / name / "pids"
    procs = []
    for pidfile in sorted(pids.glob("*.pid")) if pids.is_dir() else []:
        with contextlib.suppress(ValueError, OSError):
            proc = record(pidfile.stem, int(pidfile.read_text().strip()))
            if proc is not None:
                procs.append(proc)
    return procs


def up(
    scheduler: str = "default",
    name: str | None = None,
    nodes: int = DEFAULT_NODES,
    node_cpu: str = DEFAULT_NODE_CPU,
    node_memory: str = DEFAULT_NODE_MEMORY,
    node_gpu: int = DEFAULT_NODE_GPU,
    build: bool = True,
    real_nodes: int = 0,
    images: Path | None = None,
    with_kueue: bool = False,
    kueue_pods_ready_timeout: int = 0,
    audit_policy: Path | None = None,
) -> ClusterInfo:
    if scheduler not in SCHEDULERS:
        raise ClusterError(f"unknown scheduler {scheduler!r}; choose one of {SCHEDULERS}")
    name = name or default_name(scheduler)
    t0 = time.monotonic()
    bins = bin_dir(build=build, real_nodes=real_nodes > 0)
    if images is None and os.environ.get(IMAGES_DIR_ENV):
        images = Path(os.environ[IMAGES_DIR_ENV])
    tarballs = image_tarballs(images) if real_nodes else []
    kueue_home = kueue_dir(build) if with_kueue else None
    koordinator_home = koordinator_dir(build) if scheduler == "koordinator" else None
    mods = module_dirs(bins)
    vers = versions(bins)
    policy_digest = audit_policy_digest(audit_policy)

    existing = ClusterInfo.load(name)
    if existing is not None:
        if (
            existing.scheduler == scheduler
            and existing.real_nodes == real_nodes
            and existing.kueue == with_kueue
            and existing.kueue_pods_ready_timeout == kueue_pods_ready_timeout
            and existing.audit_policy == policy_digest
            and all(p.alive() for p in existing.processes)
        ):
            log(f"cluster {name} is already running")
            return existing
        log(f"replacing stale or different cluster {name}")
        down(name)
    shutil.rmtree(cluster_dir(name), ignore_errors=True)
    cdir = cluster_dir(name)
    cdir.mkdir(parents=True)
    workdir = cdir / "kwok"
    info = ClusterInfo(
        name=name,
        scheduler=scheduler,
        kubeconfig=str(workdir / "clusters" / name / "kubeconfig.yaml"),
        processes=[],
        started_at=time.time(),
        kueue=with_kueue,
        kueue_pods_ready_timeout=kueue_pods_ready_timeout,
        audit_policy=policy_digest,
    )
    info.save()
    cluster = Cluster(info, bins)
    try:
        config = cdir / "kwok.yaml"
        network = create_pod_network(cluster, real_nodes) if real_nodes else None
        config.write_text(kwok_config(bins, mods, vers, pki_dir(cluster), network, audit_policy))
        env = {
            **os.environ,
            "KWOK_WORKDIR": str(workdir),
            # kwokctl looks kubectl up on PATH before it would download one.
            "PATH": f"{bins}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        env.pop("KUBECONFIG", None)
        env["KUBECACHEDIR"] = str(cdir / "kube-cache")
        log(f"starting control plane for {name} ({scheduler})")
        res = subprocess.run(
            [
                str(bins / "kwokctl"),
                f"--config={config}",
                "create",
                "cluster",
                f"--name={name}",
                "--runtime=binary",
                "--kubeconfig=",
                "--wait=90s",
                "--timeout=150s",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        (cdir / "kwokctl-create.log").write_text(res.stdout + res.stderr)
        for proc in kwok_processes(name):
            cluster.add_process(proc)
        if res.returncode != 0:
            raise ClusterError(f"kwokctl create cluster failed:\n{res.stderr[-3000:]}")

        if scheduler == "scheduler-plugins":
            start_scheduler_plugins(cluster, mods)
        elif scheduler == "volcano":
            start_volcano(cluster, mods)
        elif koordinator_home is not None:
            start_koordinator(cluster, koordinator_home)
        if kueue_home is not None:
            start_kueue(cluster, kueue_home, kueue_pods_ready_timeout)

        names = [f"{NODE_PREFIX}{i}" for i in range(nodes)]
        create_nodes(
            cluster,
            (node_manifest(n, node_cpu, node_memory, node_gpu, DEFAULT_NODE_PODS) for n in names),
        )
        wait_nodes_ready(cluster, names)
        if network is not None:
            start_real_nodes(cluster, network, real_nodes, tarballs)
        # Pods are rejected until the service account controller has created
        # the namespace's `default` ServiceAccount.
        wait_for(
            "default ServiceAccount",
            lambda: (
                cluster.kubectl("get", "serviceaccount", "default", check=False).returncode == 0
            ),
            timeout=60,
        )
    except BaseException:
        log(f"bring-up of {name} failed; stopping what was started (logs in {cdir})")
        with contextlib.suppress(Exception):
            stop_all(name, [*cluster.info.processes, *kwok_processes(name)])
        raise
    info.up_seconds = round(time.monotonic() - t0, 1)
    info.save()
    log(f"cluster {name} ({scheduler}) ready in {info.up_seconds}s")
    return info


def down(name: str) -> list[Proc]:
    cdir = cluster_dir(name)
    info = ClusterInfo.load(name)
    procs: dict[tuple[int, int], Proc] = {}
    for p in [*(info.processes if info else []), *kwok_processes(name)]:
        procs[(p.pid, p.start_time)] = p
    stopped = stop_all(name, list(procs.values()))
    for p in stopped:
        log(f"stopped {p.name} (pid {p.pid})")
    shutil.rmtree(cdir, ignore_errors=True)
    return stopped


def stop_all(name: str, procs: Sequence[Proc]) -> list[Proc]:
    """Every process of the cluster, then whatever real nodes left on the host.

    Raises before anything is deleted if a mount below the cluster directory survives,
    so removing the directory never reaches into a mounted file system.
    """
    stopped = stop_real_node_pods(name, procs)
    stopped += stop_cluster_processes([p for p in procs if p not in stopped])
    try:
        realnodes.remove_host_traces(name, cluster_dir(name))
    except realnodes.RealNodeError as exc:
        raise ClusterError(str(exc)) from exc
    return stopped


def add_node(
    name: str,
    node: str,
    cpu: str = DEFAULT_NODE_CPU,
    memory: str = DEFAULT_NODE_MEMORY,
    gpu: int = DEFAULT_NODE_GPU,
) -> None:
    info = ClusterInfo.load(name)
    if info is None:
        raise ClusterError(f"no cluster named {name}")
    cluster = Cluster(info, bin_dir(build=False))
    create_nodes(cluster, [node_manifest(node, cpu, memory, gpu, DEFAULT_NODE_PODS)])
    wait_nodes_ready(cluster, [node])


def status(name: str | None) -> int:
    names = [name] if name else sorted(p.name for p in clusters_root().glob("*") if p.is_dir())
    rc = 0
    for n in names:
        info = ClusterInfo.load(n)
        if info is None:
            print(f"{n}: not running")
            rc = 1
            continue
        live = [p for p in info.processes if p.alive()]
        state = "running" if len(live) == len(info.processes) else "degraded"
        rc = rc if state == "running" else 1
        print(f"{n}: {state} scheduler={info.scheduler} kubeconfig={info.kubeconfig}")
        for p in info.processes:
            alive = p.alive()
            ports = " ".join(f"{ip}:{port}" for ip, port in listening_addresses(p.pid))
            print(f"  {p.name:<24} pid {p.pid:<8} {'alive' if alive else 'gone':<6} {ports}")
    return rc


# --- faults, for chaos tests ------------------------------------------------


def restart_component(
    name: str, component: str, *, sig: int = signal.SIGTERM, down_seconds: float = 0.0
) -> Proc:
    """Stop one process of a running cluster with `sig`, wait `down_seconds`, and start it
    again with the same command line, environment, working directory and log file.

    The new process replaces the old one in cluster.json, and in kwokctl's pid file for the
    components kwokctl started, so `down` stops it. Returns once the new process listens on
    the old one's ports (it may not serve yet); raises if it does not within a minute.
    """
    info = ClusterInfo.load(name)
    if info is None:
        raise ClusterError(f"no cluster named {name}")
    old = next((p for p in info.processes if p.name == component and p.alive()), None)
    if old is None:
        raise ClusterError(f"{component} is not running in cluster {name}")
    proc = Path(f"/proc/{old.pid}")
    argv = [arg.decode() for arg in proc.joinpath("cmdline").read_bytes().split(b"\0")[:-1]]
    env = dict(
        item.decode().split("=", 1)
        for item in proc.joinpath("environ").read_bytes().split(b"\0")
        if b"=" in item
    )
    cwd = os.readlink(proc / "cwd")
    log_path = Path(os.readlink(proc / "fd" / "1"))
    if not log_path.is_file():
        log_path = cluster_dir(name) / "logs" / f"{component}.log"
    ports = {port for _, port in listening_addresses(old.pid)}
    stop_processes([old], grace=15.0, sig=sig)
    time.sleep(down_seconds)
    with log_path.open("ab") as out:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    new = record(component, child.pid)
    if new is None:
        raise ClusterError(f"{component} exited at once; see {log_path}")
    info.processes = [new if p is old else p for p in info.processes]
    info.save()
    pid_file = cluster_dir(name) / "kwok" / "clusters" / name / "pids" / f"{component}.pid"
    if pid_file.is_file():
        pid_file.write_text(str(child.pid))
    # On a shared machine another cluster may have taken a port meanwhile; say so, rather than
    # leave clients talking to a stranger's server.
    wait_for(
        f"{component} to listen on {sorted(ports)} again",
        lambda: new.alive() and ports <= {port for _, port in listening_addresses(new.pid)},
        timeout=60,
        on_timeout=lambda: f"alive: {new.alive()}; log: {log_path}",
    )
    log(f"restarted {component} of {name}: pid {old.pid} -> {child.pid}")
    return new


def etcd_client_url(name: str) -> str:
    """The URL etcd serves clients on, from its command line."""
    info = ClusterInfo.load(name)
    etcd = next((p for p in info.processes if p.name == "etcd") if info else (), None)
    if etcd is None or not etcd.alive():
        raise ClusterError(f"etcd is not running in cluster {name}")
    args = Path(f"/proc/{etcd.pid}/cmdline").read_bytes().decode().split("\0")
    for arg in args:
        if arg.startswith("--advertise-client-urls="):
            return arg.split("=", 1)[1].split(",")[0]
    raise ClusterError(f"etcd of {name} has no --advertise-client-urls")


def _etcd_call(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    # etcd's JSON gateway to its gRPC API: what etcdctl does, without needing etcdctl.
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def compact_etcd(name: str) -> int:
    """Compact etcd's history up to its current revision, as `etcdctl compact --physical`
    does; returns that revision. Watches and lists older than it then get 410 Gone."""
    url = etcd_client_url(name)
    key = base64.b64encode(b"/").decode()
    revision = int(_etcd_call(url, "/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"])
    try:
        _etcd_call(url, "/v3/kv/compaction", {"revision": revision, "physical": True})
    except urllib.error.HTTPError as error:
        # Nothing was written since the last compaction: the history is compact already.
        if b"compacted" not in error.read():
            raise
    return revision


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up", help="start a cluster and print `export KUBECONFIG=...`")
    p_up.add_argument("--scheduler", choices=SCHEDULERS, default="default")
    p_up.add_argument("--name", help="cluster name (default mpi-<scheduler>)")
    p_up.add_argument("--nodes", type=int, default=DEFAULT_NODES)
    p_up.add_argument("--node-cpu", default=DEFAULT_NODE_CPU)
    p_up.add_argument("--node-memory", default=DEFAULT_NODE_MEMORY)
    p_up.add_argument("--node-gpu", type=int, default=DEFAULT_NODE_GPU)
    p_up.add_argument(
        "--real-nodes",
        type=int,
        default=0,
        help="real nodes (kubelet + containerd) beside the fake ones",
    )
    p_up.add_argument(
        "--images-dir",
        type=Path,
        help="import every *.tar here (default: the images hack/images/build.py builds)",
    )
    p_up.add_argument(
        "--kueue", action="store_true", help="run Kueue's controller manager (MPIJob admission)"
    )
    p_up.add_argument(
        "--kueue-pods-ready-timeout",
        type=int,
        default=0,
        metavar="SECONDS",
        help="Kueue's waitForPodsReady: evict a job not running this long after admission",
    )
    p_up.add_argument(
        "--audit-policy",
        type=Path,
        metavar="FILE",
        help="the API server's audit policy; it logs what the policy asks for to audit.log",
    )
    p_up.add_argument("--no-build", action="store_true", help="fail instead of building")
    p_down = sub.add_parser("down", help="stop a cluster's processes and remove its state")
    p_down.add_argument("--name")
    p_down.add_argument("--scheduler", choices=SCHEDULERS)
    p_down.add_argument("--all", action="store_true", help="every cluster under the cache dir")
    p_status = sub.add_parser("status", help="show clusters and their processes")
    p_status.add_argument("--name")
    p_node = sub.add_parser("add-node", help="add a fake node to a running cluster")
    p_node.add_argument("--name", required=True, help="cluster name")
    p_node.add_argument("node")
    p_node.add_argument("--cpu", default=DEFAULT_NODE_CPU)
    p_node.add_argument("--memory", default=DEFAULT_NODE_MEMORY)
    p_node.add_argument("--gpu", type=int, default=DEFAULT_NODE_GPU)
    args = parser.parse_args(argv)

    try:
        if args.cmd == "up":
            info = up(
                scheduler=args.scheduler,
                name=args.name,
                nodes=args.nodes,
                node_cpu=args.node_cpu,
                node_memory=args.node_memory,
                node_gpu=args.node_gpu,
                build=not args.no_build,
                real_nodes=args.real_nodes,
                images=args.images_dir,
                with_kueue=args.kueue,
                kueue_pods_ready_timeout=args.kueue_pods_ready_timeout,
                audit_policy=args.audit_policy,
            )
            print(f"export KUBECONFIG={info.kubeconfig}", flush=True)
        elif args.cmd == "down":
            if args.all:
                targets = sorted(p.name for p in clusters_root().glob("*") if p.is_dir())
            elif args.name or args.scheduler:
                targets = [args.name or default_name(args.scheduler)]
            else:
                parser.error("down needs --name, --scheduler or --all")
            for target in targets:
                down(target)
        elif args.cmd == "status":
            return status(args.name)
        elif args.cmd == "add-node":
            add_node(args.name, args.node, args.cpu, args.memory, args.gpu)
    except (ClusterError, realnodes.RealNodeError) as exc:
        log(f"error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
