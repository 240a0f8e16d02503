"""Chaos on a real cluster: a burst of MPIJobs while the operator, the API server or etcd
misbehave, and an audit of what the operator left behind.

Each scenario runs the real ``mpi-operator`` process (:class:`~.operator.OperatorProcess`),
injects its fault with bounded loops, waits until every job has ended, and returns a
:class:`ChaosResult`: the figures of the run and every problem the audit found. The e2e tests
(``test_chaos.py``) run them small and assert on the problems and on what the operator did;
``bench/chaos.py`` runs them large and prints the figures for ``docs/reliability.md``.
Timings are reported, never asserted.

The audit (:func:`audit`) checks, for every job: exactly its worker Pods, one launcher Job,
Service, ConfigMap, Secret (and PodGroup under gang scheduling), each controlled by that job;
launcher pods controlled by its launcher Job; nothing in the namespace controlled by anything
else or by nothing; and the job ended (Succeeded).
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

import hack.cluster as localcluster
from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.desired.validation import load_valid_mpijob
from mpi_operator.runtime.objects import controller_ref

from .clusters import SIM, E2ECluster, wait_until
from .operator import (
    GROUP,
    PLURAL,
    POD_GROUP_APIS,
    VERSION,
    OperatorProcess,
    condition,
    create_mpijob,
    sim_job,
)

# The reflector's line when a watch's resourceVersion expired (410 Gone) and it lists again.
RELIST_ON_GONE = "expired, listing again"
# Not one of the operator's children, but in every namespace.
NAMESPACE_DEFAULTS = {("configmaps", "kube-root-ca.crt")}
RUN_FOR = SIM + "run-for"
LAUNCHER_RUNS_FOR = "10s"
# Fault loops and waits never run longer than this, whatever the sizes.
END_TIMEOUT = 900.0
IS_LEADER = "mpi_operator_is_leader"
RECONCILES = "controller_runtime_reconcile_total"
SUCCESSES = 'controller="mpijob",result="success"'


@dataclass
class ChaosResult:
    """What one scenario did and found; ``figures`` go into docs/reliability.md."""

    scenario: str
    jobs: int
    problems: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Burst:
    """Where a scenario runs and how big its burst is: ``jobs`` MPIJobs of ``workers`` workers
    in a fresh ``namespace``; operator logs and kubeconfigs go to ``workdir``."""

    cluster: E2ECluster
    namespace: str
    workdir: Path
    jobs: int
    workers: int = 2

    @property
    def names(self) -> list[str]:
        return job_names(self.jobs)

    def result(self, scenario: str) -> ChaosResult:
        return ChaosResult(scenario, self.jobs, figures={"workers_per_job": self.workers})

    def operator(self, name: str, *, leader_elect: bool = False) -> OperatorProcess:
        args = [] if leader_elect else ["--leader-elect=false"]
        return OperatorProcess(self.cluster, self.workdir, name=name, extra_args=args).start()

    @contextmanager
    def submitted(self) -> Iterator[float]:
        """Submit the burst on another thread while the block injects faults; yields when the
        submission started. The block's end waits for the submission (and raises what it
        raised)."""
        with ThreadPoolExecutor(1) as background:
            started = time.monotonic()
            submitted = background.submit(
                submit_burst, self.cluster, self.namespace, self.names, self.workers
            )
            yield started
            submitted.result()

    def finish(self, result: ChaosResult, operator: OperatorProcess, started: float) -> ChaosResult:
        """Wait for every job to end, then audit; the figure counts from the burst's start."""
        wait_until_ended(self.cluster, self.namespace, self.names, operator)
        result.figures["seconds_to_all_ended"] = round(time.monotonic() - started, 1)
        gang = self.cluster.flavour != "default"
        result.problems += audit(self.cluster, self.namespace, self.names, gang)
        return result


# --- the burst --------------------------------------------------------------------------------


def job_names(count: int, prefix: str = "job") -> list[str]:
    return [f"{prefix}-{i:03d}" for i in range(count)]


def _connection_trouble(error: Exception) -> bool:
    """The API server is away (restarting) or overloaded: try the request again."""
    if isinstance(error, ApiException):
        return error.status in (0, 429, 500, 502, 503, 504)
    return isinstance(error, urllib3.exceptions.HTTPError | OSError)


