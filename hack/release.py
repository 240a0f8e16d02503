"""Writes a release of this source tree into one directory (``make release``, ``dist/``).

    python hack/release.py [--out dist] [--repository docker.io/library/mpi-operator]

    mpi-operator-<version>.oci.tar   the operator image, an OCI image layout tar: the image
                                     hack/images builds, named <repository>:<version> and
                                     <repository>@<digest>, so `ctr images import` of it
                                     serves the install below on a node that pulls nothing
    mpi-operator-<version>.tgz       the Helm chart, its image pinned by digest
    mpi-operator-<version>-crd.yaml  the MPIJob CRD
    mpi-operator-<version>.yaml      the whole install (CRD, Namespace mpi-operator, RBAC,
                                     Deployment) of deploy/overlays/standalone, with the image
                                     by digest, for the operator and the launchers' kubectl
    SHA256SUMS                       the files' SHA-256, as `sha256sum -c` reads them

The image is the one the real nodes run (same bytes, same digest: its build is reproducible);
<repository> is where it will be pushed, which changes only names, never the digest. Every
file's bytes are a function of the source tree and the pinned tools: a second run writes the
same files, and with the image cache warm it takes a few seconds.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from hack.cluster import bin_dir
from hack.cluster.images import images_tool

REPO = Path(__file__).resolve().parents[1]
STANDALONE = REPO / "deploy" / "overlays" / "standalone"
CHART = REPO / "charts" / "mpi-operator"
CRD = REPO / "crds" / "kubeflow.org_mpijobs.yaml"
HELM_BUILD = REPO / "hack" / "cluster" / "build-helm.sh"
# deploy/base's name of the operator image, which kustomize's `images:` matches.
DEPLOY_IMAGE = "mpi-operator"
CONTAINERD_NAME = "io.containerd.image.name"
REF_NAME = "org.opencontainers.image.ref.name"
SUMS = "SHA256SUMS"


class ReleaseError(Exception):
    """A step of the release failed; the message says which."""


def log(message: str) -> None:
    print(f"release: {message}", file=sys.stderr)


def run(command: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=cwd, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0:
        raise ReleaseError(f"{' '.join(command)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


# -- the image ---------------------------------------------------------------------------------


def operator_image() -> Path:
    """The operator image's OCI tar, built by hack/images (from its cache when warm)."""
    tool = images_tool()
    name = tool.Spec.load().operator.name
    tars: list[Path] = tool.build([name])
    return tars[-1]


def manifest_digest(image_tar: Path) -> str:
    with tarfile.open(image_tar) as tar:
        index = json.loads(_member(tar, "index.json").read())
    (manifest,) = index["manifests"]
    digest: str = manifest["digest"]
    return digest


def _member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    stream = tar.extractfile(name)
    if stream is None:
        raise ReleaseError(f"{tar.name!s}: no {name}")
    return stream


def release_index(index: dict[str, Any], repository: str, version: str) -> dict[str, Any]:
    """The image's index naming its one manifest twice: by tag, and by digest (a node's
    containerd finds an image by digest only under a name of that form)."""
    (manifest,) = index["manifests"]
    by_tag = {
        **manifest,
        "annotations": {CONTAINERD_NAME: f"{repository}:{version}", REF_NAME: version},
    }
    by_digest = {**manifest, "annotations": {CONTAINERD_NAME: f"{repository}@{manifest['digest']}"}}
    return {**index, "manifests": [by_tag, by_digest]}


def write_image(source: Path, out: Path, repository: str, version: str) -> None:
    """The image's layout tar with the release's names; every other member as it was."""
    with tarfile.open(source) as tar, tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as copy:
        for member in tar.getmembers():
            if member.name == "index.json":
                index = release_index(
                    json.loads(_member(tar, member.name).read()), repository, version
                )
                data = json.dumps(index, sort_keys=True, indent=2).encode()
                info = tarfile.TarInfo(member.name)
                info.size, info.mtime, info.mode = len(data), member.mtime, member.mode
                copy.addfile(info, io.BytesIO(data))
            else:
                copy.addfile(member, tar.extractfile(member) if member.isreg() else None)


# -- the install YAML --------------------------------------------------------------------------


def kubectl() -> str:
    binary = bin_dir(build=False) / "kubectl"
    if binary.is_file():
        return str(binary)
    found = shutil.which("kubectl")
    if found is None:
        raise ReleaseError("kubectl is required (make cluster-build, or any kubectl on PATH)")
    return found


