"""Bringing a local cluster up and down, and what is running.

``up`` builds what is missing, then starts the control plane with kwokctl, the scheduler and
admission asked for, the nodes, and waits until pods are accepted; ``down`` stops exactly the
processes the cluster recorded, and whatever its real nodes left on the host.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hack.cluster import realnodes
from hack.cluster.admission import start_kueue
from hack.cluster.binaries import bin_dir, kueue_dir, module_dirs
from hack.cluster.kube import Cluster, wait_for
from hack.cluster.kwok import (
    audit_policy_digest,
    kwok_config,
    kwok_kubeconfig,
    kwok_processes,
    pki_dir,
    start_control_plane,
)
from hack.cluster.nodes import (
    DEFAULT_NODE_CPU,
    DEFAULT_NODE_GPU,
    DEFAULT_NODE_MEMORY,
    DEFAULT_NODE_PODS,
    DEFAULT_NODES,
    IMAGES_DIR_ENV,
    create_nodes,
    create_pod_network,
    image_tarballs,
    node_manifest,
    start_fake_nodes,
    start_real_nodes,
    stop_real_node_pods,
    wait_nodes_ready,
)
from hack.cluster.processes import listening_addresses, stop_cluster_processes
from hack.cluster.profiles import ControlPlane, control_plane
from hack.cluster.schedulers import (
    RECIPES,
    SchedulerRecipe,
)
from hack.cluster.state import (
    ClusterError,
    ClusterInfo,
    Proc,
    cluster_dir,
    clusters_root,
    default_name,
    log,
)


@dataclass(frozen=True)
class Prepared:
    """What a bring-up needs, found or built before anything starts: a missing build or image
    fails it before a running cluster of the name is replaced."""

    bins: Path
    mods: dict[str, Path]
    control_plane: ControlPlane
    tarballs: list[Path]
    scheduler_home: Path
    kueue_home: Path | None
    policy_digest: str


def prepare(
    recipe: SchedulerRecipe,
    build: bool,
    real_nodes: int,
    images: Path | None,
    with_kueue: bool,
    audit_policy: Path | None,
) -> Prepared:
    bins = bin_dir(build=build, real_nodes=real_nodes > 0)
    if images is None and os.environ.get(IMAGES_DIR_ENV):
        images = Path(os.environ[IMAGES_DIR_ENV])
    tarballs = image_tarballs(images) if real_nodes else []
    kueue_home = kueue_dir(build) if with_kueue else None
    scheduler_home = recipe.home(bins, build)
    return Prepared(
        bins=bins,
        mods=module_dirs(bins),
        control_plane=control_plane(recipe.kubernetes, bins, build),
        tarballs=tarballs,
        scheduler_home=scheduler_home,
        kueue_home=kueue_home,
        policy_digest=audit_policy_digest(audit_policy),
    )


def running_as_asked(
    name: str,
    scheduler: str,
    real_nodes: int,
    with_kueue: bool,
    kueue_pods_ready_timeout: int,
    policy_digest: str,
) -> ClusterInfo | None:
    """The cluster of that name if all of it runs with these options; otherwise None, and
    whatever of it was there is stopped and removed."""
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
    return None


def wait_pods_accepted(cluster: Cluster) -> None:
    """Pods are rejected until the service account controller has created the namespace's
    `default` ServiceAccount."""
    wait_for(
        "default ServiceAccount",
        lambda: cluster.kubectl("get", "serviceaccount", "default", check=False).returncode == 0,
        timeout=60,
    )


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
    """Brings a cluster up in stages: what it needs found or built, a running cluster of the
    same options kept (any other of the name replaced), then the control plane, the
    scheduler, Kueue, the fake nodes, the real nodes, and pods accepted. A failed stage stops
    what the earlier ones started."""
    recipe = RECIPES.get(scheduler)
    if recipe is None:
        raise ClusterError(f"unknown scheduler {scheduler!r}; choose one of {tuple(RECIPES)}")
    name = name or default_name(scheduler)
    t0 = time.monotonic()
    prepared = prepare(recipe, build, real_nodes, images, with_kueue, audit_policy)
    running = running_as_asked(
        name, scheduler, real_nodes, with_kueue, kueue_pods_ready_timeout, prepared.policy_digest
    )
    if running is not None:
        return running
    cdir = cluster_dir(name)
    cdir.mkdir(parents=True)
    info = ClusterInfo(
        name=name,
        scheduler=scheduler,
        kubeconfig=str(kwok_kubeconfig(name)),
        processes=[],
        started_at=time.time(),
        kueue=with_kueue,
        kueue_pods_ready_timeout=kueue_pods_ready_timeout,
        audit_policy=prepared.policy_digest,
    )
    info.save()
    cluster = Cluster(info, prepared.bins)
    try:
        network = create_pod_network(cluster, real_nodes) if real_nodes else None
        config = kwok_config(
            prepared.bins,
            prepared.mods,
            prepared.control_plane,
            pki_dir(cluster),
            network,
            audit_policy,
        )
        start_control_plane(cluster, config)
        if recipe.start is not None:
            recipe.start(cluster, prepared.scheduler_home)
        if prepared.kueue_home is not None:
            start_kueue(cluster, prepared.kueue_home, kueue_pods_ready_timeout)
        start_fake_nodes(cluster, nodes, node_cpu, node_memory, node_gpu)
        if network is not None:
            start_real_nodes(cluster, network, real_nodes, prepared.tarballs)
        wait_pods_accepted(cluster)
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
