"""The whole story on one machine: a local cluster, the CRD, the operator, the pi job.

    python hack/demo.py [--scheduler default|volcano|scheduler-plugins] [--keep]

Brings up a local cluster (building it first if needed), installs the MPIJob CRD, starts the
operator as a local process with the cluster's kubeconfig, submits examples/pi/pi.yaml and
prints each condition the job reaches until it Succeeds or Fails. Then it stops the operator
and the cluster it started (``--keep`` leaves both running and prints how to reach them).
Exits 0 only on Succeeded.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

REPO = Path(__file__).resolve().parents[1]
# The local cluster tool is a script, not a package; its functions do the cluster work here.
sys.path.insert(0, str(REPO / "hack" / "cluster"))
import localcluster  # noqa: E402

CRD = REPO / "crds" / "kubeflow.org_mpijobs.yaml"
EXAMPLE = REPO / "examples" / "pi" / "pi.yaml"
GANG_FLAGS = {
    "default": "",
    "volcano": "volcano",
    "scheduler-plugins": "scheduler-plugins-scheduler",
}
GROUP, VERSION, PLURAL = "kubeflow.org", "v2beta1", "mpijobs"
NAMESPACE = "default"
SIM_RUN_FOR = "sim.mpi-operator.dev/run-for"
TIMEOUT = 300.0


def say(message: str) -> None:
    print(f"demo: {message}", flush=True)


def cluster_up(scheduler: str, name: str) -> localcluster.Cluster:
    """The running cluster, with the MPIJob CRD installed."""
    say(f"starting local cluster {name} ({scheduler}); a first run builds it from source")
    info = localcluster.up(scheduler, name=name)
    cluster = localcluster.Cluster(info, localcluster.bin_dir())
    localcluster.apply_crds(cluster, [CRD])
    say("MPIJob CRD installed")
    return cluster


def start_operator(kubeconfig: str, scheduler: str, log_path: Path) -> subprocess.Popen[bytes]:
    args = [
        sys.executable,
        "-m",
        "mpi_operator",
        f"--kubeconfig={kubeconfig}",
        f"--gang-scheduling={GANG_FLAGS[scheduler]}",
        "--leader-elect=false",
        "--health-port=0",
        "--bind-address=127.0.0.1",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    say(f"operator started (pid {process.pid}, log {log_path})")
    return process


def submit_and_watch(api: k8s.ApiClient, operator: subprocess.Popen[bytes]) -> bool:
    custom = k8s.CustomObjectsApi(api)
    job = yaml.safe_load(EXAMPLE.read_text())
    # The local cluster's simulated launcher would finish within a second; five make the
    # Running phase visible. Real clusters ignore the annotation.
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    launcher.setdefault("metadata", {}).setdefault("annotations", {})[SIM_RUN_FOR] = "5s"
    name = job["metadata"]["name"]
    try:
        custom.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)
        time.sleep(2)
    except ApiException:
        pass
    custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, job)
    say(f"submitted {EXAMPLE.relative_to(REPO)} as mpijob {NAMESPACE}/{name}")
    seen: set[str] = set()
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if operator.poll() is not None:
            say(f"the operator exited with {operator.returncode}")
            return False
        current = custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)
        for cond in _conditions(current):
            state = f"{cond['type']}={cond.get('status')} {cond.get('reason')}"
            if state not in seen:
                seen.add(state)
                say(f"mpijob/{name} {state}: {cond.get('message')}")
        if "Succeeded" in _true(current):
            return True
        if "Failed" in _true(current):
            return False
        time.sleep(0.2)
    say(f"timed out after {TIMEOUT:.0f} s")
    return False


def _conditions(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list((job.get("status") or {}).get("conditions") or [])


def _true(job: dict[str, Any]) -> set[str]:
    return {c["type"] for c in _conditions(job) if c.get("status") == "True"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheduler", choices=sorted(GANG_FLAGS), default="default")
    parser.add_argument("--keep", action="store_true", help="leave cluster and operator running")
    args = parser.parse_args()
    name = f"demo-{args.scheduler}"
    try:
        kubeconfig = cluster_up(args.scheduler, name).kubeconfig
    except localcluster.ClusterError as error:
        say(f"the local cluster did not come up: {error}")
        localcluster.down(name)
        return 1
    operator: subprocess.Popen[bytes] | None = None
    succeeded = False
    try:
        api = k8s_config.new_client_from_config(config_file=kubeconfig)
        log_dir = Path(os.environ.get("TMPDIR", "/tmp"))
        operator = start_operator(kubeconfig, args.scheduler, log_dir / f"{name}-operator.log")
        succeeded = submit_and_watch(api, operator)
    finally:
        if args.keep:
            say(f"left running: export KUBECONFIG={kubeconfig}")
        else:
            if operator is not None and operator.poll() is None:
                operator.send_signal(signal.SIGTERM)
                operator.wait(30)
            localcluster.down(name)
            say("stopped the operator and the cluster")
    say("Succeeded" if succeeded else "did not succeed")
    return 0 if succeeded else 1


if __name__ == "__main__":
    sys.exit(main())
