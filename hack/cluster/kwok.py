"""kwokctl's part: the control plane's configuration (binaries, flags, stages), its files
and the processes it started."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from hack.cluster import realnodes
from hack.cluster.kube import Cluster
from hack.cluster.profiles import ControlPlane
from hack.cluster.state import HERE, ClusterError, Proc, cluster_dir, log, record


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
    control_plane: ControlPlane,
    pki: Path,
    network: realnodes.Network | None,
    audit_policy: Path | None = None,
) -> str:
    """kwokctl's configuration: etcd, kwok and kubectl from ``bins``, the rest from
    ``control_plane``; ``network`` is the real nodes' pod network, if any."""
    real_nodes = network is not None
    kwok = mods["sigs.k8s.io/kwok"] / "kustomize" / "stage"
    ctl = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "options": {
            "runtime": "binary",
            "bindAddress": "127.0.0.1",
            "kubeVersion": control_plane.version,
            "kubeApiserverBinary": str(control_plane.bins / "kube-apiserver"),
            "kubeControllerManagerBinary": str(control_plane.bins / "kube-controller-manager"),
            "kubeSchedulerBinary": str(control_plane.bins / "kube-scheduler"),
            "kubectlBinary": str(bins / "kubectl"),
            "etcdBinary": str(bins / "etcd"),
            "kwokControllerBinary": str(bins / "kwok"),
            "disableQPSLimits": True,
            # Pods reach the API server at the bridge address (the `kubernetes` Service's).
            **({"kubeApiserverCertSANs": [network.gateway]} if network else {}),
            # The API server then writes what the policy asks for to audit_log(name).
            **({"kubeAuditPolicy": str(audit_policy)} if audit_policy else {}),
            # kwokctl hands both to the API server, the controller manager and the scheduler.
            **(
                {"kubeFeatureGates": ",".join(control_plane.feature_gates)}
                if control_plane.feature_gates
                else {}
            ),
            **(
                {"kubeRuntimeConfig": ",".join(control_plane.runtime_config)}
                if control_plane.runtime_config
                else {}
            ),
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


def kwok_processes(name: str) -> list[Proc]:
    pids = cluster_dir(name) / "kwok" / "clusters" / name / "pids"
    procs = []
    for pidfile in sorted(pids.glob("*.pid")) if pids.is_dir() else []:
        with contextlib.suppress(ValueError, OSError):
            proc = record(pidfile.stem, int(pidfile.read_text().strip()))
            if proc is not None:
                procs.append(proc)
    return procs


def kwok_workdir(name: str) -> Path:
    """Where kwokctl keeps a cluster's files (KWOK_WORKDIR)."""
    return cluster_dir(name) / "kwok"


def kwok_kubeconfig(name: str) -> Path:
    """The admin kubeconfig kwokctl writes for a cluster."""
    return kwok_workdir(name) / "clusters" / name / "kubeconfig.yaml"


def start_control_plane(cluster: Cluster, config: str) -> None:
    """etcd, the API server, the controller manager, kube-scheduler and kwok's controller,
    started by kwokctl from ``config``; each process it started is recorded, even when it
    fails."""
    name = cluster.info.name
    path = cluster.dir / "kwok.yaml"
    path.write_text(config)
    env = {
        **os.environ,
        "KWOK_WORKDIR": str(kwok_workdir(name)),
        # kwokctl looks kubectl up on PATH before it would download one.
        "PATH": f"{cluster.bins}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("KUBECONFIG", None)
    env["KUBECACHEDIR"] = str(cluster.dir / "kube-cache")
    log(f"starting control plane for {name} ({cluster.info.scheduler})")
    res = subprocess.run(
        [
            str(cluster.bins / "kwokctl"),
            f"--config={path}",
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
    (cluster.dir / "kwokctl-create.log").write_text(res.stdout + res.stderr)
    for proc in kwok_processes(name):
        cluster.add_process(proc)
    if res.returncode != 0:
        raise ClusterError(f"kwokctl create cluster failed:\n{res.stderr[-3000:]}")
