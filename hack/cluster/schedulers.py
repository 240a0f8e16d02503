"""The schedulers a local cluster can run: kube-scheduler alone, or a gang scheduler beside it.

``RECIPES`` is the one table of them: ``up`` starts a cluster by its recipe, and the command
line, the e2e suite (flavours, scheduler names, how to tell an existing cluster has one), the
demo and the benchmarks read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from hack.cluster import koordinator
from hack.cluster.binaries import koordinator_dir, module_dirs
from hack.cluster.kube import Cluster, apply_crds, wait_for
from hack.cluster.processes import free_port
from hack.cluster.state import ClusterError


def start_scheduler_plugins(cluster: Cluster, sp: Path) -> None:
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


def start_volcano(cluster: Cluster, vc: Path) -> None:
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


def cluster_binaries(bins: Path, build: bool) -> Path:
    """The directory of the cluster's own binaries."""
    return bins


def pinned_module(module: str) -> Callable[[Path, bool], Path]:
    """The source directory of a Go module the cluster's binaries were built from."""
    return lambda bins, build: module_dirs(bins)[module]


def koordinator_build(bins: Path, build: bool) -> Path:
    """koord-scheduler's own build (build-koordinator.sh), made first if missing and allowed."""
    return koordinator_dir(build)


@dataclass(frozen=True)
class SchedulerRecipe:
    """One scheduler a local cluster can run."""

    # What ``--scheduler`` takes; clusters of it are named after it (mpi-<name>, e2e-<name>).
    name: str
    # The spec.schedulerName of the pods it places.
    scheduler_name: str
    # A CRD whose presence shows that it is installed in a cluster; None: every cluster has it.
    crd: str | None = None
    # Where what it runs comes from, given the cluster's binaries and whether building is
    # allowed; found before anything starts, so a missing build fails a bring-up early.
    home: Callable[[Path, bool], Path] = cluster_binaries
    # How it starts once the control plane serves, from its home.
    start: Callable[[Cluster, Path], None] | None = None
    # The Kubernetes profile of its clusters (profiles.PROFILES); None: the first one.
    kubernetes: str | None = None
    # The operator's ``--gang-scheduling`` when kube-scheduler itself schedules the gangs.
    own_gang_scheduling: str = ""

    @property
    def gang_scheduling(self) -> str:
        """The operator's ``--gang-scheduling`` for this cluster: a second scheduler's name,
        or what kube-scheduler gang-schedules by; empty for kube-scheduler without gangs."""
        return self.scheduler_name if self.start is not None else self.own_gang_scheduling


RECIPES: dict[str, SchedulerRecipe] = {
    recipe.name: recipe
    for recipe in (
        SchedulerRecipe("default", "default-scheduler"),
        # kube-scheduler alone, gang-scheduling the PodGroups of scheduling.k8s.io.
        SchedulerRecipe(
            "native",
            "default-scheduler",
            crd=None,
            kubernetes="1.37",
            own_gang_scheduling="scheduling.k8s.io/podgroup",
        ),
        SchedulerRecipe(
            "volcano",
            "volcano",
            crd="podgroups.scheduling.volcano.sh",
            home=pinned_module("volcano.sh/volcano"),
            start=start_volcano,
        ),
        SchedulerRecipe(
            "scheduler-plugins",
            "scheduler-plugins-scheduler",
            crd="podgroups.scheduling.x-k8s.io",
            home=pinned_module("sigs.k8s.io/scheduler-plugins"),
            start=start_scheduler_plugins,
        ),
        SchedulerRecipe(
            "koordinator",
            koordinator.SCHEDULER_NAME,
            crd="reservations.scheduling.koordinator.sh",
            home=koordinator_build,
            start=start_koordinator,
        ),
    )
}


def recipe_named(value: str) -> SchedulerRecipe:
    """The recipe ``value`` names: its own name, or the operator's ``--gang-scheduling`` that
    only it runs (``scheduling.k8s.io/podgroup``: the native one)."""
    for recipe in RECIPES.values():
        if value in (recipe.name, recipe.own_gang_scheduling):
            return recipe
    raise ClusterError(f"unknown scheduler {value!r}; choose one of {tuple(scheduler_choices())}")


def scheduler_choices() -> list[str]:
    """What ``recipe_named`` takes."""
    names = [recipe.name for recipe in RECIPES.values()]
    return names + [r.own_gang_scheduling for r in RECIPES.values() if r.own_gang_scheduling]
