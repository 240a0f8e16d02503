"""Reads an OCI image layout tar and checks it the way an importer would, from scratch."""

from __future__ import annotations

import gzip
import hashlib
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


@dataclass(frozen=True)
class ImageLayout:
    name: str
    ref_name: str
    config: dict[str, Any]
    layer_digests: list[str]
    diff_ids: list[str]


def _sha256(stream: Any) -> tuple[str, int]:
    sha, size = hashlib.sha256(), 0
    while chunk := stream.read(_CHUNK):
        sha.update(chunk)
        size += len(chunk)
    return f"sha256:{sha.hexdigest()}", size


def _blob(tar: tarfile.TarFile, digest: str) -> tarfile.TarInfo:
    return tar.getmember(f"blobs/sha256/{digest.removeprefix('sha256:')}")


def _checked(tar: tarfile.TarFile, descriptor: dict[str, Any]) -> bytes:
    """The blob a descriptor names, after checking its digest and size."""
    stream = tar.extractfile(_blob(tar, descriptor["digest"]))
    assert stream is not None
    data = stream.read()
    assert f"sha256:{hashlib.sha256(data).hexdigest()}" == descriptor["digest"]
    assert len(data) == descriptor["size"]
    return data


def read_layout(path: Path, diff_ids: dict[str, str]) -> ImageLayout:
    """Checks every digest and size in the layout; diff_ids caches layer digest -> diff id."""
    with tarfile.open(path) as tar:
        assert json.loads(tar.extractfile("oci-layout").read())["imageLayoutVersion"] == "1.0.0"  # type: ignore[union-attr]
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
        assert index["schemaVersion"] == 2
        (descriptor,) = index["manifests"]
        assert descriptor["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
        manifest = json.loads(_checked(tar, descriptor))
        assert manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
        config = json.loads(_checked(tar, manifest["config"]))
        layer_digests = []
        for layer in manifest["layers"]:
            assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
            digest = layer["digest"]
            if digest not in diff_ids:
                blob = tar.extractfile(_blob(tar, digest))
                assert blob is not None
                assert _sha256(blob) == (digest, layer["size"])
                blob.seek(0)
                diff_ids[digest] = _sha256(gzip.GzipFile(fileobj=blob))[0]
            layer_digests.append(digest)
        annotations = descriptor["annotations"]
        return ImageLayout(
            name=annotations["io.containerd.image.name"],
            ref_name=annotations["org.opencontainers.image.ref.name"],
            config=config,
            layer_digests=layer_digests,
            diff_ids=[diff_ids[d] for d in layer_digests],
        )


def extract_layers(path: Path, root: Path) -> None:
    """Unpacks the image's layers in order into root, as a runtime's snapshotter would."""
    with tarfile.open(path) as tar:
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
        manifest = json.loads(_checked(tar, index["manifests"][0]))
        for layer in manifest["layers"]:
            blob = tar.extractfile(_blob(tar, layer["digest"]))
            assert blob is not None
            with tarfile.open(fileobj=blob, mode="r:gz") as layer_tar:
                layer_tar.extractall(root, filter="fully_trusted")


def layer_member(path: Path, layer_digest: str, name: str) -> bytes | None:
    """The content of one file in one layer, or None when the layer lacks it."""
    with tarfile.open(path) as tar:
        blob = tar.extractfile(_blob(tar, layer_digest))
        assert blob is not None
        with tarfile.open(fileobj=blob, mode="r:gz") as layer_tar:
            try:
                member = layer_tar.extractfile(name)
            except KeyError:
                return None
            return member.read() if member is not None else None
