"""What `make release` writes, piece by piece, without building the image: the install YAML
(CRD, Namespace, RBAC, Deployment) naming the image by digest for the operator and the
launchers' kubectl alike, the chart pinned to the same digest, the image's index naming it by
tag and by digest, archives that are the same bytes every time, and the checksums file."""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_deploy import DELIVERY_ENV, UPSTREAM_LABELS, kubectl

from hack import release
from mpi_operator import __version__
from tests.tools import helm_binary

DIGEST = "sha256:" + "c" * 64
REPOSITORY = "registry.example/ml/mpi-operator"
IMAGE = f"{REPOSITORY}@{DIGEST}"
EPOCH = 1735689600
INSTALL_KINDS = {
    "CustomResourceDefinition",
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Deployment",
}


@pytest.fixture(scope="module")
def install() -> list[dict[str, Any]]:
    if kubectl() is None:
        pytest.skip("no kubectl (make cluster-build, or one on PATH) to run kustomize with")
    text = release.install_yaml(IMAGE, __version__)
    assert text.startswith(f"# mpi-operator {__version__}: ")
    return [doc for doc in yaml.safe_load_all(text) if doc]


def test_the_install_holds_the_crd_namespace_rbac_and_deployment(
    install: list[dict[str, Any]],
) -> None:
    assert {doc["kind"] for doc in install} == INSTALL_KINDS
    crd = next(doc for doc in install if doc["kind"] == "CustomResourceDefinition")
    generated = yaml.safe_load(release.CRD.read_text())
    assert crd["spec"] == generated["spec"]
    namespaced = [doc for doc in install if doc["metadata"].get("namespace")]
    assert {doc["metadata"]["namespace"] for doc in namespaced} == {"mpi-operator"}
    for doc in install:
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["labels"].items() >= UPSTREAM_LABELS.items(), doc["kind"]


def test_the_install_runs_the_release_image_by_digest_for_the_operator_and_kubectl(
    install: list[dict[str, Any]],
) -> None:
    (deployment,) = [doc for doc in install if doc["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE
    assert container["imagePullPolicy"] == "IfNotPresent"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[DELIVERY_ENV] == IMAGE
    assert f"--mpi-kubectl-delivery-image=$({DELIVERY_ENV})" in container["args"]
    text = yaml.safe_dump_all(install)
    assert ":latest" not in text
    assert f"mpi-operator:{__version__}" not in text


def test_the_chart_is_pinned_to_the_same_digest_and_packaged_the_same_every_time(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "first.tgz", tmp_path / "second.tgz"
    release.package_chart(first, REPOSITORY, DIGEST, EPOCH)
    release.package_chart(second, REPOSITORY, DIGEST, EPOCH)
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as archive:
        assert {member.mtime for member in archive.getmembers()} == {EPOCH}
        chart = yaml.safe_load(archive.extractfile("mpi-operator/Chart.yaml").read())  # type: ignore[union-attr]
    assert (chart["version"], chart["appVersion"]) == (__version__, __version__)
    rendered = subprocess.run(
        [helm_binary(), "template", "mpi", str(first), "--namespace", "mpi-operator"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    (deployment,) = [
        doc for doc in yaml.safe_load_all(rendered) if doc and doc["kind"] == "Deployment"
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE
    assert {e["name"]: e.get("value") for e in container["env"]}[DELIVERY_ENV] == IMAGE


def test_pinning_refuses_values_it_cannot_find() -> None:
    with pytest.raises(release.ReleaseError, match="expected one line 'digest: \"\"'"):
        release.pinned_values("image:\n  repository: mpi-operator\n", REPOSITORY, DIGEST)


def test_the_image_index_names_the_manifest_by_tag_and_by_digest() -> None:
    manifest = {"mediaType": "m", "digest": DIGEST, "size": 1, "annotations": {"x": "y"}}
    index = release.release_index(
        {"schemaVersion": 2, "manifests": [manifest]}, REPOSITORY, __version__
    )
    assert index["schemaVersion"] == 2
    assert [(m["digest"], m["annotations"]) for m in index["manifests"]] == [
        (
            DIGEST,
            {
                "io.containerd.image.name": f"{REPOSITORY}:{__version__}",
                "org.opencontainers.image.ref.name": __version__,
            },
        ),
        (DIGEST, {"io.containerd.image.name": IMAGE}),
    ]


def test_sha256sums_reads_as_sha256sum_writes_it(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_bytes(b"b")
    (tmp_path / "a.tgz").write_bytes(b"a")
    sums = release.sha256sums(tmp_path, ["b.yaml", "a.tgz"])
    assert sums == "".join(
        f"{hashlib.sha256(data).hexdigest()}  {name}\n"
        for name, data in (("a.tgz", b"a"), ("b.yaml", b"b"))
    )
    (tmp_path / "SHA256SUMS").write_text(sums)
    checked = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_files_are_named_by_version() -> None:
    assert release.file_names("1.2.3") == {
        "image": "mpi-operator-1.2.3.oci.tar",
        "chart": "mpi-operator-1.2.3.tgz",
        "crd": "mpi-operator-1.2.3-crd.yaml",
        "install": "mpi-operator-1.2.3.yaml",
    }
