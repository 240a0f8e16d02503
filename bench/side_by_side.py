"""Benchmark: this operator and upstream's (kubeflow/mpi-operator, Go) side by side, or
training-operator's (v1.8.1) for kubeflow.org/v1 jobs.

    python bench/side_by_side.py [--jobs 60] [--workers 2] [--rounds 2] [--threadiness 2]
        [--kube-api-qps 5] [--kube-api-burst 10] [--upstream-binary PATH] [--out FILE]
        [--operators ours upstream | --operators ours training-operator --api-version v1]
        [--no-restart]

One fresh local cluster (bench/create_jobs.py's, with an audit policy) serves every phase.
A round runs each operator once, alone, in a namespace of its own (the order alternates between
rounds: ours, upstream; upstream, ours; ...), with the same flags and leader election on, as one
ServiceAccount (bound to cluster-admin). A phase:

1. starts the operator and takes the time from the process's start to the Lease it acquires
   (``spec.acquireTime``; both operators campaign before they build their caches);
2. creates N MPIJobs of W workers as fast as the API server takes them and takes the time each
   job's launcher Job appears on a watch (jobs/s from the first submission to the last launcher;
   p50/p99 submission to launcher);
3. waits until every job shows the condition Running and the operator has then written nothing
   for 5 s (its queue may hold syncs back for longer), then reads its CPU seconds and peak RSS
   from /proc (CPU per job: the CPU spent from just before the first job to then, over N), and
   counts its requests since its start in the API server's audit log: writes and reads per job
   (Lease requests left out: they depend on time, not on jobs), 409 answers per job; beside
   them each job's pods as a watch sees them added (pods/s, p99 submission to all of a job's
   pods) and the API server's and etcd's CPU over the same stretch as the operator's;
4. (unless ``--no-restart``) stops the operator, deletes every job's ConfigMap, and starts it
   again: the resync time is from the new process's start until all N ConfigMaps exist again
   (only a sync of each job brings its ConfigMap back);
5. prints the phase's figures, then deletes the namespace and waits until it is gone (up to
   ``--namespace-timeout``), unless nothing runs after it: the cluster goes down then.

The raw ceiling follows the rounds: a plain client (no operator; bench/ceiling, client-go with no
client-side limit, built by bench/build-ceiling.sh) creates the objects the operator creates for
each job (Service, ConfigMap, Secret, worker Pods, launcher Job, as ``mpi-operator render``
gives them) with 4 and with 16 goroutines, each one whole job at a time. (A Python client is
slower than the operators themselves on 2 cores: it would bound nothing.)

Requests are attributed by the audit log: only the ServiceAccount's requests are logged, and only
one operator runs at a time, so the bytes the log grew by during a phase are that operator's.
The table gives the mean of the rounds for each operator and the ratio ours / upstream; ``--out``
writes every round's figures as JSON. ``--results FILE`` (docs/side-by-side.json for the
documentation) keeps the means of jobs/s, CPU per job and peak RSS there, in place of an earlier
run of the same flags, jobs and workers, and draws them against the number of jobs into FILE
with ``.svg`` (bench/side_by_side_plot.py; it redraws from FILE alone).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import create_jobs
import side_by_side_plot
import yaml
from create_jobs import GROUP, PLURAL, REPO, VERSION, localcluster
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch

from mpi_operator.operator.options import Options
from mpi_operator.runtime.client import (
    CONFIGMAPS,
    JOBS,
    PODS,
    SECRETS,
    SERVICES,
    Resource,
)
from mpi_operator.sdk.offline import render
from mpi_operator.testing.launch import LOOPBACK, operator_command

BUILD_UPSTREAM = REPO / "bench" / "build-upstream.sh"
BUILD_CEILING = REPO / "bench" / "build-ceiling.sh"
SA_NAMESPACE, SA_NAME = "bench-system", "mpi-operator"
SA_USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"
LEASE_NAME = "mpi-operator"  # both operators' Lease name
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
READ_VERBS = frozenset({"get", "list", "watch"})
# Upstream's health server listens on this port of every interface, whatever its flags say.
UPSTREAM_HEALTH_PORT = 8080
QUIET_SECONDS = 5.0
OPERATORS = ("ours", "upstream")
TRAINING_OPERATOR = "training-operator"
RESOURCE_OF_KIND = {
    "Service": SERVICES,
    "ConfigMap": CONFIGMAPS,
    "Secret": SECRETS,
    "Pod": PODS,
    "Job": JOBS,
}


def audit_policy() -> dict[str, Any]:
    """Log the ServiceAccount's requests (metadata only), nothing else. A watch is logged when
    it starts (ResponseStarted), every other request when it is answered."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [{"level": "Metadata", "users": [SA_USER]}, {"level": "None"}],
    }


# --- the audit log ------------------------------------------------------------------------


@dataclass
class Requests:
    """An operator's requests in a stretch of the audit log (Lease requests apart)."""

    writes: Counter[str] = field(default_factory=Counter)
    reads: Counter[str] = field(default_factory=Counter)
    conflicts: int = 0

    def add(self, event: dict[str, Any]) -> None:
        verb = event.get("verb", "")
        stage = event.get("stage", "")
        if stage != ("ResponseStarted" if verb == "watch" else "ResponseComplete"):
            return
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "")
        if resource == "leases":
            return
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        kind = f"{verb} {resource}"
        if verb in WRITE_VERBS:
            self.writes[kind] += 1
        elif verb in READ_VERBS:
            self.reads[kind] += 1
        if (event.get("responseStatus") or {}).get("code") == 409:
            self.conflicts += 1


