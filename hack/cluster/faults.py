"""Faults injected into a running local cluster, for the chaos tests: a component stopped
and started again, etcd's history compacted."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from hack.cluster.kube import wait_for
from hack.cluster.processes import listening_addresses, stop_processes
from hack.cluster.state import ClusterError, ClusterInfo, Proc, cluster_dir, log, record


def restart_component(
    name: str, component: str, *, sig: int = signal.SIGTERM, down_seconds: float = 0.0
) -> Proc:
    """Stop one process of a running cluster with `sig`, wait `down_seconds`, and start it
    again with the same command line, environment, working directory and log file.

    The new process replaces the old one in cluster.json, and in kwokctl's pid file for the
    components kwokctl started, so `down` stops it. Returns once the new process listens on
    the old one's ports (it may not serve yet); raises if it does not within a minute.
    """
    info = ClusterInfo.load(name)
    if info is None:
        raise ClusterError(f"no cluster named {name}")
    old = next((p for p in info.processes if p.name == component and p.alive()), None)
    if old is None:
        raise ClusterError(f"{component} is not running in cluster {name}")
    proc = Path(f"/proc/{old.pid}")
    argv = [arg.decode() for arg in proc.joinpath("cmdline").read_bytes().split(b"\0")[:-1]]
    env = dict(
        item.decode().split("=", 1)
        for item in proc.joinpath("environ").read_bytes().split(b"\0")
        if b"=" in item
    )
    cwd = os.readlink(proc / "cwd")
    log_path = Path(os.readlink(proc / "fd" / "1"))
    if not log_path.is_file():
        log_path = cluster_dir(name) / "logs" / f"{component}.log"
    ports = {port for _, port in listening_addresses(old.pid)}
    stop_processes([old], grace=15.0, sig=sig)
    time.sleep(down_seconds)
    with log_path.open("ab") as out:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    new = record(component, child.pid)
    if new is None:
        raise ClusterError(f"{component} exited at once; see {log_path}")
    info.processes = [new if p is old else p for p in info.processes]
    info.save()
    pid_file = cluster_dir(name) / "kwok" / "clusters" / name / "pids" / f"{component}.pid"
    if pid_file.is_file():
        pid_file.write_text(str(child.pid))
    # On a shared machine another cluster may have taken a port meanwhile; say so, rather than
    # leave clients talking to a stranger's server.
    wait_for(
        f"{component} to listen on {sorted(ports)} again",
        lambda: new.alive() and ports <= {port for _, port in listening_addresses(new.pid)},
        timeout=60,
        on_timeout=lambda: f"alive: {new.alive()}; log: {log_path}",
    )
    log(f"restarted {component} of {name}: pid {old.pid} -> {child.pid}")
    return new


def etcd_client_url(name: str) -> str:
    """The URL etcd serves clients on, from its command line."""
    info = ClusterInfo.load(name)
    etcd = next((p for p in (info.processes if info else []) if p.name == "etcd"), None)
    if etcd is None or not etcd.alive():
        raise ClusterError(f"etcd is not running in cluster {name}")
    args = Path(f"/proc/{etcd.pid}/cmdline").read_bytes().decode().split("\0")
    for arg in args:
        if arg.startswith("--advertise-client-urls="):
            return arg.split("=", 1)[1].split(",")[0]
    raise ClusterError(f"etcd of {name} has no --advertise-client-urls")


def _etcd_call(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    # etcd's JSON gateway to its gRPC API: what etcdctl does, without needing etcdctl.
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def compact_etcd(name: str) -> int:
    """Compact etcd's history up to its current revision, as `etcdctl compact --physical`
    does; returns that revision. Watches and lists older than it then get 410 Gone."""
    url = etcd_client_url(name)
    key = base64.b64encode(b"/").decode()
    revision = int(_etcd_call(url, "/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"])
    try:
        _etcd_call(url, "/v3/kv/compaction", {"revision": revision, "physical": True})
    except urllib.error.HTTPError as error:
        # Nothing was written since the last compaction: the history is compact already.
        if b"compacted" not in error.read():
            raise
    return revision
