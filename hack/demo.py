"""The whole story on one machine: a local cluster, the CRD, the operator, pi computed for real.

    python hack/demo.py [--scheduler default|volcano|scheduler-plugins|koordinator|
                                     scheduling.k8s.io/podgroup] [--name N] [--keep]

Brings up a local cluster whose nodes are real (a kubelet and containerd each, the images
imported; everything is built first if needed), installs the MPIJob CRD, starts the operator
as a local process with the cluster's kubeconfig, submits examples/pi/pi.yaml unchanged and
prints each condition the job reaches until it Succeeds or Fails, then the launcher's last log
lines: the value of pi. Then it stops the operator and the cluster it started (``--keep``
leaves both running and prints how to reach them). Exits 0 only on Succeeded.
``--scheduler scheduling.k8s.io/podgroup`` (or ``native``) runs the Kubernetes 1.37 profile,
whose own kube-scheduler gang-schedules; no other scheduler is installed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch import Watch

import hack.cluster as localcluster
from mpi_operator.api.constants import MPIJOB_RESOURCE
from mpi_operator.operator.options import Options
from mpi_operator.testing.launch import LOOPBACK, operator_command

REPO = Path(__file__).resolve().parents[1]

CRD = REPO / "crds" / "kubeflow.org_mpijobs.yaml"
EXAMPLE = REPO / "examples" / "pi" / "pi.yaml"
GROUP, VERSION, PLURAL = MPIJOB_RESOURCE
NAMESPACE = "default"
# The example's three pods ask for one CPU each and a real node offers this machine's CPUs
# (two on the project's machines), so two real nodes; no kwok nodes, or pods could land on
# one and only be simulated.
REAL_NODES = 2
TIMEOUT = 600.0
LAUNCHER_LINES = 5


def say(message: str) -> None:
    print(f"demo: {message}", flush=True)


def cluster_up(scheduler: str, name: str) -> localcluster.Cluster:
    """The running cluster, with the MPIJob CRD installed."""
    say(f"starting local cluster {name} ({scheduler}, {REAL_NODES} real nodes)")
    try:
        localcluster.bin_dir(build=False, real_nodes=True)
    except localcluster.ClusterError:
        say(
            "the cluster's binaries are not built yet: a cold build on 2 cores takes about "
            "15 minutes for Kubernetes, etcd, kwok, Volcano and the kubelet, then about 5 "
            "to 13 for the images, each step printing its progress; later runs start in "
            "seconds (docs/local-cluster.md, Cost)"
        )
    info = localcluster.up(scheduler, name=name, nodes=0, real_nodes=REAL_NODES)
    cluster = localcluster.Cluster(info, localcluster.bin_dir(real_nodes=True))
    localcluster.apply_crds(cluster, [CRD])
    say(f"cluster up in {info.up_seconds:.0f} s; MPIJob CRD installed")
    return cluster


def start_operator(kubeconfig: str, scheduler: str, log_path: Path) -> subprocess.Popen[bytes]:
    options = Options(
        kubeconfig=kubeconfig,
        gang_scheduling=localcluster.RECIPES[scheduler].gang_scheduling,
        leader_elect=False,
        health_port=0,
        bind_address=LOOPBACK,
    )
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            operator_command(options), stdout=log, stderr=subprocess.STDOUT, cwd=REPO
        )
    say(f"operator started (pid {process.pid}, log {log_path})")
    return process


def submit_and_watch(api: k8s.ApiClient, operator: subprocess.Popen[bytes]) -> bool:
    """Submits the example as it is and reports its conditions until it finishes."""
    custom = k8s.CustomObjectsApi(api)
    job = yaml.safe_load(EXAMPLE.read_text())
    name = job["metadata"]["name"]
    try:
        custom.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)
        time.sleep(2)
    except ApiException:
        pass
    created = custom.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, job)
    say(f"submitted {EXAMPLE.relative_to(REPO)} as mpijob {NAMESPACE}/{name}")
    seen: set[str] = set()
    reached: list[str] = []
    finished: str | None = None

    def report(current: dict[str, Any]) -> str | None:
        for cond in _conditions(current):
            state = f"{cond['type']}={cond.get('status')} {cond.get('reason')}"
            if state not in seen:
                seen.add(state)
                say(f"mpijob/{name} {state}: {cond.get('message')}")
            if cond.get("status") == "True" and cond["type"] not in reached:
                reached.append(cond["type"])
        return next((t for t in ("Succeeded", "Failed") if t in reached), None)

    # A watch, as `kubectl get -w` does: every version of the job, however briefly it stood.
    version = created["metadata"]["resourceVersion"]
    deadline = time.monotonic() + TIMEOUT
    while finished is None and time.monotonic() < deadline:
        if operator.poll() is not None:
            say(f"the operator exited with {operator.returncode}")
            break
        try:
            for event in Watch().stream(
                custom.list_namespaced_custom_object,
                GROUP,
                VERSION,
                NAMESPACE,
                PLURAL,
                field_selector=f"metadata.name={name}",
                resource_version=version,
                timeout_seconds=5,
            ):
                version = event["object"]["metadata"]["resourceVersion"]
                finished = report(event["object"])
                if finished is not None:
                    break
        except ApiException as error:
            if error.status != 410:
                raise
            # The version is too old to watch from: start again from the job as it is now.
            current = custom.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)
            version = current["metadata"]["resourceVersion"]
            finished = report(current)
    if finished is None and operator.poll() is None:
        say(f"timed out after {TIMEOUT:.0f} s")
    say(f"mpijob/{name}: {' -> '.join(reached) or 'no condition'}")
    print_launcher_log(k8s.CoreV1Api(api), name)
    return finished == "Succeeded"


def print_launcher_log(core: k8s.CoreV1Api, job_name: str) -> None:
    """The last lines the launcher printed: with the example, the ranks' hosts and pi."""
    selector = f"training.kubeflow.org/job-name={job_name},training.kubeflow.org/job-role=launcher"
    try:
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
        if not pods:
            say("no launcher pod to read a log from")
            return
        pod = str(max(pods, key=lambda p: p.metadata.creation_timestamp).metadata.name)
        log = str(core.read_namespaced_pod_log(pod, NAMESPACE))
    except ApiException as error:
        say(f"could not read the launcher's log: {error.reason}")
        return
    say(f"last lines of pod/{pod} (the launcher):")
    for line in log.strip().splitlines()[-LAUNCHER_LINES:]:
        print(f"    {line}", flush=True)


def _conditions(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list((job.get("status") or {}).get("conditions") or [])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scheduler", choices=localcluster.scheduler_choices(), default="default")
    parser.add_argument("--name", help="the local cluster's name (default demo-<scheduler>)")
    parser.add_argument("--keep", action="store_true", help="leave cluster and operator running")
    args = parser.parse_args(argv)
    scheduler = localcluster.recipe_named(args.scheduler).name
    name = args.name or f"demo-{scheduler}"
    operator: subprocess.Popen[bytes] | None = None
    succeeded = False
    try:
        kubeconfig = cluster_up(scheduler, name).kubeconfig
        api = k8s_config.new_client_from_config(config_file=kubeconfig)
        log_dir = Path(os.environ.get("TMPDIR", "/tmp"))
        operator = start_operator(kubeconfig, scheduler, log_dir / f"{name}-operator.log")
        succeeded = submit_and_watch(api, operator)
    except (localcluster.ClusterError, localcluster.RealNodeError) as error:
        say(f"the local cluster did not come up: {error}")
    finally:
        info = localcluster.ClusterInfo.load(name)
        if args.keep and info is not None:
            say(f"left running: export KUBECONFIG={info.kubeconfig}")
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