def is_job_write(event: dict[str, Any]) -> bool:
    resource = (event.get("objectRef") or {}).get("resource")
    return event.get("verb") in WRITE_VERBS and resource != "leases"


def operator_events(lines: bytes) -> Iterator[dict[str, Any]]:
    """The ServiceAccount's events in whole lines of the audit log."""
    for line in lines.splitlines():
        if line.strip():
            event = json.loads(line)
            if (event.get("user") or {}).get("username") == SA_USER:
                yield event


class AuditLog:
    """The API server's audit log as one stream of bytes: the API server rotates the file at
    100 MB (renamed to ``audit-<time>.log``, oldest first by name), so an offset counts the
    rotated files' bytes before the current one's."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _files(self) -> list[tuple[Path, int]]:
        rotated = sorted(self.path.parent.glob(f"{self.path.stem}-*{self.path.suffix}"))
        return [(f, f.stat().st_size) for f in [*rotated, self.path] if f.exists()]

    def offset(self) -> int:
        return sum(size for _, size in self._files())

    def _read(self, start: int) -> bytes:
        """The bytes from ``start`` up to what is there now."""
        chunks = []
        base = 0
        for path, size in self._files():
            low = max(start - base, 0)
            if size > low:
                with path.open("rb") as log:
                    log.seek(low)
                    chunks.append(log.read(size - low))
            base += size
        return b"".join(chunks)

    def settle(self, start: int, timeout: float) -> Requests:
        """Wait until no write (but the Lease's) has been logged for QUIET_SECONDS; the
        operator's requests from ``start`` until then, counted as they are read."""
        counted = Requests()
        deadline = time.monotonic() + timeout
        seen = start
        last_write = time.monotonic()
        while time.monotonic() < deadline:
            data = self._read(seen)
            # A line the API server is still writing is read whole the next time.
            whole = data[: data.rfind(b"\n") + 1]
            seen += len(whole)
            for event in operator_events(whole):
                counted.add(event)
                if is_job_write(event):
                    last_write = time.monotonic()
            if time.monotonic() - last_write >= QUIET_SECONDS:
                break
            time.sleep(0.5)
        return counted


# --- the operators ------------------------------------------------------------------------


@dataclass(frozen=True)
class Flags:
    threadiness: int
    kube_api_qps: int
    kube_api_burst: int
    queue_rate_limit: float | None
    queue_burst: int | None

    def common(self, namespace: str) -> list[str]:
        flags = [
            f"--namespace={namespace}",
            f"--lock-namespace={namespace}",
            f"--threadiness={self.threadiness}",
            f"--kube-api-qps={self.kube_api_qps}",
            f"--kube-api-burst={self.kube_api_burst}",
            "--monitoring-port=0",
        ]
        if self.queue_rate_limit is not None:
            flags.append(f"--controller-queue-rate-limit={self.queue_rate_limit:g}")
        if self.queue_burst is not None:
            flags.append(f"--controller-queue-burst={self.queue_burst}")
        return flags


def ours_command(kubeconfig: str, namespace: str, flags: Flags) -> list[str]:
    # Leader election stays on (the operator's default), as upstream's always is.
    # JSON log lines: restart_resync reads each sync's key and time from them.
    options = Options(
        kubeconfig=kubeconfig,
        health_port=localcluster.free_port(),
        bind_address=LOOPBACK,
        log_format="json",
    )
    return operator_command(options, flags.common(namespace))


def upstream_command(binary: Path, kubeconfig: str, namespace: str, flags: Flags) -> list[str]:
    # Upstream always elects a leader; its health server is on :8080 (not configurable).
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", UPSTREAM_HEALTH_PORT)) == 0:
            raise RuntimeError(
                f"port {UPSTREAM_HEALTH_PORT} is taken: upstream's health server needs it"
            )
    return [str(binary), f"--kubeConfig={kubeconfig}", *flags.common(namespace)]


# training-operator's webhook certificate: the Secret its rotator fills (in its namespace,
# MY_POD_NAMESPACE) and the directory its webhook server reads, not configurable, which a
# kubelet fills from that Secret in a cluster.
TRAINING_OPERATOR_SECRET = "training-operator-webhook-cert"
TRAINING_OPERATOR_WEBHOOKS = "validator.training-operator.kubeflow.org"
TRAINING_OPERATOR_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
BUILD_TRAINING_OPERATOR = REPO / "hack" / "cluster" / "build-training-operator.sh"


def training_operator_command(
    binary: Path, namespace: str, flags: Flags, health_port: int
) -> list[str]:
    # Its MPIJob controller alone. No flag sets its client's QPS and burst (controller-runtime's
    # 20 and 30) or its queue's rate; it elects no leader unless asked, and out of a cluster it
    # could not (no namespace for its Lease): its /readyz says when it is ready.
    return [
        str(binary),
        "--enable-scheme=mpijob",
        f"--namespace={namespace}",
        f"--controller-threads={flags.threadiness}",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address={LOOPBACK}:{health_port}",
        f"--webhook-server-port={localcluster.free_port()}",
    ]


class Operator:
    """One operator process; its log in ``log_dir``; ``env`` added to the bench's environment
    (whose KUBECONFIG it never inherits)."""

    def __init__(
        self, label: str, command: list[str], log_path: Path, env: dict[str, str] | None = None
    ) -> None:
        self.label = label
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | (env or {})
        self.started = time.time()
        self.started_monotonic = time.monotonic()
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env
            )

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.label} exited with {self.process.returncode}")

    def usage(self) -> tuple[float, float]:
        """CPU seconds so far and peak RSS (MiB)."""
        return create_jobs.cpu_seconds(self.process.pid), create_jobs.peak_rss_mib(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@dataclass(frozen=True)
class Contender:
    """An operator the bench runs: its command for a namespace, what it adds to the
    environment, the kind of its ``<job>-launcher``, where it says it is ready (GET /readyz on
    ``readyz_port``; without one, the Lease it acquires) and what a kubelet would do beside its
    start (``beside``, in a thread)."""

    label: str
    command: Callable[[str], list[str]]
    env: dict[str, str] = field(default_factory=dict)
    launcher_kind: str = "Job"
    readyz_port: int | None = None
    beside: Callable[[], None] | None = None

    def start(self, namespace: str, log_path: Path) -> Operator:
        operator = Operator(self.label, self.command(namespace), log_path, self.env)
        if self.beside:
            threading.Thread(target=self.beside, daemon=True).start()
        return operator


def readyz_at(port: int, timeout: float) -> float:
    """When (wall clock) GET /readyz on ``port`` first answers 200, waiting for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    return time.time()
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"/readyz on port {port} not ready within {timeout:.0f} s")


# --- the cluster side ---------------------------------------------------------------------


class Cluster:
    def __init__(
        self, admin_kubeconfig: str, work: Path, control_plane: dict[str, int] | None = None
    ) -> None:
        self.admin_kubeconfig = admin_kubeconfig
        # The pids of the API server and etcd, whose CPU a phase reads beside the operator's.
        self.control_plane = control_plane or {}
        self.api = k8s_config.new_client_from_config(config_file=admin_kubeconfig)
        self.core = k8s.CoreV1Api(self.api)
        self.coordination = k8s.CoordinationV1Api(self.api)
        self.custom = k8s.CustomObjectsApi(self.api)
        self.batch = k8s.BatchV1Api(self.api)
        self.operator_kubeconfig = str(work / "operator.kubeconfig")

    def create_namespace(self, name: str) -> None:
        try:
            self.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
        except k8s.ApiException as error:
            if error.status != 409:
                raise

    def delete_namespace(self, name: str, timeout: float) -> None:
        try:
            self.core.delete_namespace(name)
        except k8s.ApiException as error:
            if error.status != 404:
                raise
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.core.read_namespace(name)
            except k8s.ApiException as error:
                if error.status == 404:
                    return
                raise
            time.sleep(1)
        print(f"namespace {name} still terminating after {timeout:.0f} s", file=sys.stderr)

    def make_operator_identity(self) -> None:
        """The ServiceAccount both operators run as, bound to cluster-admin, and a kubeconfig
        with a token for it."""
        self.create_namespace(SA_NAMESPACE)
        try:
            self.core.create_namespaced_service_account(
                SA_NAMESPACE, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name=SA_NAME))
            )
        except k8s.ApiException as error:
            if error.status != 409:
                raise
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "bench-mpi-operator"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": SA_NAME, "namespace": SA_NAMESPACE}],
        }
        try:
            k8s.RbacAuthorizationV1Api(self.api).create_cluster_role_binding(binding)
        except k8s.ApiException as error:
            if error.status != 409:
                raise
        token = self.core.create_namespaced_service_account_token(
            SA_NAME,
            SA_NAMESPACE,
            k8s.AuthenticationV1TokenRequest(
                spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=48 * 3600)
            ),
        ).status.token
        admin = yaml.safe_load(Path(self.admin_kubeconfig).read_text())
        context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
        cluster = next(c for c in admin["clusters"] if c["name"] == context["context"]["cluster"])
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [cluster],
            "users": [{"name": SA_NAME, "user": {"token": token}}],
            "contexts": [
                {"name": SA_NAME, "context": {"cluster": cluster["name"], "user": SA_NAME}}
            ],
            "current-context": SA_NAME,
        }
        Path(self.operator_kubeconfig).write_text(yaml.safe_dump(config))

    def ready_at(self, contender: Contender, namespace: str, timeout: float) -> float:
        if contender.readyz_port is not None:
            return readyz_at(contender.readyz_port, timeout)
        return self.lease_acquired_at(namespace, timeout)

    def launchers(self, contender: Contender) -> Callable[..., Any]:
        """The list call of the kind of the contender's launchers."""
        return (
            self.batch.list_namespaced_job
            if contender.launcher_kind == "Job"
            else (self.core.list_namespaced_pod)
        )

    def control_plane_cpu(self) -> float:
        """CPU seconds the API server and etcd have spent so far (NaN when their pids are not
        known)."""
        if not self.control_plane:
            return float("nan")
        return sum(create_jobs.cpu_seconds(pid) for pid in self.control_plane.values())

    def serve_training_operator(self) -> None:
        """What training-operator's install provides before it starts: the webhook
        configuration its certificate rotator keeps current and the Secret it fills."""
        webhooks = {"metadata": {"name": TRAINING_OPERATOR_WEBHOOKS}, "webhooks": []}
        secret = k8s.V1Secret(metadata=k8s.V1ObjectMeta(name=TRAINING_OPERATOR_SECRET))
        for create in (
            lambda: k8s.AdmissionregistrationV1Api(
                self.api
            ).create_validating_webhook_configuration(webhooks),
            lambda: self.core.create_namespaced_secret(SA_NAMESPACE, secret),
        ):
            try:
                create()
            except k8s.ApiException as error:
                if error.status != 409:
                    raise

    def mount_webhook_certificate(self, timeout: float = 120) -> None:
        """What the kubelet does for training-operator's pod: the Secret's files, once its
        rotator has written them, in the directory its webhook server reads."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data = self.core.read_namespaced_secret(TRAINING_OPERATOR_SECRET, SA_NAMESPACE).data
            if data and "tls.crt" in data and "tls.key" in data:
                TRAINING_OPERATOR_CERT_DIR.mkdir(parents=True, exist_ok=True)
                for name, value in data.items():
                    (TRAINING_OPERATOR_CERT_DIR / name).write_bytes(base64.b64decode(value))
                return
            time.sleep(0.05)

    def lease_acquired_at(self, namespace: str, timeout: float) -> float:
        """When the Lease in ``namespace`` was acquired (wall clock), waiting for it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                lease = self.coordination.read_namespaced_lease(LEASE_NAME, namespace)
            except k8s.ApiException as error:
                if error.status != 404:
                    raise
            else:
                if lease.spec.holder_identity and lease.spec.acquire_time:
                    acquired: datetime = lease.spec.acquire_time
                    return acquired.timestamp()
            time.sleep(0.05)
        raise RuntimeError(f"no Lease acquired in {namespace} within {timeout:.0f} s")

    def wait_running(self, namespace: str, jobs: int, timeout: float) -> int:
        """Wait until ``jobs`` MPIJobs show the condition Running (every write of a job's common
        path is then due); how many do."""
        deadline = time.monotonic() + timeout
        while True:
            listing = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
            running = sum(
                any(
                    c.get("type") == "Running" and c.get("status") == "True"
                    for c in (item.get("status") or {}).get("conditions") or []
                )
                for item in listing["items"]
            )
            if running >= jobs or time.monotonic() > deadline:
                return running
            time.sleep(2)

    def submit_jobs(
        self, namespace: str, names: list[str], workers: int, version: str = VERSION
    ) -> dict[str, float]:
        """Create the MPIJobs (through API ``version``) as fast as the API server takes them (8
        threads); when each was sent (monotonic), by name."""
        submitted: dict[str, float] = {}

        def submit(name: str) -> None:
            manifest = create_jobs.job_manifest(name, workers, version)
            manifest["metadata"]["namespace"] = namespace
            submitted[name] = time.monotonic()
            self.custom.create_namespaced_custom_object(GROUP, version, namespace, PLURAL, manifest)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(submit, names))
        return submitted

    def delete_lease(self, namespace: str) -> None:
        try:
            self.coordination.delete_namespaced_lease(LEASE_NAME, namespace)
        except k8s.ApiException as error:
            if error.status != 404:
                raise


