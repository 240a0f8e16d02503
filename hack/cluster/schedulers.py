"""The gang schedulers a local cluster can run beside kube-scheduler, and how each starts."""

from __future__ import annotations

from pathlib import Path

import yaml

from hack.cluster import koordinator
from hack.cluster.kube import Cluster, apply_crds, wait_for
from hack.cluster.processes import free_port
from hack.cluster.state import ClusterError

SCHEDULERS = ("default", "volcano", "scheduler-plugins", "koordinator")
# Scheduler names pods use to opt into a gang scheduler.
SCHEDULER_NAMES = {
    "default": "default-scheduler",
    "volcano": "volcano",
    "scheduler-plugins": "scheduler-plugins-scheduler",
    "koordinator": koordinator.SCHEDULER_NAME,
}


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
