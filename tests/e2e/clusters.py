"""Clusters for the end-to-end tests, whatever provides them.

Providers, chosen by environment:

* default: local clusters from hack/cluster/localcluster.py (kwok fake nodes,
  real control plane, real gang schedulers), one per scheduler flavour, started
  on first use and stopped at the end of the session.
* ``USE_EXISTING_CLUSTER=1``: the cluster in ``KUBECONFIG`` serves every
  flavour; nothing is started or stopped. Flavours whose CRDs are missing, and
  tests that need fake nodes on a cluster without kwok, are skipped.
* ``E2E_PROVIDER=kind``: kind clusters with Volcano / scheduler-plugins
  installed from their release manifests. Skipped when ``docker info`` fails.

What operator tests reuse: the ``local_cluster`` factory (or the ``cluster``,
``volcano_cluster`` and ``coscheduling_cluster`` shortcuts) returning an
:class:`E2ECluster` (kubeconfig path, API client, ``add_node``), the
``namespace_factory`` / ``namespace`` fixtures, ``node_factory`` for nodes
that are removed after the test, :func:`wait_until`, and :func:`sim_pod_spec`
for pods whose outcome the kwok simulation (or a real kubelet) decides.

Every local cluster's API server logs the requests of ``AUDITED_NAMESPACE``'s ServiceAccounts
(and nobody else's) to ``E2ECluster.audit_log``; kind and existing clusters have none.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

import hack.cluster as localcluster
from hack.cluster.state import clusters_root
from mpi_operator.sdk import MPIJobClient

REPO = Path(__file__).resolve().parents[2]
CLUSTER_TOOL = REPO / "hack" / "cluster" / "localcluster.py"

# Whether Kueue is installed.
KUEUE_CRD = "clusterqueues.kueue.x-k8s.io"
# Kueue's waitForPodsReady timeout on the local clusters: long enough for simulated pods to
# start on a loaded machine, short enough for a test to see a gang that cannot start evicted.
KUEUE_PODS_READY_TIMEOUT = 20
SIM = "sim.mpi-operator.dev/"
# Parameters that run a test on one gang flavour, marked so `-m volcano` selects it.
VOLCANO = pytest.param("volcano", id="volcano", marks=pytest.mark.volcano)
COSCHEDULING = pytest.param("scheduler-plugins", id="coscheduling", marks=pytest.mark.coscheduling)
KOORDINATOR = pytest.param("koordinator", id="koordinator", marks=pytest.mark.koordinator)
# kube-scheduler gang-scheduling the PodGroups of Kubernetes' own API (the 1.37 profile).
NATIVE = pytest.param("native", id="native", marks=pytest.mark.native)
NATIVE_PODGROUP = ("scheduling.k8s.io", "v1beta1", "podgroups")
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# A namespace where the API server's PodSecurity admission refuses any pod beyond the
# restricted standard.
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
UP_TIMEOUT = float(os.environ.get("E2E_CLUSTER_UP_TIMEOUT", "600"))
# The local clusters' API servers log the requests of this namespace's ServiceAccounts, and of
# nobody else, so the log costs nothing until a test runs an identity there to see what it asks.
AUDITED_NAMESPACE = "rbac-audit"
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    # A request is logged when answered; a watch, also when it starts.
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "userGroups": [f"system:serviceaccounts:{AUDITED_NAMESPACE}"]},
        {"level": "None"},
    ],
}

T = TypeVar("T")


# The cluster tool's schedulers, which every provider's clusters are named after.
FLAVOURS: tuple[str, ...] = tuple(localcluster.RECIPES)


def run_cluster_tool(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """hack/cluster/localcluster.py with ``args``, output captured, never raising on failure."""
    return subprocess.run(
        [sys.executable, str(CLUSTER_TOOL), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def cluster_prefix() -> str:
    """The first part of this session's cluster names: `E2E_CLUSTER_PREFIX` (default `e2e`),
    then the worker's number when pytest-xdist runs modules side by side (`e2e0`, `e2e1`), so
    no two workers share a cluster. One character more, no more: a real node's kubelet socket
    lies under the cluster's directory, and a Unix socket's path holds at most 107 bytes."""
    prefix = os.environ.get("E2E_CLUSTER_PREFIX", "e2e")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return prefix + worker.removeprefix("gw")


def claim_cluster_names() -> IO[str]:
    """Holds this session's cluster names until the returned file is closed, or stops the
    session at once if another session holds them.

    Two sessions with one prefix would start, replace and stop each other's clusters: their
    tests then fail with unrelated errors (a CRD gone, a certificate that no longer verifies).
    The lock is the kernel's, so it ends with the process however the process ends."""
    prefix = cluster_prefix()
    clusters_root().mkdir(parents=True, exist_ok=True)
    path = clusters_root() / f".{prefix}.session"
    claim = path.open("a+")
    try:
        fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        claim.seek(0)
        holder = claim.read().strip() or "unknown"
        claim.close()
        pytest.exit(
            f"the clusters named {prefix}-* belong to another test session ({holder}); wait for "
            "it to end, or give this one other names with E2E_CLUSTER_PREFIX",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
    claim.truncate(0)
    claim.write(f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n")
    claim.flush()
    return claim


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float = 30.0,
    interval: float = 0.25,
    message: str | Callable[[], str] = "condition",
) -> T:
    """Polls `predicate` until it returns a truthy value, which is returned.

    API errors count as "not yet" so that a check can race object creation.
    On timeout the test fails with `message` (a callable is evaluated then, so
    it can describe the state that was seen).
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except ApiException as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            suffix = f" (last API error: {last_error})" if last_error else ""
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {text}{suffix}")
        time.sleep(interval)


def sim_pod_spec(
    *,
    exit_code: int | None = None,
    run_for: str | None = None,
    hold: bool = False,
    cpu: str = "100m",
    memory: str = "64Mi",
    gpu: int = 0,
    restart_policy: str = "Never",
    scheduler_name: str | None = None,
    name: str = "main",
) -> tuple[dict[str, str], dict[str, Any]]:
    """Annotations and a pod spec whose outcome is the same under kwok and kind.

    kwok acts on the ``sim.mpi-operator.dev/`` annotations; a real kubelet runs
    the equivalent shell command instead.
    """
    annotations: dict[str, str] = {}
    script = "sleep infinity"
    seconds = run_for or "1s"
    if exit_code is not None:
        annotations[SIM + "exit-code"] = str(exit_code)
        script = f"sleep {_seconds(seconds)}; exit {exit_code}"
    elif hold:
        annotations[SIM + "hold"] = "true"
    elif run_for is not None:
        script = f"sleep {_seconds(seconds)}"
    if run_for is not None:
        annotations[SIM + "run-for"] = run_for
    limits = {"cpu": cpu, "memory": memory}
    if gpu:
        limits["nvidia.com/gpu"] = str(gpu)
    spec: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": name,
                "image": "busybox:1.36",
                "command": ["sh", "-c", script],
                "resources": {"requests": dict(limits), "limits": limits},
            }
        ],
    }
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    return annotations, spec


def _seconds(duration: str) -> int:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for unit in ("ms", "s", "m", "h"):
        if duration.endswith(unit) and duration[: -len(unit)].replace(".", "").isdigit():
            return max(1, round(float(duration[: -len(unit)]) * units[unit]))
    raise ValueError(f"unsupported duration {duration!r}")


@dataclass
class E2ECluster:
    """A cluster the tests talk to, whatever provider made it."""

    name: str
    flavour: str
    kubeconfig: str
    provider: str
    api: k8s.ApiClient
    state: dict[str, Any] = field(default_factory=dict)
    # The API server's log of AUDITED_NAMESPACE's requests; None where none can be read.
    audit_log: Path | None = None

    @property
    def scheduler_name(self) -> str:
        """schedulerName that routes pods to this flavour's scheduler."""
        return localcluster.RECIPES[self.flavour].scheduler_name

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api)

    @property
    def batch(self) -> k8s.BatchV1Api:
        return k8s.BatchV1Api(self.api)

    @property
    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.api)

    @property
    def rbac(self) -> k8s.RbacAuthorizationV1Api:
        return k8s.RbacAuthorizationV1Api(self.api)

    @property
    def jobs(self) -> MPIJobClient:
        """The SDK's MPIJob client on this cluster, as its admin."""
        client = self.state.get("sdk")
        if client is None:
            client = self.state["sdk"] = MPIJobClient(self.kubeconfig)
        assert isinstance(client, MPIJobClient)
        return client

    @property
    def fake_nodes(self) -> bool:
        """Whether Node objects created by tests become Ready (kwok manages them)."""
        if self.provider == "local":
            return True
        nodes = self.core.list_node().items
        return any(
            n.metadata is not None and (n.metadata.annotations or {}).get(KWOK_NODE_ANNOTATION)
            for n in nodes
        )

    def require_simulation(self) -> None:
        """Skips the test unless kwok simulates this cluster's pods (annotations act)."""
        if not self.fake_nodes:
            pytest.skip(f"{self.provider} cluster {self.name} runs real containers, not kwok")

    def add_node(
        self,
        name: str,
        cpu: str = "8",
        memory: str = "32Gi",
        gpu: int = 0,
        labels: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> str:
        """Creates a fake node with the given capacity and waits until it is Ready."""
        if not self.fake_nodes:
            pytest.skip(f"{self.provider} cluster {self.name} has no kwok to simulate nodes")
        capacity = {"cpu": cpu, "memory": memory, "pods": "110"}
        if gpu:
            capacity["nvidia.com/gpu"] = str(gpu)
        body = k8s.V1Node(
            metadata=k8s.V1ObjectMeta(
                name=name,
                annotations={KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                labels={
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    **(labels or {}),
                },
            ),
            # No addresses: kwok reports 127.0.0.1, never a routable IP.
            status=k8s.V1NodeStatus(capacity=capacity, allocatable=dict(capacity)),
        )
        self.core.create_node(body)

        def ready() -> bool:
            status = self.core.read_node(name).status
            conditions = (status.conditions if status else None) or []
            return any(c.type == "Ready" and c.status == "True" for c in conditions)

        wait_until(ready, timeout, message=f"node {name} to become Ready")
        return name

    def to_dict(self, obj: object) -> Any:
        """An API model as the camelCase dict the API server speaks."""
        return self.api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]

    def create_pod(self, namespace: str, manifest: dict[str, Any]) -> None:
        body = k8s.V1Pod.from_dict(manifest)
        assert body is not None
        self.core.create_namespaced_pod(namespace, body)

    def create_job(self, namespace: str, manifest: dict[str, Any]) -> None:
        body = k8s.V1Job.from_dict(manifest)
        assert body is not None
        self.batch.create_namespaced_job(namespace, body)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        pod: dict[str, Any] = self.to_dict(self.core.read_namespaced_pod(name, namespace))
        return pod

    def list_pods(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        pods = self.core.list_namespaced_pod(namespace, label_selector=label_selector or None)
        return [self.to_dict(p) for p in pods.items]

    def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        job: dict[str, Any] = self.to_dict(self.batch.read_namespaced_job(name, namespace))
        return job

    def events_for(self, namespace: str, name: str) -> list[dict[str, Any]]:
        found = self.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}"
        )
        return [self.to_dict(e) for e in found.items]

    def create_custom(
        self, group: str, version: str, namespace: str, plural: str, body: dict[str, Any]
    ) -> None:
        self.custom.create_namespaced_custom_object(group, version, namespace, plural, body)

    def get_custom(
        self, group: str, version: str, namespace: str, plural: str, name: str
    ) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(  # type: ignore[assignment]
            group, version, namespace, plural, name
        )
        return obj

    def create_namespace(self, name: str, restricted: bool = False) -> str:
        """A namespace labelled ``e2e``, once pods can be created in it; ``restricted``
        enforces the restricted Pod Security Standard in it."""
        labels = {"e2e": "true", **(RESTRICTED if restricted else {})}
        self.core.create_namespace(
            k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name, labels=labels))
        )

        def has_default_sa() -> bool:
            # Pods are refused until the namespace's default ServiceAccount exists.
            self.core.read_namespaced_service_account("default", name)
            return True

        wait_until(has_default_sa, 30, message=f"default ServiceAccount in {name}")
        return name

    def delete_namespace(self, name: str) -> None:
        with contextlib.suppress(ApiException):
            self.core.delete_namespace(name, propagation_policy="Background")

    def delete_node(self, name: str) -> None:
        with contextlib.suppress(ApiException):
            self.core.delete_node(name)

    def has_crd(self, name: str) -> bool:
        try:
            k8s.ApiextensionsV1Api(self.api).read_custom_resource_definition(name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def serves(self, group: str, version: str, plural: str) -> bool:
        """Whether the API server serves ``plural`` of ``group/version``."""
        try:
            found = self.api.call_api(
                f"/apis/{group}/{version}",
                "GET",
                response_type="object",
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
            )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return any(r.get("name") == plural for r in found.get("resources") or [])


def _api_client(kubeconfig: str) -> k8s.ApiClient:
    api: k8s.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=kubeconfig
    )
    return api