def _watch_added(
    list_call: Callable[..., Any],
    namespace: str,
    added: Callable[[str], None],
    finished: Callable[[], bool],
    timeout: float,
) -> tuple[threading.Event, threading.Event]:
    """Lists, then watches, ``namespace`` in a thread, calling ``added`` with the name of every
    object listed or ADDED until ``finished()`` or ``timeout``; ``started`` is set once the watch
    is on, ``done`` at the end. Objects are read as plain JSON (a typed pod costs the bench more
    CPU than the operator's sync)."""
    started, done = threading.Event(), threading.Event()

    def run() -> None:
        stream = k8s_watch.Watch(return_type="object")
        try:
            listed = json.loads(list_call(namespace, _preload_content=False).data)
            for item in listed["items"]:
                added(item["metadata"]["name"])
            version = listed["metadata"]["resourceVersion"]
            started.set()
            end = time.monotonic() + timeout
            while not finished() and time.monotonic() < end:
                for event in stream.stream(
                    list_call,
                    namespace,
                    resource_version=version,
                    timeout_seconds=max(1, int(end - time.monotonic())),
                ):
                    version = event["raw_object"]["metadata"]["resourceVersion"]
                    if event["type"] == "ADDED":
                        added(event["raw_object"]["metadata"]["name"])
                    if finished():
                        break
        finally:
            stream.stop()
            started.set()
            done.set()

    threading.Thread(target=run, daemon=True).start()
    return started, done


