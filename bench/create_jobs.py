"""Benchmark: how fast the operator turns N MPIJobs into their children, and at what cost.

    python bench/create_jobs.py [--jobs 500] [--workers 2] [--kube-api-qps 100]
        [--kube-api-burst 200] [--threadiness 4] [--kubeconfig PATH] [--out FILE]
        [--cluster-name bench] [--operator-source DIR]

Without ``--kubeconfig`` it brings up a local cluster named ``bench`` (default scheduler, enough
kwok nodes for every pod) and stops it afterwards. It starts the operator as a process, creates
the jobs as fast as the API server takes them, and records, for each job, when its launcher Job
(the last child the operator creates) appeared on a watch. Reported:

* jobs/s from the first submission to the last launcher Job;
* p50/p99 latency from a job's submission to its launcher Job;
* API write requests per job once the operator is idle again, by verb and resource, from the
  operator's own request counter,
  and how many of them met a 409 (a conflict, or AlreadyExists);
* the operator's peak resident memory (VmHWM);
* the operator's CPU (user + system) from just before the first submission to settled, per job.

Results are compared with ``bench/thresholds.yaml``; a breach is printed and makes the exit code
1, so a regression is visible without any timing assertion in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from memory_trace import vm_mib

import hack.cluster as localcluster
from mpi_operator.api.constants import MPIJOB_RESOURCE
from mpi_operator.operator.options import Options
from mpi_operator.testing.launch import LOOPBACK, operator_command

REPO = Path(__file__).resolve().parents[1]

CRD = REPO / "crds" / "kubeflow.org_mpijobs.yaml"
THRESHOLDS = REPO / "bench" / "thresholds.yaml"
NAMESPACE = "bench"
GROUP, VERSION, PLURAL = MPIJOB_RESOURCE
WRITE_VERBS = ("create", "update", "patch", "delete")
CONFLICTS = ("409", "")
RECONCILES = ("reconciles", "")


def job_manifest(name: str, workers: int, version: str = VERSION) -> dict[str, Any]:
    def template(role: str) -> dict[str, Any]:
        return {
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": role,
                        "image": "mpioperator/mpi-pi:openmpi",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    }
                ],
            },
            # Keep the launcher running: the benchmark measures creation, not completion.
            "metadata": {"annotations": {"sim.mpi-operator.dev/hold": "true"}},
        }

    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template("launcher")},
                "Worker": {"replicas": workers, "template": template("worker")},
            },
        },
    }


def cluster_up(name: str, pods: int) -> str:
    """A local cluster with room for ``pods`` pods; returns its kubeconfig."""
    nodes = max(2, pods // 100 + 1)
    info = localcluster.up(name=name, nodes=nodes, node_cpu="64", node_memory="256Gi")
    return str(info.kubeconfig)


def install_crd(kubeconfig: str) -> None:
    """Install the MPIJob CRD with the cluster tool's kubectl, whatever cluster this is."""
    info = localcluster.ClusterInfo("bench", "", kubeconfig, [], time.time())
    localcluster.apply_crds(localcluster.Cluster(info, localcluster.bin_dir()), [CRD])