def _docker_available() -> tuple[bool, str]:
    if shutil.which("docker") is None:
        return False, "the docker CLI is not installed"
    try:
        res = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"`docker info` failed: {exc}"
    if res.returncode != 0:
        reason = (res.stderr or res.stdout).strip().splitlines()
        return False, f"`docker info` failed: {reason[-1] if reason else res.returncode}"
    return True, ""


class ClusterProvider:
    """Starts (or finds) one cluster per flavour and stops what it started."""

    def __init__(self) -> None:
        self.clusters: dict[str, E2ECluster] = {}
        self.started: list[Callable[[], None]] = []
        self.failed: dict[str, str] = {}
        if os.environ.get("USE_EXISTING_CLUSTER") in ("1", "true", "yes"):
            self.provider = "existing"
        else:
            self.provider = os.environ.get("E2E_PROVIDER", "local")
        if self.provider not in ("local", "existing", "kind"):
            raise pytest.UsageError(f"unknown E2E_PROVIDER {self.provider!r}")
        self._claim: IO[str] | None = claim_cluster_names() if self.provider == "local" else None

    def get(
        self,
        flavour: str,
        real_nodes: bool = False,
        kueue: bool = False,
        images_dir: Path | None = None,
    ) -> E2ECluster:
        """The session's cluster of a flavour; with ``real_nodes`` a separate one whose
        pods run for real (local provider: two real nodes and no fake ones), whose nodes import
        the ``*.tar`` of ``images_dir`` when given (a separate cluster again) instead of every
        image hack/images builds; with ``kueue`` a separate one where Kueue admits jobs."""
        if flavour not in FLAVOURS:
            raise ValueError(f"unknown flavour {flavour!r}; one of {FLAVOURS}")
        key = (
            flavour
            + ("-real" if real_nodes else "")
            + ("-kueue" if kueue else "")
            + ("-images" if images_dir else "")
        )
        if key in self.failed:
            pytest.fail(f"{key} cluster failed to start earlier: {self.failed[key]}")
        if key not in self.clusters:
            try:
                if real_nodes and self.provider == "local":
                    # Two: the examples ask for three pods of one CPU each, and a node
                    # of this machine has two.
                    self.clusters[key] = self._local(flavour, real_nodes=2, images_dir=images_dir)
                elif images_dir is not None:
                    pytest.skip("images of a directory are imported into local real nodes only")
                elif kueue and self.provider == "local":
                    self.clusters[key] = self._local(flavour, kueue=True)
                elif kueue:
                    self.clusters[key] = self._with_kueue(flavour)
                else:
                    # kind and existing clusters run real pods anyway.
                    self.clusters[key] = getattr(self, f"_{self.provider}")(flavour)
            except pytest.skip.Exception:
                raise
            except Exception as exc:
                self.failed[key] = str(exc)
                raise
        return self.clusters[key]

    def close(self) -> None:
        if os.environ.get("E2E_KEEP_CLUSTERS") in ("1", "true", "yes"):
            # Left running for inspection; the next session reuses them.
            self.started.clear()
        # Each cluster's processes, mounts and network are its own: stopping them side by side
        # ends the session in the time of the slowest cluster, not of all of them in turn.
        with ThreadPoolExecutor(max_workers=max(1, len(self.started))) as pool:
            for stop in reversed(self.started):
                pool.submit(stop)
        for c in self.clusters.values():
            with contextlib.suppress(Exception):
                c.api.close()  # type: ignore[no-untyped-call]
        if self._claim is not None:
            self._claim.close()

    def _existing(self, flavour: str) -> E2ECluster:
        kubeconfig = os.environ.get("KUBECONFIG", str(Path.home() / ".kube" / "config"))
        if not Path(kubeconfig.split(os.pathsep)[0]).is_file():
            pytest.skip(f"USE_EXISTING_CLUSTER=1 but kubeconfig {kubeconfig} does not exist")
        cluster = E2ECluster("existing", flavour, kubeconfig, "existing", _api_client(kubeconfig))
        crd = localcluster.RECIPES[flavour].crd
        if crd and not cluster.has_crd(crd):
            pytest.skip(f"existing cluster has no {crd}: {flavour} is not installed")
        if flavour == "native" and not cluster.serves(*NATIVE_PODGROUP):
            group, version, plural = NATIVE_PODGROUP
            pytest.skip(f"existing cluster does not serve {plural} of {group}/{version}")
        return cluster

    def _with_kueue(self, flavour: str) -> E2ECluster:
        """A kind or existing cluster of the flavour, if Kueue is installed in it."""
        cluster: E2ECluster = getattr(self, f"_{self.provider}")(flavour)
        if not cluster.has_crd(KUEUE_CRD):
            pytest.skip(f"{self.provider} cluster {cluster.name} has no Kueue ({KUEUE_CRD})")
        return cluster

    def _local(
        self,
        flavour: str,
        real_nodes: int = 0,
        kueue: bool = False,
        images_dir: Path | None = None,
    ) -> E2ECluster:
        # Named apart from the `make cluster-up` clusters so a developer's
        # running cluster is never replaced by the test session.
        name = f"{cluster_prefix()}-{flavour}"
        cmd = [sys.executable, str(CLUSTER_TOOL), "up", "--scheduler", flavour]
        if real_nodes:
            # No fake nodes: every pod runs for real.
            name += "-real"
            cmd += ["--real-nodes", str(real_nodes), "--nodes", "0"]
        if kueue:
            name += "-kueue"
            cmd += ["--kueue", "--kueue-pods-ready-timeout", str(KUEUE_PODS_READY_TIMEOUT)]
        if images_dir is not None:
            name += "-images"
            cmd += ["--images-dir", str(images_dir)]
        cmd += ["--name", name]
        # kwokctl keeps a copy of the policy: the file is needed only while the cluster starts.
        with tempfile.TemporaryDirectory() as scratch:
            policy = Path(scratch) / "audit-policy.yaml"
            policy.write_text(yaml.safe_dump(AUDIT_POLICY))
            cmd += ["--audit-policy", str(policy)]
            res = subprocess.run(
                cmd, capture_output=True, text=True, timeout=UP_TIMEOUT, check=False
            )
        self.started.append(lambda: localcluster.down(name))
        if res.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed:\n{res.stderr[-4000:]}")
        last = res.stdout.strip().splitlines()[-1]
        assert last.startswith("export KUBECONFIG="), res.stdout
        kubeconfig = last.removeprefix("export KUBECONFIG=")
        info = localcluster.ClusterInfo.load(name)
        state = {"processes": [dict(vars(p)) for p in info.processes]}
        return E2ECluster(
            name,
            flavour,
            kubeconfig,
            "local",
            _api_client(kubeconfig),
            state,
            audit_log=localcluster.audit_log(name),
        )

    def _kind(self, flavour: str) -> E2ECluster:
        ok, reason = _docker_available()
        if not ok:
            pytest.skip(f"E2E_PROVIDER=kind needs a container engine: {reason}")
        for tool in ("kind", "kubectl"):
            if shutil.which(tool) is None:
                pytest.skip(f"E2E_PROVIDER=kind needs `{tool}` on PATH")
        if flavour != "default" and flavour not in KIND_INSTALLERS:
            pytest.skip(f"E2E_PROVIDER=kind has no installer for {flavour}")
        name = f"mpi-e2e-{flavour}"
        kubeconfig = str(Path(os.environ.get("TMPDIR", "/tmp")) / f"kubeconfig-{name}")
        subprocess.run(
            [
                "kind",
                "create",
                "cluster",
                f"--name={name}",
                f"--kubeconfig={kubeconfig}",
                "--wait=2m",
            ],
            check=True,
            timeout=UP_TIMEOUT,
        )

        def delete() -> None:
            subprocess.run(["kind", "delete", "cluster", f"--name={name}"], timeout=300)

        self.started.append(delete)
        install = KIND_INSTALLERS.get(flavour)
        if install:
            install(kubeconfig)
        return E2ECluster(name, flavour, kubeconfig, "kind", _api_client(kubeconfig))