def watch_children(
    list_call: Callable[..., Any], namespace: str, jobs: list[str], suffix: str, timeout: float
) -> tuple[dict[str, float], threading.Event, threading.Event]:
    """When (monotonic) each job's child ``<job><suffix>`` is ADDED, by job; ``started`` is set
    once the watch is on, ``done`` when all are seen or ``timeout`` passed."""
    wanted = set(jobs)
    seen: dict[str, float] = {}

    def added(name: str) -> None:
        key = name.removesuffix(suffix)
        if key in wanted:
            seen.setdefault(key, time.monotonic())

    started, done = _watch_added(
        list_call, namespace, added, lambda: len(seen) >= len(wanted), timeout
    )
    return seen, started, done


# A pod's name is its job's with one of these after it: a worker's, upstream's and ours' launcher
# (made by a Job: a random suffix), training-operator's launcher (a Pod of that name).
POD_OF_JOB = re.compile(r"^(?P<job>.+)-(worker-\d+|launcher(-[a-z0-9]+)?)$")


def watch_pods(
    core: k8s.CoreV1Api, namespace: str, jobs: list[str], per_job: int, timeout: float
) -> tuple[dict[str, float], threading.Event, threading.Event]:
    """When (monotonic) the last of each job's ``per_job`` pods is ADDED, by job."""
    wanted = set(jobs)
    counts: Counter[str] = Counter()
    complete: dict[str, float] = {}

    def added(name: str) -> None:
        match = POD_OF_JOB.match(name)
        if match and match["job"] in wanted:
            counts[match["job"]] += 1
            if counts[match["job"]] == per_job:
                complete[match["job"]] = time.monotonic()

    started, done = _watch_added(
        core.list_namespaced_pod, namespace, added, lambda: len(complete) >= len(wanted), timeout
    )
    return complete, started, done


