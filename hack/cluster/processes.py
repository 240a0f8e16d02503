"""The processes of a local cluster: stopping exactly them, and the ports they listen on."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path

from hack.cluster.state import ClusterError, Proc, log


def reap(pid: int) -> None:
    # Processes started by this interpreter must be reaped or they linger as
    # zombies; for any other pid waitpid simply fails.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


# Clients before servers: stopping etcd and the API server last keeps the
# other components from spending their shutdown retrying a dead API server.
STOP_ORDER = ("kube-apiserver", "etcd")


def stop_cluster_processes(procs: Sequence[Proc]) -> list[Proc]:
    stopped = stop_processes([p for p in procs if p.name not in STOP_ORDER])
    for name in STOP_ORDER:
        # A throwaway API server has nothing worth a long graceful shutdown.
        stopped += stop_processes([p for p in procs if p.name == name], grace=5.0)
    return stopped


def stop_processes(
    procs: Sequence[Proc], grace: float = 15.0, sig: int = signal.SIGTERM
) -> list[Proc]:
    """`sig` (SIGTERM), then SIGKILL after `grace` seconds, exactly the given processes."""
    live = [p for p in procs if p.alive()]
    for p in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, sig)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        for p in live:
            reap(p.pid)
        if not any(p.alive() for p in live):
            break
        time.sleep(0.1)
    for p in live:
        if p.alive():
            log(f"{p.name} (pid {p.pid}) ignored SIGTERM; sending SIGKILL")
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(p.alive() for p in live):
        for p in live:
            reap(p.pid)
        time.sleep(0.05)
    left = [p for p in live if p.alive()]
    if left:
        raise ClusterError(f"processes still running after SIGKILL: {left}")
    # An exited process stays a zombie until its parent (init, for daemons
    # kwokctl started) reaps it; give that a moment so `ps` right after
    # `down` is clean. Zombies hold no ports or memory, so this is best effort.
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and any(Path(f"/proc/{p.pid}").exists() for p in live):
        time.sleep(0.05)
    return live


def listening_addresses(pid: int) -> list[tuple[str, int]]:
    """TCP (ip, port) pairs a process listens on, read from /proc."""
    inodes: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    found: list[tuple[str, int]] = []
    for table, v6 in ((f"/proc/{pid}/net/tcp", False), (f"/proc/{pid}/net/tcp6", True)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            # Column 3 is the socket state; 0A is LISTEN.
            if len(cols) < 10 or cols[3] != "0A" or cols[9] not in inodes:
                continue
            hex_ip, hex_port = cols[1].split(":")
            found.append((_proc_ip(hex_ip, v6), int(hex_port, 16)))
    return found


def _proc_ip(hex_ip: str, v6: bool) -> str:
    raw = bytes.fromhex(hex_ip)
    # /proc prints each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, words)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
