"""Admission beside the scheduler: Kueue's controller manager, admitting MPIJobs."""

from __future__ import annotations

from pathlib import Path

import yaml

from hack.cluster import kueue
from hack.cluster.kube import Cluster, apply_crds
from hack.cluster.processes import free_port
from hack.cluster.state import HERE

# Kueue admits MPIJobs only when their CRD is there before it starts.
MPIJOB_CRD = HERE.parent.parent / "crds" / "kubeflow.org_mpijobs.yaml"


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
