"""Deterministic OCI image layouts, written without a container engine.

A layer is a gzip-compressed tar written from a sequence of entries; an image is a config,
a manifest and its layers as blobs; the result is an OCI image layout packed in one tar that
`ctr images import` reads. Every timestamp is fixed and every collection is ordered, so the
same inputs give the same digests.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
# containerd names an imported image after this annotation.
CONTAINERD_NAME = "io.containerd.image.name"
REF_NAME = "org.opencontainers.image.ref.name"
# zlib's default (9) costs twice the time for a few per cent less.
GZIP_LEVEL = 6

Opener = Callable[[], IO[bytes]]


@dataclass(frozen=True)
class Entry:
    """One tar member of a layer and, for regular files, how to read its content."""

    info: tarfile.TarInfo
    content: Opener | None = None


@dataclass(frozen=True)
class Blob:
    digest: str
    size: int


@dataclass(frozen=True)
class Layer:
    blob: Blob
    diff_id: str


@dataclass(frozen=True)
class ImageConfig:
    entrypoint: list[str] | None
    cmd: list[str] | None
    user: str
    env: list[str]
    working_dir: str
    # "8080/tcp" and the like; documentation for users, as Docker's EXPOSE.
    ports: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)


def _info(path: str, kind: bytes, mode: int, uid: int, gid: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path.strip("/"))
    info.type = kind
    info.mode = mode
    info.uid, info.gid = uid, gid
    info.uname = info.gname = ""
    info.mtime = mtime
    return info


def directory(path: str, mtime: int, mode: int = 0o755, uid: int = 0, gid: int = 0) -> Entry:
    return Entry(_info(path, tarfile.DIRTYPE, mode, uid, gid, mtime))


def in_memory(data: bytes) -> Opener:
    return lambda: io.BytesIO(data)


def file(
    path: str, data: bytes, mtime: int, mode: int = 0o644, uid: int = 0, gid: int = 0
) -> Entry:
    info = _info(path, tarfile.REGTYPE, mode, uid, gid, mtime)
    info.size = len(data)
    return Entry(info, in_memory(data))


def host_file(
    path: str, source: Path, mtime: int, mode: int = 0o644, uid: int = 0, gid: int = 0
) -> Entry:
    info = _info(path, tarfile.REGTYPE, mode, uid, gid, mtime)
    info.size = source.stat().st_size
    return Entry(info, lambda: source.open("rb"))


def symlink(path: str, target: str, mtime: int) -> Entry:
    info = _info(path, tarfile.SYMTYPE, 0o777, 0, 0, mtime)
    info.linkname = target
    return Entry(info)


def tree(prefix: str, root: Path, mtime: int) -> list[Entry]:
    """Every directory and file under root, placed under prefix, owned by root, in name order."""
    entries = [directory(prefix, mtime)]
    for path in sorted(root.rglob("*")):
        inside = f"{prefix.rstrip('/')}/{path.relative_to(root).as_posix()}"
        if path.is_symlink():
            entries.append(symlink(inside, os.readlink(path), mtime))
        elif path.is_dir():
            entries.append(directory(inside, mtime))
        else:
            executable = path.stat().st_mode & 0o111
            entries.append(host_file(inside, path, mtime, 0o755 if executable else 0o644))
    return entries


class _Sink(Protocol):
    def write(self, data: bytes, /) -> int: ...


class _HashingWriter(io.RawIOBase):
    """Passes writes through to target while counting and hashing them."""

    def __init__(self, target: _Sink) -> None:
        super().__init__()
        self.target = target
        self.sha256 = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.sha256.update(chunk)
        self.size += len(chunk)
        self.target.write(chunk)
        return len(chunk)


def _store(blobs: Path, temporary: Path, digest: str) -> Path:
    destination = blobs / "sha256" / digest.removeprefix("sha256:")
    destination.parent.mkdir(parents=True, exist_ok=True)
    os.replace(temporary, destination)
    return destination


def write_layer(entries: Iterable[Entry], blobs: Path) -> Layer:
    """Writes the entries as one gzip-compressed tar blob under blobs/sha256/."""
    blobs.mkdir(parents=True, exist_ok=True)
    temporary = blobs / f".layer.{os.getpid()}.tmp"
    with temporary.open("wb") as raw:
        compressed = _HashingWriter(raw)
        # No file name and a zero time in the gzip header: the bytes depend on content only.
        with gzip.GzipFile(
            filename="", mode="wb", fileobj=compressed, mtime=0, compresslevel=GZIP_LEVEL
        ) as gz:
            uncompressed = _HashingWriter(gz)
            with tarfile.open(fileobj=uncompressed, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for entry in entries:
                    if entry.content is None:
                        tar.addfile(entry.info)
                    else:
                        with entry.content() as content:
                            tar.addfile(entry.info, content)
    digest = f"sha256:{compressed.sha256.hexdigest()}"
    _store(blobs, temporary, digest)
    return Layer(Blob(digest, compressed.size), f"sha256:{uncompressed.sha256.hexdigest()}")


def _json_blob(document: dict[str, Any], blobs: Path) -> Blob:
    data = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
    temporary = blobs / f".json.{os.getpid()}.tmp"
    temporary.write_bytes(data)
    _store(blobs, temporary, digest)
    return Blob(digest, len(data))


def _descriptor(media_type: str, blob: Blob) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": blob.digest, "size": blob.size}


def write_image(
    name: str, layers: list[Layer], config: ImageConfig, created: int, blobs: Path, out: Path
) -> Path:
    """Writes config and manifest blobs, then packs the OCI layout of one image into out."""
    container_config: dict[str, Any] = {
        "Env": config.env,
        "User": config.user,
        "WorkingDir": config.working_dir,
    }
    if config.entrypoint is not None:
        container_config["Entrypoint"] = config.entrypoint
    if config.cmd is not None:
        container_config["Cmd"] = config.cmd
    if config.ports:
        container_config["ExposedPorts"] = {port: {} for port in sorted(config.ports)}
    if config.labels:
        container_config["Labels"] = config.labels
    created_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))
    config_blob = _json_blob(
        {
            "architecture": "amd64",
            "os": "linux",
            "created": created_at,
            "config": container_config,
            "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
            "history": [
                {"created": created_at, "created_by": "hack/images/build.py"} for _ in layers
            ],
        },
        blobs,
    )
    manifest_blob = _json_blob(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": _descriptor(CONFIG_TYPE, config_blob),
            "layers": [_descriptor(LAYER_TYPE, layer.blob) for layer in layers],
        },
        blobs,
    )
    manifest = _descriptor(MANIFEST_TYPE, manifest_blob)
    manifest["annotations"] = {CONTAINERD_NAME: name, REF_NAME: name.rsplit(":", 1)[1]}
    index = {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": [manifest]}
    layout = {"imageLayoutVersion": "1.0.0"}
    members: list[tuple[str, Path | bytes]] = [
        ("index.json", json.dumps(index, sort_keys=True, indent=2).encode()),
        ("oci-layout", json.dumps(layout).encode()),
    ]
    for blob in sorted(
        {manifest_blob, config_blob, *(layer.blob for layer in layers)}, key=lambda b: b.digest
    ):
        hex_digest = blob.digest.removeprefix("sha256:")
        members.append((f"blobs/sha256/{hex_digest}", blobs / "sha256" / hex_digest))
    return _pack(members, created, out)


def _pack(members: list[tuple[str, Path | bytes]], mtime: int, out: Path) -> Path:
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    with tarfile.open(temporary, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory_name in ("blobs", "blobs/sha256"):
            tar.addfile(_info(directory_name, tarfile.DIRTYPE, 0o755, 0, 0, mtime))
        for name, source in members:
            info = _info(name, tarfile.REGTYPE, 0o644, 0, 0, mtime)
            if isinstance(source, bytes):
                info.size = len(source)
                tar.addfile(info, io.BytesIO(source))
            else:
                info.size = source.stat().st_size
                with source.open("rb") as content:
                    tar.addfile(info, content)
    os.replace(temporary, out)
    return out