def burst_job(name: str, workers: int) -> dict[str, Any]:
    """A job whose workers keep running and whose launcher succeeds after LAUNCHER_RUNS_FOR,
    so faults land on jobs being created, running and ending alike."""
    return sim_job(name, workers).template_annotation("Launcher", RUN_FOR, LAUNCHER_RUNS_FOR).obj()


def submit_burst(
    cluster: E2ECluster, namespace: str, job_list: list[str], workers: int, threads: int = 8
) -> None:
    """Create every job as fast as the API server takes them, retrying while it is away (a
    retried create that already went through counts as created)."""

    def submit(name: str) -> None:
        deadline = time.monotonic() + END_TIMEOUT
        while True:
            try:
                create_mpijob(cluster, namespace, burst_job(name, workers))
                return
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as error:
                if isinstance(error, ApiException) and error.status == 409:
                    return
                if not _connection_trouble(error) or time.monotonic() > deadline:
                    raise
            time.sleep(0.5)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(submit, job_list))


def api_serving(cluster: E2ECluster) -> bool:
    try:
        cluster.core.list_namespace(limit=1)
    except (ApiException, urllib3.exceptions.HTTPError, OSError):
        return False
    return True


def wait_until_ended(
    cluster: E2ECluster, namespace: str, job_list: list[str], operator: OperatorProcess
) -> None:
    """Until every job has Succeeded or Failed (a timeout fails with a count)."""
    pending = set(job_list)

    def ended() -> bool:
        if operator.process is not None and operator.process.poll() is not None:
            raise AssertionError(f"{operator.name} exited:\n{operator.log_tail()}")
        if not api_serving(cluster):
            return False
        for job in _list_mpijobs(cluster, namespace):
            if _ended(job):
                pending.discard(job["metadata"]["name"])
        return not pending

    wait_until(
        ended,
        END_TIMEOUT,
        interval=2.0,
        message=lambda: (
            f"{len(pending)} of {len(job_list)} jobs to end, e.g. {sorted(pending)[:5]}"
        ),
    )


def _ended(job: dict[str, Any]) -> bool:
    return any(
        (cond := condition(job, kind)) is not None and cond.get("status") == "True"
        for kind in ("Succeeded", "Failed")
    )


def _list_mpijobs(cluster: E2ECluster, namespace: str) -> list[dict[str, Any]]:
    found = cluster.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    return list(found["items"])


# --- the audit --------------------------------------------------------------------------------


def audit(cluster: E2ECluster, namespace: str, job_list: list[str], gang: bool) -> list[str]:
    """Every way the namespace differs from "each job has exactly its children and ended"."""
    problems: list[str] = []
    jobs = {job["metadata"]["name"]: job for job in _list_mpijobs(cluster, namespace)}
    missing_jobs = sorted(set(job_list) - set(jobs))
    if missing_jobs:
        problems.append(f"MPIJobs missing: {missing_jobs}")
    expected: dict[str, dict[str, set[str]]] = {}
    for name, obj in jobs.items():
        succeeded = condition(obj, "Succeeded")
        if succeeded is None or succeeded.get("status") != "True":
            problems.append(f"{name}: did not succeed: {obj.get('status', {}).get('conditions')}")
        expected[obj["metadata"]["uid"]] = _expected_children(obj, gang)
    found = _children_by_controller(cluster, namespace, gang)
    launcher_uids: dict[str, str] = {}
    for (kind, controller_uid), objects in sorted(found.items()):
        names_found = Counter(name for name, _ in objects)
        if controller_uid == "":
            problems.append(f"{kind} without a controller: {sorted(names_found)}")
            continue
        if kind == "pods:Job":
            continue  # launcher pods, checked below against the launcher Jobs
        wanted = expected.get(controller_uid, {}).get(kind)
        if wanted is None:
            problems.append(f"{kind} {sorted(names_found)} controlled by unknown {controller_uid}")
            continue
        duplicates = sorted(n for n, count in names_found.items() if count > 1)
        extra = sorted(set(names_found) - wanted)
        if duplicates or extra:
            problems.append(f"{kind}: duplicates {duplicates}, unexpected {extra}")
        if kind == "jobs":
            launcher_uids.update({uid: name for name, uid in objects})
    for uid, wanted_kinds in expected.items():
        for kind, wanted in wanted_kinds.items():
            have = {name for name, _ in found.get((kind, uid), [])}
            if wanted - have:
                problems.append(f"{kind} missing: {sorted(wanted - have)}")
    for (kind, controller_uid), objects in found.items():
        if kind == "pods:Job" and controller_uid not in launcher_uids:
            problems.append(f"pods {[n for n, _ in objects]} of a Job that is no launcher")
    return problems