@contextmanager
def audited_cluster(name: str, nodes: int, work: Path) -> Iterator[tuple[Cluster, AuditLog]]:
    """A fresh local cluster logging the operators' requests, the MPIJob CRD installed and the
    operators' identity made (its kubeconfig in ``work``); brought down on exit."""
    policy = work / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(audit_policy()))
    info = localcluster.up(
        name=name, nodes=nodes, node_cpu="64", node_memory="256Gi", audit_policy=policy
    )
    try:
        create_jobs.install_crd(str(info.kubeconfig))
        control_plane = {
            p.name: p.pid for p in info.processes if p.name in ("kube-apiserver", "etcd")
        }
        cluster = Cluster(str(info.kubeconfig), work, control_plane)
        cluster.make_operator_identity()
        yield cluster, AuditLog(localcluster.audit_log(name))
    finally:
        localcluster.down(name)


# --- one phase ----------------------------------------------------------------------------


def settled_usage(
    operator: Operator, audit: AuditLog, since: int, timeout: float
) -> tuple[Requests, float, float]:
    """Once the operator has stopped writing: its requests since ``since``, CPU s, peak RSS."""
    operator.check_alive()
    requests = audit.settle(since, timeout)
    cpu, rss = operator.usage()
    return requests, cpu, rss


def job_names(count: int) -> list[str]:
    return [f"bench-{i:05d}" for i in range(count)]


@dataclass(frozen=True)
class Bench:
    """What every phase works with: the cluster, its audit log, the command line."""

    cluster: Cluster
    audit: AuditLog
    args: argparse.Namespace


def run_phase(contender: Contender, namespace: str, bench: Bench) -> dict[str, Any]:
    cluster, audit, args = bench.cluster, bench.audit, bench.args
    cluster.create_namespace(namespace)
    names = job_names(args.jobs)
    log_path = args.work / f"{namespace}.log"
    print(f"--- {contender.label} in {namespace}", file=sys.stderr)
    offset_start = audit.offset()
    operator = contender.start(namespace, log_path)
    try:
        ready_at = cluster.ready_at(contender, namespace, args.ready_timeout)
        start_to_ready = ready_at - operator.started
        time.sleep(2)  # the caches sync (an empty namespace)
        operator.check_alive()
        cpu_at_ready, _ = operator.usage()
        control_plane_at_ready = cluster.control_plane_cpu()

        launched, watching, done = watch_children(
            cluster.launchers(contender), namespace, names, "-launcher", args.timeout
        )
        pods_done, pods_watching, all_pods = watch_pods(
            cluster.core, namespace, names, args.workers + 1, args.timeout
        )
        watching.wait(60)
        pods_watching.wait(60)
        start = time.monotonic()
        submitted = cluster.submit_jobs(namespace, names, args.workers, args.api_version)
        done.wait(args.timeout)
        all_pods.wait(args.timeout)
        finished = [n for n in names if n in launched]
        # Quiet is not enough: upstream's rate-limited queue can hold syncs back for longer.
        running = cluster.wait_running(namespace, len(names), args.settle_timeout)
        # From the process's start: its initial lists and watches are part of the cost.
        jobs_requests, cpu, rss = settled_usage(operator, audit, offset_start, args.settle_timeout)
        control_plane = cluster.control_plane_cpu() - control_plane_at_ready
        operator.stop()
        restarted = restart_without_configmaps(contender, namespace, bench) if args.restart else {}
    finally:
        operator.stop()

    latencies = [launched[n] - submitted[n] for n in finished]
    span = max(launched[n] for n in finished) - start if finished else float("nan")
    pods_latencies = [pods_done[n] - submitted[n] for n in names if n in pods_done]
    pods_span = max(pods_done.values()) - start if pods_done else float("nan")
    count = len(names)
    operator_cpu = cpu - cpu_at_ready
    return {
        "operator": contender.label,
        "namespace": namespace,
        "jobs": count,
        "jobs_with_all_children": len(finished),
        "jobs_running": running,
        "jobs_per_second": len(finished) / span,
        "latency_p50_s": statistics.median(latencies) if latencies else float("nan"),
        "latency_p99_s": create_jobs.percentile(latencies, 0.99) if latencies else float("nan"),
        "writes_per_job": sum(jobs_requests.writes.values()) / count,
        "reads_per_job": sum(jobs_requests.reads.values()) / count,
        "conflicts_per_job": jobs_requests.conflicts / count,
        "writes_by_kind_per_job": {
            kind: n / count for kind, n in sorted(jobs_requests.writes.items())
        },
        "reads_by_kind_per_job": {
            kind: n / count for kind, n in sorted(jobs_requests.reads.items())
        },
        "jobs_with_all_pods": len(pods_latencies),
        "pods_per_second": len(pods_latencies) * (args.workers + 1) / pods_span,
        "pods_latency_p99_s": (
            create_jobs.percentile(pods_latencies, 0.99) if pods_latencies else float("nan")
        ),
        "cpu_seconds": cpu,
        "cpu_ms_per_job": 1000 * operator_cpu / count,
        # The API server's and etcd's CPU over the same stretch: every other client is idle.
        "control_plane_cpu_seconds": control_plane,
        "operator_cpu_share": operator_cpu / (operator_cpu + control_plane),
        "peak_rss_mib": rss,
        "start_to_ready_s": start_to_ready,
        **restarted,
    }


