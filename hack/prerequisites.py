"""What `make demo` and `make test` need from the machine, checked in the first seconds.

    python3 hack/prerequisites.py [--install]

Checks the tools (Python 3.11+, Go 1.26+, make, git) and the Debian packages the local
cluster's real nodes and their images need (containerd, runc, the CNI plugins, mmdebstrap),
before any long build starts. With --install, missing Debian packages are installed when this
runs as root with apt-get (after `apt-get update`); otherwise it prints one line naming the
exact command to run, and exits 1. Exits 0 when everything is there. Standard library only: it
runs before the project's virtualenv exists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

MIN_PYTHON = (3, 11)
# What python3-dev gives Debian's python3; an interpreter built elsewhere carries its own.
PYTHON_HEADER = str(Path(sysconfig.get_paths()["include"]) / "Python.h")
MIN_GO = (1, 26)


@dataclass(frozen=True)
class Package:
    """A Debian package, and the file whose presence shows it is installed."""

    name: str
    provides: str
    why: str


PACKAGES = (
    Package("python3-venv", "", "the project's virtualenv"),
    Package("make", "/usr/bin/make", "the README's commands"),
    Package("git", "/usr/bin/git", "the Go module downloads"),
    Package(
        "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "TLS to the package registries"
    ),
    Package("containerd", "/usr/bin/containerd", "the real nodes' container runtime"),
    Package("runc", "/usr/sbin/runc", "the real nodes' pods"),
    Package("containernetworking-plugins", "/usr/lib/cni/bridge", "the real nodes' pod network"),
    Package("mmdebstrap", "/usr/bin/mmdebstrap", "the images real pods run"),
    # pycurl is compiled against the system's libcurl, which shares the interpreter's OpenSSL
    # (its PyPI wheel carries a second copy: 9 MiB more of every operator; docs/performance.md).
    Package("libcurl4-openssl-dev", "/usr/bin/curl-config", "pycurl's build"),
    Package("gcc", "/usr/bin/gcc", "pycurl's build"),
    Package("libc6-dev", "/usr/include/stdio.h", "pycurl's build"),
    Package("python3-dev", PYTHON_HEADER, "pycurl's build (the interpreter's headers)"),
)


@dataclass(frozen=True)
class Machine:
    """What the check reads of a machine; tests pass a description of one."""

    exists: Callable[[str], bool]
    go_version: str | None
    """`go env GOVERSION` (e.g. go1.26.8), None without a go command."""
    python: tuple[int, int]
    has_venv: Callable[[], bool]
    root: bool
    has_apt: bool


def this_machine() -> Machine:
    return Machine(
        exists=lambda path: Path(path).exists(),
        go_version=_go_version(),
        python=(sys.version_info.major, sys.version_info.minor),
        has_venv=_has_venv,
        root=os.geteuid() == 0,
        has_apt=shutil.which("apt-get") is not None,
    )


def _go_version() -> str | None:
    if shutil.which("go") is None:
        return None
    done = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def _has_venv() -> bool:
    # Debian's python3 has the venv module but not ensurepip without python3-venv; a new
    # interpreter sees a package installed a moment ago.
    probe = [sys.executable, "-c", "import ensurepip, venv"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def missing_packages(machine: Machine) -> list[Package]:
    return [package for package in PACKAGES if not _installed(machine, package)]


def _installed(machine: Machine, package: Package) -> bool:
    if package.name == "python3-venv":
        return machine.has_venv()
    return machine.exists(package.provides)


def tool_problems(machine: Machine) -> list[str]:
    """What no Debian package of this release fixes: the interpreter and the Go toolchain."""
    problems = []
    if machine.python < MIN_PYTHON:
        found = ".".join(map(str, machine.python))
        problems.append(f"Python {_dotted(MIN_PYTHON)} or newer is required (found {found})")
    go = _parsed_go(machine.go_version)
    if go is None:
        problems.append(f"Go {_dotted(MIN_GO)} or newer is required (no go command on PATH)")
    elif go < MIN_GO:
        problems.append(
            f"Go {_dotted(MIN_GO)} or newer is required (found {machine.go_version}); "
            "the cluster's Kubernetes, kwok and Volcano builds need it"
        )
    return problems


def install_command(packages: Sequence[Package], root: bool) -> list[str]:
    names = [package.name for package in packages]
    prefix = [] if root else ["sudo"]
    return [*prefix, "apt-get", "install", "-y", "--no-install-recommends", *names]


def _parsed_go(version: str | None) -> tuple[int, int] | None:
    match = re.match(r"go(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def _dotted(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def check(
    machine: Machine, install: bool, run: Callable[[list[str]], int] = subprocess.call
) -> list[str]:
    """The problems left, one line each; installs missing packages first when it can."""
    missing = missing_packages(machine)
    if missing and install and machine.root and machine.has_apt:
        print(f"prerequisites: installing {', '.join(p.name for p in missing)}", flush=True)
        env_command = ["env", "DEBIAN_FRONTEND=noninteractive"]
        if run([*env_command, "apt-get", "update", "-qq"]) == 0:
            run([*env_command, *install_command(missing, root=True), "-qq"])
        missing = missing_packages(machine)
    problems = tool_problems(machine)
    if missing:
        needs = "; ".join(f"{p.name} ({p.why})" for p in missing)
        command = " ".join(install_command(missing, machine.root))
        problems.append(f"missing Debian packages: {needs}; install them with: {command}")
    return problems


def main(argv: Sequence[str]) -> int:
    if any(arg not in ("--install",) for arg in argv):
        print("usage: prerequisites.py [--install]", file=sys.stderr)
        return 2
    problems = check(this_machine(), install="--install" in argv)
    for problem in problems:
        print(f"prerequisites: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