def _expected_children(obj: dict[str, Any], gang: bool) -> dict[str, set[str]]:
    job = load_valid_mpijob(obj)
    workers = job.replicas(c.WORKER)
    children = {
        "services": {names.service_name(job)},
        "configmaps": {names.config_map_name(job)},
        "secrets": {names.ssh_secret_name(job)},
        "jobs": {names.launcher_name(job)},
        "pods": {names.worker_name(job, i) for i in range(workers)},
    }
    if gang:
        children["podgroups"] = {names.pod_group_name(job)}
    return children


def _children_by_controller(
    cluster: E2ECluster, namespace: str, gang: bool
) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(kind, controller uid) → [(name, uid)] for everything of the children's kinds in the
    namespace, labelled or not; pods controlled by a Job are kind ``pods:Job``."""
    listers: dict[str, Callable[[], Any]] = {
        "services": lambda: cluster.core.list_namespaced_service(namespace),
        "configmaps": lambda: cluster.core.list_namespaced_config_map(namespace),
        "secrets": lambda: cluster.core.list_namespaced_secret(namespace),
        "jobs": lambda: cluster.batch.list_namespaced_job(namespace),
        "pods": lambda: cluster.core.list_namespaced_pod(namespace),
    }
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for kind, lister in listers.items():
        for item in cluster.to_dict(lister())["items"]:
            _file(found, kind, item)
    if gang:
        group, version = POD_GROUP_APIS[cluster.flavour]
        groups = cluster.custom.list_namespaced_custom_object(
            group, version, namespace, "podgroups"
        )
        for item in groups["items"]:
            _file(found, "podgroups", item)
    return found


def _file(
    found: dict[tuple[str, str], list[tuple[str, str]]], kind: str, item: dict[str, Any]
) -> None:
    meta = item["metadata"]
    if (kind, meta["name"]) in NAMESPACE_DEFAULTS:
        return
    ref = controller_ref(item)
    if kind == "pods" and ref is not None and ref.get("kind") == "Job":
        kind = "pods:Job"
    found.setdefault((kind, ref["uid"] if ref else ""), []).append((meta["name"], meta["uid"]))


# --- the operator -----------------------------------------------------------------------------


def relists_on_gone(*operators: OperatorProcess) -> int:
    """How many times the operators' informers listed again after a 410 Gone."""
    return sum(
        line.count(RELIST_ON_GONE)
        for operator in operators
        for line in operator.log_path.read_text(errors="replace").splitlines()
    )


# --- the scenarios ----------------------------------------------------------------------------


def operator_killed_repeatedly(
    burst: Burst, *, interval: float = 10.0, kills: int = 3
) -> ChaosResult:
    """A burst while the operator gets SIGKILL every ``interval`` seconds, ``kills`` times, and
    is started again at once (without leader election: a new replica would wait out the
    killed one's Lease). The last one started runs until every job has ended."""
    result = burst.result("operator SIGKILL loop")
    operator = burst.operator("operator-0")
    try:
        with burst.submitted() as started:
            for kill in range(1, kills + 1):
                time.sleep(max(0.0, started + kill * interval - time.monotonic()))
                operator.stop(signal.SIGKILL)
                operator = burst.operator(f"operator-{kill}")
        result.figures.update(kills=kills, kill_interval_s=interval)
        return burst.finish(result, operator, started)
    finally:
        operator.stop()