def scrape(port: int) -> dict[tuple[str, str], float]:
    """Write requests by (verb, resource) from the operator's counter; 409s under ("409", ""),
    reconciles under ("reconciles", "")."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    writes: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if line.startswith("controller_runtime_reconcile_total{"):
            writes[RECONCILES] = writes.get(RECONCILES, 0.0) + float(line.rsplit(" ", 1)[1])
        if not line.startswith("mpi_operator_api_requests_total{"):
            continue
        labels_text, value = line.rsplit(" ", 1)
        labels = dict(
            part.split("=", 1) for part in labels_text[labels_text.index("{") + 1 : -1].split(",")
        )
        verb, resource = labels["verb"].strip('"'), labels["resource"].strip('"')
        if verb in WRITE_VERBS:
            writes[(verb, resource)] = writes.get((verb, resource), 0.0) + float(value)
            if labels["code"].strip('"') == "409":
                writes[CONFLICTS] = writes.get(CONFLICTS, 0.0) + float(value)
    return writes


def settled(port: int, timeout: float, quiet: float = 5.0) -> dict[tuple[str, str], float]:
    """The write counts once the operator has written nothing for ``quiet`` seconds (the
    status updates, ConfigMap updates and events that follow the last launcher)."""
    deadline = time.monotonic() + timeout
    last = scrape(port)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = scrape(port)
        if now == last:
            break
        last = now
    return last


def cpu_seconds(pid: int) -> float:
    # Fields after the command name: utime and stime are the 12th and 13th, in clock ticks.
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    return vm_mib(pid).get("VmHWM", float("nan"))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def compile_operator(source: Path = REPO, python: str = sys.executable) -> None:
    """Writes the bytecode of the operator's modules in ``source`` beside them, as installing
    its wheel does: a checkout run under PYTHONDONTWRITEBYTECODE would compile every module
    again at each start, which no installed operator does (docs/performance.md)."""
    subprocess.run(
        [python, "-m", "compileall", "-q", "mpi_operator", "gang"], cwd=source, check=True
    )


def run(args: argparse.Namespace, kubeconfig: str) -> dict[str, Any]:
    install_crd(kubeconfig)
    api = k8s_config.new_client_from_config(config_file=kubeconfig)
    core = k8s.CoreV1Api(api)
    try:
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE)))
    except k8s.ApiException as error:
        if error.status != 409:
            raise
    metrics_port = localcluster.free_port()
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / "bench-operator.log"
    options = Options(
        kubeconfig=kubeconfig,
        leader_elect=False,
        namespace=NAMESPACE,
        threadiness=args.threadiness,
        kube_api_qps=args.kube_api_qps,
        kube_api_burst=args.kube_api_burst,
        monitoring_port=metrics_port,
        health_port=0,
        bind_address=LOOPBACK,
    )
    source = args.operator_source or REPO
    compile_operator(source, args.operator_python or sys.executable)
    with log_path.open("wb") as log:
        operator = subprocess.Popen(
            operator_command(options, python=args.operator_python or sys.executable),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=source,
        )
    try:
        return measure(args, api, operator, metrics_port)
    finally:
        operator.send_signal(signal.SIGTERM)
        operator.wait(60)


def measure(
    args: argparse.Namespace,
    api: k8s.ApiClient,
    operator: subprocess.Popen[bytes],
    metrics_port: int,
) -> dict[str, Any]:
    for _ in range(120):
        try:
            before = scrape(metrics_port)
            break
        except OSError:
            time.sleep(0.5)
    else:
        raise RuntimeError("the operator's metrics never came up")
    time.sleep(2)  # let the caches sync before the clock starts
    before = scrape(metrics_port)
    names = [f"bench-{i:05d}" for i in range(args.jobs)]
    launched: dict[str, float] = {}
    done = threading.Event()

    def watch_launchers() -> None:
        batch = k8s.BatchV1Api(api)
        stream = k8s_watch.Watch()
        for event in stream.stream(
            batch.list_namespaced_job,
            NAMESPACE,
            label_selector="training.kubeflow.org/operator-name=mpi-operator",
            timeout_seconds=args.timeout,
        ):
            if event["type"] == "ADDED":
                launched.setdefault(
                    event["object"].metadata.name.removesuffix("-launcher"), time.monotonic()
                )
            if len(launched) >= len(names):
                break
        stream.stop()
        done.set()

    watcher = threading.Thread(target=watch_launchers, daemon=True)
    watcher.start()
    time.sleep(1)
    submitted: dict[str, float] = {}
    custom = k8s.CustomObjectsApi(api)

    def submit(name: str) -> None:
        submitted[name] = time.monotonic()
        custom.create_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, PLURAL, job_manifest(name, args.workers)
        )

    cpu_at_start = cpu_seconds(operator.pid)
    start = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(submit, names))
    done.wait(args.timeout)
    finished = [name for name in names if name in launched]
    if operator.poll() is not None:
        raise RuntimeError(f"the operator exited with {operator.returncode}")
    after = settled(metrics_port, args.settle_timeout)
    cpu_ms_per_job = 1000 * (cpu_seconds(operator.pid) - cpu_at_start) / len(names)
    latencies = [launched[name] - submitted[name] for name in finished]
    span = max(launched[name] for name in finished) - start if finished else float("nan")
    conflicts = after.pop(CONFLICTS, 0) - before.pop(CONFLICTS, 0)
    reconciles = after.pop(RECONCILES, 0) - before.pop(RECONCILES, 0)
    writes = {
        f"{verb} {resource}": round((after.get(key, 0) - before.get(key, 0)) / len(names), 2)
        for key in sorted(set(after) | set(before))
        for verb, resource in [key]
        if after.get(key, 0) - before.get(key, 0) > 0
    }
    return {
        "jobs": len(names),
        "workers_per_job": args.workers,
        "jobs_with_all_children": len(finished),
        "jobs_per_second": round(len(finished) / span, 2),
        "latency_p50_s": round(statistics.median(latencies), 3),
        "latency_p99_s": round(percentile(latencies, 0.99), 3),
        "writes_per_job": writes,
        "writes_per_job_total": round(sum(writes.values()), 2),
        "conflicts_per_job": round(conflicts / len(names), 2),
        "reconciles_per_job": round(reconciles / len(names), 2),
        "peak_rss_mib": round(peak_rss_mib(operator.pid), 1),
        "cpu_ms_per_job": round(cpu_ms_per_job, 1),
        "operator_source": str(args.operator_source or REPO),
        "operator_flags": {
            "threadiness": args.threadiness,
            "kube_api_qps": args.kube_api_qps,
            "kube_api_burst": args.kube_api_burst,
        },
    }


def check(result: dict[str, Any]) -> list[str]:
    limits = yaml.safe_load(THRESHOLDS.read_text())
    breaches = []
    if result["jobs_with_all_children"] < result["jobs"]:
        breaches.append(f"only {result['jobs_with_all_children']} of {result['jobs']} jobs done")
    if result["writes_per_job_total"] > limits["max_writes_per_job"]:
        breaches.append(
            f"writes per job {result['writes_per_job_total']} > {limits['max_writes_per_job']}"
        )
    if result["conflicts_per_job"] > limits["max_conflicts_per_job"]:
        breaches.append(
            f"409s per job {result['conflicts_per_job']} > {limits['max_conflicts_per_job']}"
        )
    if result["peak_rss_mib"] > limits["max_peak_rss_mib"]:
        breaches.append(f"peak RSS {result['peak_rss_mib']} MiB > {limits['max_peak_rss_mib']}")
    if result["jobs_per_second"] < limits["min_jobs_per_second"]:
        breaches.append(f"{result['jobs_per_second']} jobs/s < {limits['min_jobs_per_second']}")
    return breaches


def exit_code(breaches: list[str]) -> int:
    """1 after printing each breach of the thresholds, 0 when there is none."""
    for breach in breaches:
        print(f"threshold breached: {breach}", file=sys.stderr)
    return 1 if breaches else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threadiness", type=int, default=4)
    parser.add_argument("--kube-api-qps", type=float, default=100)
    parser.add_argument("--kube-api-burst", type=int, default=200)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--kubeconfig", help="use this cluster instead of a local one")
    parser.add_argument("--out", type=Path, help="also write the result as JSON here")
    parser.add_argument("--cluster-name", default="bench", help="name of the local cluster")
    parser.add_argument(
        "--settle-timeout",
        type=float,
        default=120,
        help="seconds to wait, after the last launcher, for the operator's writes to stop",
    )
    parser.add_argument(
        "--operator-source",
        type=Path,
        help="run the operator from this source tree (e.g. an older commit) instead of this one",
    )
    parser.add_argument(
        "--operator-python",
        help=(
            "run the operator under this interpreter, e.g. a virtualenv of `pip install .` "
            "without the extra `curl`, where every request goes through urllib3"
        ),
    )
    args = parser.parse_args()
    started_cluster = not args.kubeconfig
    kubeconfig = args.kubeconfig or cluster_up(args.cluster_name, args.jobs * (args.workers + 1))
    try:
        result = run(args, kubeconfig)
    finally:
        if started_cluster:
            localcluster.down(args.cluster_name)
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return exit_code(check(result))


if __name__ == "__main__":
    sys.exit(main())
