"""Local Kubernetes clusters for development, the end-to-end tests, the demo and the
benchmarks: a real control plane started by kwokctl from binaries built from pinned Go
modules, kwok's fake nodes, optionally real nodes, a gang scheduler and Kueue.

What callers use is importable from here; ``localcluster.py`` beside this file is the
command line (``up``, ``down``, ``status``, ``add-node``). The modules:

* ``state``: where a cluster's state lives, what ``cluster.json`` records;
* ``processes``: stopping exactly a cluster's processes, the ports they listen on;
* ``binaries``: the pinned builds in the cache and their modules' sources;
* ``profiles``: the Kubernetes versions a control plane can run, and what a newer one
  switches on;
* ``kube``: kubectl against a cluster, processes it owns, CRDs installed;
* ``kwok``: kwokctl's configuration and the control plane it starts;
* ``nodes``: fake nodes, and real ones started from what ``realnodes`` makes them of;
* ``images``: hack/images/build.py, which builds the images real nodes import, as a module,
  and the kubectl-delivery image's name;
* ``schedulers``: the schedulers a cluster can run and how each starts (``koordinator``:
  koord-scheduler's configuration);
* ``admission``: Kueue's controller manager (``kueue``: its configuration);
* ``lifecycle``: ``up``, ``down``, ``status``, ``add_node``;
* ``faults``: faults for the chaos tests;
* ``cli``: the command line; ``relay.py`` runs as a process of its own.
"""

from hack.cluster.binaries import bin_dir
from hack.cluster.faults import compact_etcd, etcd_client_url, restart_component
from hack.cluster.images import kubectl_delivery_image
from hack.cluster.kube import Cluster, apply_crds, not_established
from hack.cluster.kwok import audit_log, audit_policy_digest, kwok_config
from hack.cluster.lifecycle import add_node, down, status, up
from hack.cluster.processes import free_port, listening_addresses
from hack.cluster.realnodes import RealNodeError
from hack.cluster.schedulers import RECIPES, SchedulerRecipe, recipe_named, scheduler_choices
from hack.cluster.state import ClusterError, ClusterInfo, Proc, cluster_dir, proc_start_time

__all__ = [
    "RECIPES",
    "Cluster",
    "ClusterError",
    "ClusterInfo",
    "Proc",
    "RealNodeError",
    "SchedulerRecipe",
    "add_node",
    "apply_crds",
    "audit_log",
    "audit_policy_digest",
    "bin_dir",
    "cluster_dir",
    "compact_etcd",
    "down",
    "etcd_client_url",
    "free_port",
    "kubectl_delivery_image",
    "kwok_config",
    "listening_addresses",
    "not_established",
    "proc_start_time",
    "recipe_named",
    "restart_component",
    "scheduler_choices",
    "status",
    "up",
]