def install_yaml(image: str, version: str) -> str:
    """deploy/overlays/standalone with the operator image (and so the launchers' kubectl
    image, which deploy/base ties to it) replaced by ``image``."""
    with tempfile.TemporaryDirectory(prefix="mpi-operator-release.") as scratch:
        overlay = Path(scratch)
        repository, _, digest = image.partition("@")
        (overlay / "kustomization.yaml").write_text(
            json.dumps(
                {
                    "apiVersion": "kustomize.config.k8s.io/v1beta1",
                    "kind": "Kustomization",
                    "resources": [os.path.relpath(STANDALONE, overlay)],
                    "images": [{"name": DEPLOY_IMAGE, "newName": repository, "digest": digest}],
                }
            )
        )
        built = run([kubectl(), "kustomize", str(overlay)])
    if f"image: {image}\n" not in built or built.count(image) != 2:
        raise ReleaseError(f"the install does not name {image} for the operator and kubectl")
    header = (
        f"# mpi-operator {version}: the MPIJob CRD, Namespace mpi-operator, RBAC, the operator.\n"
        f"# Install: kubectl apply --server-side -f mpi-operator-{version}.yaml\n"
    )
    return header + built


# -- the chart ---------------------------------------------------------------------------------


def helm() -> str:
    return run(["bash", str(HELM_BUILD)]).strip().splitlines()[-1]


def pinned_values(text: str, repository: str, digest: str) -> str:
    """The chart's values.yaml with the image's repository and digest set."""
    replacements = {
        f"  repository: {DEPLOY_IMAGE}\n": f"  repository: {repository}\n",
        '  digest: ""\n': f'  digest: "{digest}"\n',
    }
    for old, new in replacements.items():
        if text.count(old) != 1:
            raise ReleaseError(f"{CHART / 'values.yaml'}: expected one line {old.strip()!r}")
        text = text.replace(old, new)
    return text


def package_chart(out: Path, repository: str, digest: str, epoch: int) -> None:
    with tempfile.TemporaryDirectory(prefix="mpi-operator-chart.") as scratch:
        chart = Path(scratch) / CHART.name
        shutil.copytree(CHART, chart)
        values = chart / "values.yaml"
        values.write_text(pinned_values(values.read_text(), repository, digest))
        run([helm(), "package", str(chart), "--destination", scratch])
        (packaged,) = Path(scratch).glob("*.tgz")
        normalised(packaged, out, epoch)


def normalised(packaged: Path, out: Path, epoch: int) -> None:
    """The chart archive again with fixed times and owners (helm stamps the time of packaging
    on every file and on the gzip header), so that it is the same bytes every time."""
    with (
        tarfile.open(packaged, "r:gz") as source,
        out.open("wb") as sink,
        gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as copy,
    ):
        for member in source.getmembers():
            info = tarfile.TarInfo(member.name)
            info.type, info.size, info.mode = member.type, member.size, member.mode
            info.mtime = epoch
            copy.addfile(info, source.extractfile(member) if member.isreg() else None)


# -- the release -------------------------------------------------------------------------------


def file_names(version: str) -> dict[str, str]:
    return {
        "image": f"mpi-operator-{version}.oci.tar",
        "chart": f"mpi-operator-{version}.tgz",
        "crd": f"mpi-operator-{version}-crd.yaml",
        "install": f"mpi-operator-{version}.yaml",
    }


def sha256sums(directory: Path, names: list[str]) -> str:
    lines = []
    for name in sorted(names):
        digest = hashlib.sha256()
        with (directory / name).open("rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
        lines.append(f"{digest.hexdigest()}  {name}\n")
    return "".join(lines)


def release(out: Path, repository: str) -> Iterator[Path]:
    """Writes the release into ``out`` (emptied first) and yields each file written."""
    tool = images_tool()
    version: str = tool.project_version()
    epoch: int = tool.Spec.load().epoch
    source = operator_image()
    digest = manifest_digest(source)
    image = f"{repository}@{digest}"
    log(f"mpi-operator {version}, image {image}")
    names = file_names(version)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    write_image(source, out / names["image"], repository, version)
    package_chart(out / names["chart"], repository, digest, epoch)
    shutil.copyfile(CRD, out / names["crd"])
    (out / names["install"]).write_text(install_yaml(image, version))
    (out / SUMS).write_text(sha256sums(out, list(names.values())))
    for name in [*names.values(), SUMS]:
        yield out / name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="directory to write")
    parser.add_argument(
        "--repository",
        default=images_tool().Spec.load().operator.repository,
        help="where the image will be pushed; the install and the chart name it by digest there",
    )
    args = parser.parse_args(argv)
    try:
        for path in release(args.out, args.repository):
            print(path)
    except ReleaseError as error:
        print(f"release: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