def api_server_restarted(burst: Burst, *, after: float = 3.0, down: float = 3.0) -> ChaosResult:
    """A burst during which the API server gets SIGKILL ``after`` seconds in and is started
    again ``down`` seconds later. The operator must ride it out in the same process: its
    watches come back with resourceVersions the new API server's cache does not hold (410
    Gone), so its informers list again."""
    result = burst.result("API server SIGKILL and start")
    cluster = burst.cluster
    operator = burst.operator("operator")
    pid = operator.process.pid if operator.process else None
    try:
        with burst.submitted() as started:
            time.sleep(after)
            stopped = time.monotonic()
            localcluster.restart_component(
                cluster.name, "kube-apiserver", sig=signal.SIGKILL, down_seconds=down
            )
            wait_until(lambda: api_serving(cluster), 120, message="the API server back")
            result.figures["api_server_unavailable_s"] = round(time.monotonic() - stopped, 1)
        result = burst.finish(result, operator, started)
        if operator.process is None or operator.process.pid != pid:
            result.problems.append("the operator process was replaced")
        result.figures.update(operator_restarts=0, relists_on_410=relists_on_gone(operator))
        return result
    finally:
        operator.stop()


def etcd_compacted(burst: Burst, *, interval: float = 2.0, compactions: int = 5) -> ChaosResult:
    """A burst while etcd's history is compacted to its current revision every ``interval``
    seconds, ``compactions`` times, under the operator's open watches; then etcd restarts.

    The API server serves watches from its watch cache, which a compaction does not touch, so
    the compactions alone change nothing a client sees. The restart makes the API server's own
    etcd watches resume from where each last heard of a change: compacted history for every
    resource that changed less recently than the last compaction. Those caches are rebuilt,
    their clients' watches end, and the operator's informers resume from resourceVersions the
    new caches do not hold: 410 Gone, list again."""
    result = burst.result("etcd compaction during watches")
    cluster = burst.cluster
    operator = burst.operator("operator")
    revisions: list[int] = []
    try:
        with burst.submitted() as started:
            for _ in range(compactions):
                time.sleep(interval)
                revisions.append(localcluster.compact_etcd(cluster.name))
            localcluster.restart_component(cluster.name, "etcd")
            wait_until(lambda: api_serving(cluster), 120, message="the API server back")
        result = burst.finish(result, operator, started)
        result.figures.update(
            compactions=len(revisions),
            compacted_to_revision=revisions[-1] if revisions else None,
            relists_on_410=relists_on_gone(operator),
        )
        return result
    finally:
        operator.stop()


def leader_killed(burst: Burst) -> ChaosResult:
    """Two replicas with leader election; a burst; the leader gets SIGKILL while it works. The
    standby must take the Lease once it expires and finish every job. Figures: seconds from
    the kill to the standby leading and to its first reconcile."""
    result = burst.result("leader SIGKILL, standby takes over")
    first = burst.operator("replica-a", leader_elect=True)
    second = burst.operator("replica-b", leader_elect=True)
    try:
        leader, standby = wait_until(
            lambda: _leader_and_standby(first, second), 60, message="one leader"
        )
        with burst.submitted() as started:
            wait_until(lambda: (leader.metric(RECONCILES, SUCCESSES) or 0) > 0, 120, message="work")
            killed = time.monotonic()
            leader.stop(signal.SIGKILL)
            took_over = _seconds_until(
                lambda: standby.metric(IS_LEADER) == 1, killed, "the standby to lead"
            )
            reconciled = _seconds_until(
                lambda: (standby.metric(RECONCILES, SUCCESSES) or 0) > 0,
                killed,
                "the standby's first reconcile",
            )
        result.figures.update(
            seconds_to_takeover=round(took_over, 1),
            seconds_to_first_reconcile=round(reconciled, 1),
        )
        return burst.finish(result, standby, started)
    finally:
        for replica in (first, second):
            replica.stop()


def _leader_and_standby(
    first: OperatorProcess, second: OperatorProcess
) -> tuple[OperatorProcess, OperatorProcess] | None:
    leading = [first.metric(IS_LEADER), second.metric(IS_LEADER)]
    if leading == [1, 0]:
        return first, second
    if leading == [0, 1]:
        return second, first
    return None


def _seconds_until(predicate: Callable[[], bool], since: float, what: str) -> float:
    """Seconds from ``since`` until ``predicate`` holds, polled often (the figure is a
    latency); fails the scenario after END_TIMEOUT."""
    wait_until(predicate, END_TIMEOUT, interval=0.1, message=what)
    return time.monotonic() - since