def _kubectl(kubeconfig: str, *args: str, timeout: float = 300) -> None:
    subprocess.run(["kubectl", f"--kubeconfig={kubeconfig}", *args], check=True, timeout=timeout)


def go_module_dir(module: str) -> Path:
    """Directory of ``module@version`` in the Go module cache, downloaded through the module
    proxy when missing."""
    res = subprocess.run(
        ["go", "mod", "download", "-json", module],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"},
        cwd="/",
    )
    return Path(json.loads(res.stdout)["Dir"])


def _module_dir(module: str, version_key: str) -> Path:
    """Directory of a pinned Go module (downloaded on demand by `go`)."""
    if shutil.which("go") is None:
        pytest.skip(f"E2E_PROVIDER=kind reads {module}'s release manifests with `go`")
    return go_module_dir(f"{module}@{_pinned(version_key)}")


def _kind_volcano(kubeconfig: str) -> None:
    # The release's all-in-one manifest (release images, admission webhooks).
    manifest = _module_dir("volcano.sh/volcano", "VOLCANO_VERSION") / "installer"
    _kubectl(kubeconfig, "apply", "--server-side", "-f", str(manifest / "volcano-development.yaml"))
    _kubectl(
        kubeconfig,
        "-n",
        "volcano-system",
        "wait",
        "--for=condition=Available",
        "deployment",
        "--all",
        "--timeout=300s",
    )


def _kind_scheduler_plugins(kubeconfig: str) -> None:
    if shutil.which("helm") is None:
        pytest.skip("E2E_PROVIDER=kind with scheduler-plugins needs `helm` on PATH")
    # The release's "as-a-second-scheduler" chart: scheduler name
    # scheduler-plugins-scheduler with Coscheduling, release images.
    sp = _module_dir("sigs.k8s.io/scheduler-plugins", "SCHEDULER_PLUGINS_VERSION")
    chart = sp / "manifests" / "install" / "charts" / "as-a-second-scheduler"
    subprocess.run(
        [
            "helm",
            "install",
            "scheduler-plugins",
            str(chart),
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            "scheduler-plugins",
            "--create-namespace",
            "--wait",
            "--timeout=5m",
        ],
        check=True,
        timeout=600,
    )


KIND_INSTALLERS: dict[str, Callable[[str], None]] = {
    "volcano": _kind_volcano,
    "scheduler-plugins": _kind_scheduler_plugins,
}


def _pinned(key: str) -> str:
    for line in (REPO / "hack" / "cluster" / "versions.env").read_text().splitlines():
        if line.startswith(f"{key}="):
            return line.split("=", 1)[1].strip()
    raise KeyError(key)
