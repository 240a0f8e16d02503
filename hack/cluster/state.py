"""Where a local cluster's state lives and what it records: its processes (each by pid and
kernel start time, so a recycled pid is never taken for one of them) and the options it was
brought up with (``cluster.json`` under ``cluster_dir(name)``)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

# The directory of the package: its build scripts, kwok stages and relay.
HERE = Path(__file__).resolve().parent


class ClusterError(RuntimeError):
    """Raised when a cluster cannot be built, started, or found."""


def log(msg: str) -> None:
    print(f"[localcluster] {msg}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    if env := os.environ.get("MPI_OPERATOR_CACHE"):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "mpi-operator"


def clusters_root() -> Path:
    return cache_root() / "clusters"


def cluster_dir(name: str) -> Path:
    return clusters_root() / name


def default_name(scheduler: str) -> str:
    return f"mpi-{scheduler}"


@dataclass
class Proc:
    """A process the cluster owns, identified by pid plus kernel start time."""

    name: str
    pid: int
    start_time: int

    def alive(self) -> bool:
        return proc_start_time(self.pid) == self.start_time


def proc_start_time(pid: int) -> int | None:
    """Kernel start time of a live (non-zombie) process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def record(name: str, pid: int) -> Proc | None:
    start = proc_start_time(pid)
    return None if start is None else Proc(name, pid, start)


@dataclass
class ClusterInfo:
    name: str
    scheduler: str
    kubeconfig: str
    processes: list[Proc]
    started_at: float
    up_seconds: float = 0.0
    # Real nodes: how many, and the pod network they share (bridge, subnet).
    real_nodes: int = 0
    network: dict[str, str] | None = None
    # Kueue's controller manager runs beside the scheduler (admission, not scheduling).
    kueue: bool = False
    # Kueue's waitForPodsReady timeout in seconds; 0: off.
    kueue_pods_ready_timeout: int = 0
    # The API server's audit policy, by its content's SHA-256 (kwokctl copies the file, so
    # its path says nothing); empty: no audit log.
    audit_policy: str = ""

    @classmethod
    def load(cls, name: str) -> ClusterInfo | None:
        path = cluster_dir(name) / "cluster.json"
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        # Every checkout shares the cache, so a state file may hold fields a newer tool added;
        # this one reads past them rather than fail on every cluster it lists.
        procs = [Proc(**_known(Proc, p)) for p in raw.get("processes", [])]
        return cls(**{**_known(cls, raw), "processes": procs})

    def save(self) -> None:
        path = cluster_dir(self.name) / "cluster.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)


def _known(kind: type[Proc] | type[ClusterInfo], raw: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``raw`` that are fields of ``kind``."""
    names = {f.name for f in fields(kind)}
    return {key: value for key, value in raw.items() if key in names}
