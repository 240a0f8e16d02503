"""A cluster being brought up or used: kubectl against it, processes it owns, waiting on
them, and CRDs installed until the API server serves them."""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hack.cluster.state import ClusterError, ClusterInfo, Proc, cluster_dir, record


class Cluster:
    """A cluster being brought up; knows how to run kubectl against it."""

    def __init__(self, info: ClusterInfo, bins: Path) -> None:
        self.info = info
        self.bins = bins
        self.dir = cluster_dir(info.name)

    @property
    def kubeconfig(self) -> str:
        return self.info.kubeconfig

    def kubectl(
        self, *args: str, stdin: str | None = None, timeout: float = 60, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        cmd = [
            str(self.bins / "kubectl"),
            f"--kubeconfig={self.kubeconfig}",
            # Keeps kubectl's discovery cache with the cluster, not in ~/.kube.
            f"--cache-dir={self.dir / 'kube-cache'}",
            *args,
        ]
        res = subprocess.run(
            cmd, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and res.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed: {res.stderr.strip()}")
        return res

    def add_process(self, proc: Proc) -> None:
        self.info.processes.append(proc)
        self.info.save()

    def spawn(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> Proc:
        logs = self.dir / "logs"
        logs.mkdir(exist_ok=True)
        with (logs / f"{name}.log").open("ab") as out:
            child = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        proc = record(name, child.pid)
        if proc is None:
            raise ClusterError(f"{name} exited at once; see {logs / (name + '.log')}")
        self.add_process(proc)
        return proc

    def wait_healthy(self, name: str, url: str, timeout: float = 60) -> None:
        """Waits until process ``name`` answers 200 at ``url``; on timeout the error holds
        the tail of its log."""
        check = https_ok if url.startswith("https:") else http_ok
        wait_for(
            f"{name} {url}", lambda: check(url), timeout, on_timeout=lambda: self.log_tail(name)
        )

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.dir / "logs" / f"{name}.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def wait_for(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    interval: float = 0.25,
    on_timeout: Callable[[], str] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(ClusterError, OSError, subprocess.TimeoutExpired):
            if check():
                return
        if time.monotonic() >= deadline:
            detail = on_timeout() if on_timeout else ""
            raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}\n{detail}")
        time.sleep(interval)


def https_ok(url: str) -> bool:
    # Component health endpoints use self-signed serving certificates.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def apply_crds(cluster: Cluster, paths: Sequence[Path], timeout: float = 60) -> None:
    args = ["apply", "--server-side", "--force-conflicts"]
    for p in paths:
        args += ["-f", str(p)]
    out = cluster.kubectl(*args, "-o", "name", timeout=120).stdout.split()
    crds = [n for n in out if n.startswith("customresourcedefinition")]
    if not crds:
        return
    # Not `kubectl wait --for=condition=Established`: on a brand-new CRD it can fail with a
    # .status.conditions accessor error before the API server has written any condition.
    # Poll what the API server reports instead; no conditions yet just means "not yet".
    seen: list[str] = []

    def established() -> bool:
        listing = json.loads(cluster.kubectl("get", *crds, "-o", "json").stdout)
        seen[:] = not_established(listing)
        return not seen

    wait_for(
        "CRDs Established",
        established,
        timeout,
        on_timeout=lambda: "not Established: " + ", ".join(seen),
    )


def not_established(listing: dict[str, Any]) -> list[str]:
    """Names of the CRDs in a ``kubectl get -o json`` answer (a List, or one object) that
    the API server has not reported Established, whatever part of their status is missing."""
    items = listing.get("items") if listing.get("kind") == "List" else [listing]
    waiting = []
    for crd in items or []:
        conditions = (crd.get("status") or {}).get("conditions") or []
        if not any(
            c.get("type") == "Established" and c.get("status") == "True" for c in conditions
        ):
            waiting.append(str((crd.get("metadata") or {}).get("name", "?")))
    return waiting