def restart_without_configmaps(
    contender: Contender, namespace: str, bench: Bench
) -> dict[str, Any]:
    """Every job's ConfigMap deleted, the operator started again over the N jobs: each
    ConfigMap comes back only through its job's sync."""
    cluster, audit, args = bench.cluster, bench.audit, bench.args
    names = job_names(args.jobs)
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(
                lambda n: cluster.core.delete_namespaced_config_map(f"{n}-config", namespace),
                names,
            )
        )
    cluster.delete_lease(namespace)
    time.sleep(1)
    recreated, watching, resynced = watch_children(
        cluster.core.list_namespaced_config_map, namespace, names, "-config", args.timeout
    )
    watching.wait(60)
    offset_restart = audit.offset()
    operator = contender.start(namespace, args.work / f"{namespace}.log")
    try:
        restart_ready_at = cluster.ready_at(contender, namespace, args.ready_timeout)
        resynced.wait(args.timeout)
        resync_done = [n for n in names if n in recreated]
        restart_requests, restart_cpu, restart_rss = settled_usage(
            operator, audit, offset_restart, args.settle_timeout
        )
    finally:
        operator.stop()
    return {
        "restart_start_to_ready_s": restart_ready_at - operator.started,
        "resync_s": (
            max(recreated[n] for n in resync_done) - operator.started_monotonic
            if len(resync_done) == len(names)
            else float("nan")
        ),
        "resynced_jobs": len(resync_done),
        "restart_requests": sum(restart_requests.writes.values())
        + sum(restart_requests.reads.values()),
        "restart_cpu_seconds": restart_cpu,
        "restart_peak_rss_mib": restart_rss,
    }


# --- the raw ceiling ----------------------------------------------------------------------


def ceiling_objects(name: str, namespace: str, workers: int) -> list[tuple[Resource, Any]]:
    """What the operator creates for one job, without owner references (no owner exists)."""
    manifest = create_jobs.job_manifest(name, workers)
    manifest["metadata"]["namespace"] = namespace
    objects = []
    for obj in render(manifest):
        obj["metadata"].pop("ownerReferences", None)
        objects.append((RESOURCE_OF_KIND[obj["kind"]], obj))
    return objects


