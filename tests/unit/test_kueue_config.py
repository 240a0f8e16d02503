"""How the local cluster runs Kueue: on loopback only, with a certificate the API server can
check, and in the admission path of nothing but MPIJobs and Kueue's own kinds."""

from __future__ import annotations

import base64
import ipaddress
from pathlib import Path
from typing import Any

from cryptography import x509

from hack.cluster import kueue


def hook(name: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {
            "service": {"name": "webhook-service", "namespace": "system", "path": path}
        },
        "failurePolicy": "Fail",
    }


MANIFESTS = [
    {
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [
            hook("mjob.kb.io", "/mutate-batch-v1-job"),
            hook("mpod.kb.io", "/mutate--v1-pod"),
            hook("mmpijob.kb.io", "/mutate-kubeflow-org-v2beta1-mpijob"),
            hook("mworkload.kb.io", "/mutate-kueue-x-k8s-io-v1beta2-workload"),
        ],
    },
    {
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "validating-webhook-configuration"},
        "webhooks": [hook("vdeployment.kb.io", "/validate-apps-v1-deployment")],
    },
]


def test_only_the_mpijob_and_kueue_webhooks_are_registered_and_they_point_at_loopback() -> None:
    configs = kueue.webhook_configurations(MANIFESTS, 9443, b"CA")
    assert [c["metadata"]["name"] for c in configs] == ["kueue-mutating-webhook-configuration"]
    hooks = configs[0]["webhooks"]
    assert [h["name"] for h in hooks] == ["mmpijob.kb.io", "mworkload.kb.io"]
    assert hooks[0]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate-kubeflow-org-v2beta1-mpijob",
        "caBundle": base64.b64encode(b"CA").decode(),
    }


def test_conversion_webhooks_follow_the_crds_kueue_itself_patches() -> None:
    kustomization = {
        "patches": [
            {"path": "patches/webhook_in_workloads.yaml"},
            {"path": "patches/webhook_in_clusterqueues.yaml"},
            {"path": "patches/cainjection_in_workloads.yaml"},
        ]
    }
    assert kueue.converted_crds(kustomization) == {"workloads", "clusterqueues"}
    crd = kueue.with_conversion_webhook({"spec": {"versions": []}}, 9443, b"CA")
    client = crd["spec"]["conversion"]["webhook"]["clientConfig"]
    assert crd["spec"]["conversion"]["strategy"] == "Webhook"
    assert client["url"] == "https://127.0.0.1:9443/convert"


def test_configuration_binds_loopback_and_runs_only_the_mpijob_integration(tmp_path: Path) -> None:
    config = kueue.configuration(9443, 8081, tmp_path, pods_ready_timeout=0)
    assert config["webhook"] == {"host": "127.0.0.1", "port": 9443, "certDir": str(tmp_path)}
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:8081"
    assert config["metrics"]["bindAddress"] == "0"
    assert config["internalCertManagement"] == {"enable": False}
    assert config["integrations"]["frameworks"] == ["kubeflow.org/mpijob"]
    assert "waitForPodsReady" not in config
    waiting = kueue.configuration(1, 2, tmp_path, pods_ready_timeout=20)["waitForPodsReady"]
    assert waiting["timeout"] == "20s" and waiting["blockAdmission"] is True


def test_serving_certificate_is_for_loopback_and_signed_by_the_returned_ca(tmp_path: Path) -> None:
    ca = x509.load_pem_x509_certificate(kueue.serving_certificate(tmp_path))
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    assert cert.issuer == ca.subject
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert (tmp_path / "tls.key").stat().st_mode & 0o077 == 0
