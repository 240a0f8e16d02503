"""The binaries a local cluster runs, built from pinned Go modules into the cache by the
build scripts beside this file, and the modules' sources (CRDs, upstream configs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hack.cluster.state import HERE, ClusterError, log


def bin_dir(build: bool = True, real_nodes: bool = False) -> Path:
    """The built binaries; with ``real_nodes`` also the kubelet and CoreDNS."""
    script = HERE / "build.sh"
    extra = ["--real-nodes"] if real_nodes else []
    out = subprocess.run(
        ["bash", str(script), "--print", *extra], capture_output=True, text=True, timeout=60
    )
    if out.returncode not in (0, 3):
        raise ClusterError(f"build.sh --print failed: {out.stderr.strip()}")
    path = Path(out.stdout.strip())
    if out.returncode == 0 and (path / ".complete").is_file():
        return path
    if not build:
        raise ClusterError(f"binaries are not built in {path}; run `make cluster-build`")
    log(f"binaries missing in {path}; building (a cold build takes 20-40 minutes)")
    # Build output goes to stderr so that `up` keeps the export line last on stdout.
    subprocess.run(["bash", str(script), *extra], check=True, stdout=sys.stderr)
    return path


def tool_dir(script_name: str, what: str, cold_cost: str, build: bool) -> Path:
    """The cache directory a build script fills (a Go tool and its manifests), built first
    if missing."""
    script = HERE / script_name
    path = Path(subprocess.check_output(["bash", str(script), "--print"], text=True).strip())
    if (path / ".complete").is_file():
        return path
    if not build:
        raise ClusterError(f"{what} is not built in {path}; run `bash {script}`")
    log(f"{what} missing in {path}; building (a cold build takes {cold_cost})")
    subprocess.run(["bash", str(script)], check=True, stdout=sys.stderr)
    return path


def kueue_dir(build: bool = True) -> Path:
    """Kueue's binary and manifests (build-kueue.sh)."""
    return tool_dir("build-kueue.sh", "Kueue", "about 5 minutes", build)


def koordinator_dir(build: bool = True) -> Path:
    """koord-scheduler and Koordinator's CRDs (build-koordinator.sh)."""
    return tool_dir("build-koordinator.sh", "koord-scheduler", "about 7 minutes", build)


def module_dirs(bins: Path) -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for line in (bins.parent / "modules.env").read_text().splitlines():
        key, _, value = line.partition("=")
        if key and value:
            mods[key] = Path(value)
    return mods


def versions(bins: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (bins.parent / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key] = value
    return out
