"""Local Kubernetes cluster for development and end-to-end tests.

A real control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler) started by kwokctl's binary runtime from binaries that
build.sh compiled from pinned Go modules, fake nodes and pods simulated by
kwok, and optionally a gang scheduler: Volcano, or the scheduler-plugins
Coscheduling scheduler or Koordinator's koord-scheduler running as a second
scheduler; or (`--scheduler native`) Kubernetes 1.37, whose own kube-scheduler
gang-schedules scheduling.k8s.io PodGroups. Everything listens on
127.0.0.1. CRDs and upstream default configs are read from the pinned modules
in the Go module cache, never copied into the repository.

    localcluster.py up [--scheduler default|volcano|scheduler-plugins|koordinator|native]
                       [--name N]
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
from collections.abc import Sequence
from pathlib import Path

from hack.cluster import realnodes
from hack.cluster.lifecycle import add_node, down, status, up
from hack.cluster.nodes import (
    DEFAULT_NODE_CPU,
    DEFAULT_NODE_GPU,
    DEFAULT_NODE_MEMORY,
    DEFAULT_NODES,
)
from hack.cluster.schedulers import RECIPES
from hack.cluster.state import ClusterError, clusters_root, default_name, log


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up", help="start a cluster and print `export KUBECONFIG=...`")
    p_up.add_argument("--scheduler", choices=tuple(RECIPES), default="default")
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
    p_down.add_argument("--scheduler", choices=tuple(RECIPES))
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