def raw_ceiling(
    cluster: Cluster, binary: Path, clients: int, args: argparse.Namespace
) -> dict[str, Any]:
    """``clients`` goroutines of bench/ceiling, each creating one job's objects at a time."""
    namespace = f"ceiling-{clients}"
    cluster.create_namespace(namespace)
    work = [
        [
            {
                "group": resource.group,
                "version": resource.version,
                "resource": resource.plural,
                "namespace": namespace,
                "object": obj,
            }
            for resource, obj in ceiling_objects(f"raw-{i:05d}", namespace, args.workers)
        ]
        for i in range(args.jobs)
    ]
    objects_file = args.work / f"{namespace}.json"
    objects_file.write_text(json.dumps(work))
    result = subprocess.run(
        [
            str(binary),
            f"-kubeconfig={cluster.admin_kubeconfig}",
            f"-objects={objects_file}",
            f"-clients={clients}",
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=args.timeout,
    )
    measured = json.loads(result.stdout)
    cluster.delete_namespace(namespace, args.namespace_timeout)
    return {
        "clients": clients,
        "objects": measured["objects"],
        "objects_per_second": measured["objects"] / measured["seconds"],
    }


# --- the report ---------------------------------------------------------------------------

# A row of a comparison table: its title, the key of the figure in each phase, its format.
Row = tuple[str, str, str]

ROWS: tuple[Row, ...] = (
    ("jobs/s", "jobs_per_second", "{:.2f}"),
    ("p50 submission to launcher (s)", "latency_p50_s", "{:.2f}"),
    ("p99 submission to launcher (s)", "latency_p99_s", "{:.2f}"),
    ("API writes per job", "writes_per_job", "{:.2f}"),
    ("API reads per job", "reads_per_job", "{:.2f}"),
    ("409s per job", "conflicts_per_job", "{:.2f}"),
    ("operator CPU, start to settled (s)", "cpu_seconds", "{:.1f}"),
    ("CPU per job (ms)", "cpu_ms_per_job", "{:.1f}"),
    ("peak RSS (MiB)", "peak_rss_mib", "{:.0f}"),
    ("pods/s created", "pods_per_second", "{:.1f}"),
    ("p99 submission to all pods created (s)", "pods_latency_p99_s", "{:.2f}"),
    ("API server and etcd CPU, jobs (s)", "control_plane_cpu_seconds", "{:.1f}"),
    ("operator's share of the CPU", "operator_cpu_share", "{:.0%}"),
    ("start to ready (s)", "start_to_ready_s", "{:.2f}"),
    ("restart: start to ready (s)", "restart_start_to_ready_s", "{:.2f}"),
    ("restart: resync of N jobs (s)", "resync_s", "{:.2f}"),
    ("restart: peak RSS (MiB)", "restart_peak_rss_mib", "{:.0f}"),
)


def comparison_header(peer: str = "upstream") -> tuple[str, str]:
    return (f"| metric | ours | {peer} | ours / {peer} |", "|---|---|---|---|")


def peer_of(phases: list[dict[str, Any]]) -> str:
    """The operator ours is compared with in these phases."""
    return next((p["operator"] for p in phases if p["operator"] != "ours"), "upstream")


def average(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def mean(phases: list[dict[str, Any]], key: str) -> float:
    """Over the phases that measured ``key`` (NaN when none did)."""
    return average([p[key] for p in phases if key in p])


def of_operator(phases: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    return [p for p in phases if p["operator"] == label]


def comparison_rows(phases: list[dict[str, Any]], rows: tuple[Row, ...]) -> list[str]:
    """``| title | ours | peer | ours / peer |`` for each row a phase measured (a run with
    ``--no-restart`` has no restart rows): the means over each operator's phases and their
    ratio."""
    lines = []
    peer = peer_of(phases)
    for title, key, fmt in rows:
        if not any(key in p for p in phases):
            continue
        a, b = (mean(of_operator(phases, who), key) for who in ("ours", peer))
        ratio = f"{a / b:.2f}x" if b else "n/a"
        lines.append(f"| {title} | {fmt.format(a)} | {fmt.format(b)} | {ratio} |")
    return lines


def by_kind_table(phases: list[dict[str, Any]], column: str, parts: list[str], fmt: str) -> str:
    """``| <column> | ours | upstream |``: each request kind (verb and resource) in the phases'
    ``parts`` (counts by kind), part after part, the mean over each operator's phases (a phase
    without the kind counts 0)."""
    peer = peer_of(phases)
    lines = [f"| {column} | ours | {peer} |", "|---|---|---|"]
    for part in parts:
        for kind in sorted({k for p in phases for k in p[part]}):
            a, b = (
                average([p[part].get(kind, 0.0) for p in of_operator(phases, who)])
                for who in ("ours", peer)
            )
            lines.append(f"| {kind} | {fmt.format(a)} | {fmt.format(b)} |")
    return "\n".join(lines)


def table(phases: list[dict[str, Any]], ceiling: list[dict[str, Any]], writes: float) -> str:
    lines = [*comparison_header(peer_of(phases)), *comparison_rows(phases, ROWS)]
    # A whole job costs the API server the user's create and the operator's writes.
    per_job = writes + 1
    ours_rate = mean(of_operator(phases, "ours"), "jobs_per_second")
    for result in ceiling:
        jobs = result["objects_per_second"] / per_job
        lines.append(
            f"| raw ceiling, {result['clients']} clients: objects/s; whole jobs/s at "
            f"{per_job:.1f} writes | {result['objects_per_second']:.0f}; {jobs:.1f} | | "
            f"ours at {ours_rate / jobs:.0%} of it |"
        )
    return "\n".join(lines)


def check(phases: list[dict[str, Any]]) -> list[str]:
    """Breaches of bench/thresholds.yaml's ``side_by_side`` limits (ours, mean of the rounds)."""
    limits = yaml.safe_load(create_jobs.THRESHOLDS.read_text())["side_by_side"]
    peer = peer_of(phases)
    ours, theirs = of_operator(phases, "ours"), of_operator(phases, peer)
    breaches = [
        f"{p['operator']} in {p['namespace']}: {what}"
        for p in phases
        for what, bad in (
            (
                f"{p['jobs_with_all_children']} of {p['jobs']} jobs done",
                p["jobs_with_all_children"] < p["jobs"],
            ),
            (
                f"{p.get('resynced_jobs')} of {p['jobs']} jobs resynced",
                p.get("resynced_jobs", p["jobs"]) < p["jobs"],
            ),
            (f"{p['jobs_running']} of {p['jobs']} jobs running", p["jobs_running"] < p["jobs"]),
        )
        if bad
    ]
    writes = mean(ours, "writes_per_job")
    if writes > limits["max_writes_per_job"]:
        breaches.append(f"writes per job {writes:.2f} > {limits['max_writes_per_job']}")
    conflicts = mean(ours, "conflicts_per_job")
    if conflicts > limits["max_conflicts_per_job"]:
        breaches.append(f"409s per job {conflicts:.2f} > {limits['max_conflicts_per_job']}")
    ratio = mean(ours, "jobs_per_second") / mean(theirs, "jobs_per_second")
    if theirs and ratio < limits["min_jobs_per_second_ratio"]:
        breaches.append(f"jobs/s {ratio:.2f}x {peer}'s < {limits['min_jobs_per_second_ratio']}x")
    return breaches


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "?",
    )
    load = os.getloadavg()
    return f"{os.cpu_count()} cores ({cpu}); load average at the end {load[0]:.1f}"


def built(script: Path) -> Path:
    """The binary a build script prints the path of (building it when it is not cached)."""
    # Its progress (stderr) shows: a cold build takes minutes.
    run = subprocess.run([str(script)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(run.stdout.strip())


def add_job_and_operator_flags(parser: argparse.ArgumentParser) -> None:
    """Workers per job and the flags both operators get (default: upstream's defaults)."""
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threadiness", type=int, default=2)
    parser.add_argument("--kube-api-qps", type=int, default=5)
    parser.add_argument("--kube-api-burst", type=int, default=10)


def add_bench_flags(
    parser: argparse.ArgumentParser, cluster_name: str, operators: tuple[str, ...] = OPERATORS
) -> None:
    """Which of ``operators`` run, upstream's binary, the cluster and the waits: both
    benchmarks'."""
    parser.add_argument(
        "--upstream-binary",
        type=Path,
        help="upstream's mpi-operator binary (default: bench/build-upstream.sh builds it)",
    )
    parser.add_argument("--operators", nargs="+", choices=operators, default=["ours", "upstream"])
    parser.add_argument("--cluster-name", default=cluster_name)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--ready-timeout", type=float, default=120)
    parser.add_argument("--settle-timeout", type=float, default=300)


def work_dir(prefix: str) -> Path:
    """A fresh directory for the operators' logs and the audit policy (named on stderr)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    print(f"operator logs and the audit policy in {work}", file=sys.stderr)
    return work


def interleaved(operators: list[str], rounds: int) -> Iterator[tuple[int, str]]:
    """``(round, operator)`` in run order: ours, upstream; upstream, ours; and so on, so that
    neither always runs on the fresher cluster."""
    for round_number in range(rounds):
        for label in operators if round_number % 2 == 0 else operators[::-1]:
            yield round_number, label


def publish(report: dict[str, Any], out: Path | None, heading: str, flags: Flags) -> None:
    """Writes the report as JSON (when asked) and prints its heading with the common flags."""
    if out:
        out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{heading}, flags: {' '.join(flags.common('<ns>')[2:])}; {report['machine']}")


def contender(label: str, cluster: Cluster, flags: Flags, args: argparse.Namespace) -> Contender:
    """How the bench runs the operator named ``label`` (building a peer's binary when it is not
    cached)."""
    kubeconfig = cluster.operator_kubeconfig
    if label == "ours":
        create_jobs.compile_operator()
        return Contender(label, lambda ns: ours_command(kubeconfig, ns, flags))
    if label == "upstream":
        binary = args.upstream_binary or built(BUILD_UPSTREAM)
        return Contender(label, lambda ns: upstream_command(binary, kubeconfig, ns, flags))
    trainer = built(BUILD_TRAINING_OPERATOR)
    cluster.serve_training_operator()
    port = localcluster.free_port()
    return Contender(
        label,
        lambda ns: training_operator_command(trainer, ns, flags, port),
        env={"KUBECONFIG": kubeconfig, "MY_POD_NAMESPACE": SA_NAMESPACE},
        launcher_kind="Pod",
        readyz_port=port,
        beside=cluster.mount_webhook_certificate,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument(
        "--rounds", type=int, default=side_by_side_plot.DEFAULT_ROUNDS, help="runs of each operator"
    )
    add_job_and_operator_flags(parser)
    parser.add_argument(
        "--controller-queue-rate-limit",
        type=float,
        help="passed to both (they govern different things: docs/differences.md C15)",
    )
    parser.add_argument("--controller-queue-burst", type=int)
    parser.add_argument(
        "--ceiling-clients",
        type=int,
        nargs="*",
        default=[4, 16],
        help="concurrent clients (goroutines) of the raw ceiling (none: skip it)",
    )
    add_bench_flags(parser, "side-by-side", (*OPERATORS, TRAINING_OPERATOR))
    parser.add_argument(
        "--api-version",
        choices=["v2beta1", "v1"],
        default=VERSION,
        help="the version the jobs are written through (training-operator serves v1 alone)",
    )
    parser.add_argument(
        "--restart",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure a restart after deleting every job's ConfigMap (step 4)",
    )
    parser.add_argument("--namespace-timeout", type=float, default=600)
    parser.add_argument("--out", type=Path, help="also write every phase's figures as JSON here")
    parser.add_argument(
        "--results",
        type=Path,
        help="keep this run's means in this file of runs and redraw its plot (FILE.svg)",
    )
    args = parser.parse_args()

    if (TRAINING_OPERATOR in args.operators) != (args.api_version == "v1"):
        parser.error("training-operator serves v1 jobs alone: give it --api-version v1")
    if "upstream" in args.operators and args.api_version == "v1":
        parser.error("upstream (v0.8.2) serves v2beta1 jobs alone")
    ceiling_binary = built(BUILD_CEILING)
    flags = Flags(
        args.threadiness,
        args.kube_api_qps,
        args.kube_api_burst,
        args.controller_queue_rate_limit,
        args.controller_queue_burst,
    )
    args.work = work_dir("side-by-side-")
    nodes = args.jobs * (args.workers + 1) // 100 + 2
    phases: list[dict[str, Any]] = []
    ceiling: list[dict[str, Any]] = []
    with audited_cluster(args.cluster_name, nodes, args.work) as (cluster, audit):
        bench = Bench(cluster, audit, args)
        contenders = {label: contender(label, cluster, flags, args) for label in args.operators}
        order = list(interleaved(args.operators, args.rounds))
        for position, (round_number, label) in enumerate(order, 1):
            namespace = f"{label}-{round_number}"
            phase = run_phase(contenders[label], namespace, bench)
            # Printed before the clean-up: deleting a namespace of thousands of pods can take
            # longer than the phase, and a run cut short there keeps what it measured.
            print(json.dumps(phase), file=sys.stderr, flush=True)
            phases.append(phase)
            # The cluster is brought down after the last phase; a phase or a ceiling after
            # this one runs on a cluster without its objects.
            if position < len(order) or args.ceiling_clients:
                cluster.delete_namespace(namespace, args.namespace_timeout)
        for clients in args.ceiling_clients:
            ceiling.append(raw_ceiling(cluster, ceiling_binary, clients, args))
    report = {
        "flags": flags.common("<namespace>"),
        "jobs": args.jobs,
        "workers_per_job": args.workers,
        "rounds": args.rounds,
        "api_version": args.api_version,
        "binaries": {c.label: c.command("<namespace>")[0] for c in contenders.values()},
        "machine": machine(),
        "phases": phases,
        "ceiling": ceiling,
    }
    heading = f"N={args.jobs} jobs x {args.workers} workers, {args.rounds} rounds (interleaved)"
    publish(report, args.out, heading, flags)
    if args.results and phases:
        setting = side_by_side_plot.setting_label(
            flags.threadiness,
            flags.kube_api_qps,
            flags.kube_api_burst,
            flags.queue_rate_limit,
            flags.queue_burst,
        )
        side_by_side_plot.record(args.results, side_by_side_plot.summary(report, setting))
        plot = side_by_side_plot.render(args.results, args.results.with_suffix(".svg"))
        print(f"results kept in {args.results}, plotted in {plot}")
    if not phases:  # --rounds 0: the ceiling alone
        for result in ceiling:
            print(f"raw ceiling, {result['clients']} clients: {result['objects_per_second']:.0f}/s")
        return 0
    ours_writes = mean(of_operator(phases, "ours"), "writes_per_job")
    print(table(phases, ceiling, ours_writes))
    print()
    print(by_kind_table(phases, "write", ["writes_by_kind_per_job"], "{:.2f}"))
    return create_jobs.exit_code(check(phases))


if __name__ == "__main__":
    sys.exit(main())
