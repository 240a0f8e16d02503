"""Kueue in the local cluster: what its controller manager needs to run as a process.

Kueue serves admission and CRD-conversion webhooks. In a cluster they sit behind a Service
and a certificate Kueue rotates itself; here the controller listens on 127.0.0.1 with a
serving certificate this module makes, and the API server reaches it by URL with the CA
that signed it. Only the webhooks of what the cluster runs are registered: Kueue's own
kinds and the MPIJob integration. Registering the others (Jobs, Pods, Deployments, with
failurePolicy Fail) would put Kueue in the path of every Job the operator creates.

The manifests come from the pinned module (build-kueue.sh copies them into its cache), so
they always match the binary.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

NAMESPACE = "kueue-system"
# The integration this project needs; the name is Kueue's framework key.
FRAMEWORKS = ("kubeflow.org/mpijob",)
# Webhook paths served for the frameworks above and for Kueue's own kinds.
WEBHOOK_PATH_MARKERS = ("-kubeflow-org-v2beta1-mpijob", "-kueue-x-k8s-io-")
LOOPBACK = "127.0.0.1"


def serving_certificate(directory: Path) -> bytes:
    """Writes tls.crt and tls.key for 127.0.0.1 into ``directory`` (as controller-runtime's
    webhook server reads them) and returns the PEM of the CA that signed them."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "local-kueue-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, LOOPBACK)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(LOOPBACK))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (directory / "tls.key").chmod(0o600)
    return ca.public_bytes(serialization.Encoding.PEM)


def configuration(
    webhook_port: int, health_port: int, cert_dir: Path, pods_ready_timeout: int
) -> dict[str, Any]:
    """Kueue's Configuration: loopback only, no leader election, certificates from us; with
    ``pods_ready_timeout`` (seconds, 0 for off) Kueue's waitForPodsReady, requeuing an
    evicted job after a few seconds rather than its default minute."""
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"{LOOPBACK}:{health_port}"},
        # "0" turns the metrics server off; nothing here scrapes it.
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": LOOPBACK, "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": list(FRAMEWORKS)},
        # The pending-workloads API is an aggregated API server whose certificate path is
        # fixed at /visibility; nothing here queries it.
        "featureGates": {"VisibilityOnDemand": False},
    }
    if pods_ready_timeout:
        config["waitForPodsReady"] = {
            "timeout": f"{pods_ready_timeout}s",
            "blockAdmission": True,
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffBaseSeconds": 5,
                "backoffMaxSeconds": 10,
            },
        }
    return config


def webhook_configurations(
    manifests: Iterable[dict[str, Any]], port: int, ca_pem: bytes
) -> list[dict[str, Any]]:
    """Kueue's webhook configurations, cut down to the webhooks of what runs here and
    pointed at the controller on loopback."""
    ca_bundle = base64.b64encode(ca_pem).decode()
    out = []
    for manifest in manifests:
        kept = []
        for hook in manifest.get("webhooks") or []:
            path = hook["clientConfig"]["service"]["path"]
            if any(marker in path for marker in WEBHOOK_PATH_MARKERS):
                hook["clientConfig"] = {
                    "url": f"https://{LOOPBACK}:{port}{path}",
                    "caBundle": ca_bundle,
                }
                kept.append(hook)
        if kept:
            manifest["metadata"] = {"name": f"kueue-{manifest['metadata']['name']}"}
            manifest["webhooks"] = kept
            out.append(manifest)
    return out


def converted_crds(kustomization: dict[str, Any]) -> set[str]:
    """The CRDs (by plural) Kueue's own install converts by webhook: those its kustomization
    patches with ``webhook_in_<plural>.yaml``; the others serve their versions unconverted."""
    names = set()
    for patch in kustomization.get("patches") or []:
        stem = Path(str(patch.get("path", ""))).stem
        if stem.startswith("webhook_in_"):
            names.add(stem.removeprefix("webhook_in_"))
    return names


def with_conversion_webhook(crd: dict[str, Any], port: int, ca_pem: bytes) -> dict[str, Any]:
    """The CRD with its versions converted by Kueue's /convert endpoint on loopback."""
    crd["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "url": f"https://{LOOPBACK}:{port}/convert",
                "caBundle": base64.b64encode(ca_pem).decode(),
            },
            "conversionReviewVersions": ["v1"],
        },
    }
    return crd


# Where Kueue reads its metrics certificate when it does not manage certificates itself; the
# path is fixed in its main, so it is overlaid on /etc for Kueue's process alone.
METRICS_CERTS = Path("kueue/metrics/certs")


def command(binary: Path, config: Path, etc_overlay: Path) -> list[str]:
    """Kueue's command line: in a mount namespace of its own where ``etc_overlay`` lies over
    /etc, so the host's /etc is never written."""
    script = 'mount -t overlay kueue-etc -o "lowerdir=$0:/etc" /etc && exec "$@"'
    return [
        "unshare",
        "--mount",
        "--propagation=private",
        "sh",
        "-c",
        script,
        str(etc_overlay),
        str(binary),
        f"--config={config}",
        "--zap-log-level=2",
    ]


def load_all(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
