"""One sync of one MPIJob, as a plan: the ordered API writes, events and new status.

Planning is pure: it reads a cache view and returns what to do, so tests compare the exact
list of writes per sync (as kubeflow/mpi-operator's tests do) without any API server.
``execute.py`` performs a plan and stops at the first failed write, like upstream's sync.

The order and rules follow upstream's syncHandler (Service, ConfigMap, Secret, the gang's
objects (upstream's PodGroup), workers, launcher, status), with the fixes listed in
docs/differences.md.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from gang import (
    GangKind,
    GangScheduler,
    GangState,
    StoredGang,
    capacity_nudge_of,
    cluster_inputs_of,
    cluster_layout_of,
    crd_missing_reason,
    gang_kinds_of,
    gang_objects_of,
    gang_resources_of,
    unserved_state,
)
from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import is_controlled_by, is_terminating, metadata_of
from mpi_operator.api.models import MPIJob
from mpi_operator.api.rules import creating_api
from mpi_operator.api.topology import job_topology
from mpi_operator.controller.admission import Admission, admit
from mpi_operator.controller.conditions import (
    find_condition,
    is_finished,
    is_true,
    remove_condition,
    set_condition,
    state_last,
)
from mpi_operator.controller.domain_room import NodeLoad, room_by_domain, roomiest
from mpi_operator.controller.failures import (
    WorkerFailures,
    backoff_limit,
    bounded,
    judge_worker_failures,
    launcher_failures,
    recorded_worker_failures,
)
from mpi_operator.controller.status import (
    NORMAL,
    WARNING,
    Event,
    Observed,
    compute_status,
    current_status,
    mark_created,
    worker_counts_hold,
)
from mpi_operator.controller.ttl import launcher_ttl, seconds_until_deletion
from mpi_operator.desired.config import Placements, new_config_map
from mpi_operator.desired.kinds import (
    CHILD_KINDS_BY_PLURAL,
    CONFIG_MAP,
    JOB,
    POD,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE,
    Child,
    Verb,
)
from mpi_operator.desired.launcher import (
    launcher_pod_template,
    new_launcher_job,
    template_sets_restart_policy,
)
from mpi_operator.desired.objects import children
from mpi_operator.desired.transports import revocation_of, transport_of
from mpi_operator.desired.transports.kubectl_exec import KEPT_CURRENT, exec_access, granted_pods
from mpi_operator.desired.transports.ssh import (
    SSHKeyPair,
    generate_ssh_key_pair,
    new_service,
    new_ssh_secret,
)
from mpi_operator.desired.workers import new_worker_pod
from mpi_operator.field_errors import FieldError, quoted

# Writes that do not depend on each other (see Action.batch). The Service, ConfigMap and
# Secret are independent; each worker pod needs only the Secret and the gang's objects before it.
SHARED_OBJECTS: Final = "shared objects"
WORKER_PODS: Final = "worker pods"

REASON_RESOURCE_EXISTS: Final = "ErrResourceExists"
REASON_VALIDATION: Final = "ValidationError"
REASON_RESTART_POLICY: Final = "SetPodTemplateRestartPolicy"
RESTART_POLICY_MESSAGE: Final = (
    "Restart policy in pod template overridden by restart policy in replica spec"
)


@dataclass(frozen=True)
class Action:
    """One API write. ``resource`` is the plural, with ``/status`` for the subresource; a
    delete's ``body`` is None or DeleteOptions' ``preconditions``.

    Consecutive actions of one non-empty ``batch`` do not depend on each other and may be
    sent together; every other action waits for the ones before it."""

    verb: Verb
    resource: str
    namespace: str
    name: str
    body: dict[str, Any] | None = None
    batch: str = ""

    def describe(self) -> str:
        return f"{self.verb} {self.resource} {self.namespace}/{self.name}"

    @property
    def deleted_uid(self) -> str | None:
        """The uid a delete is limited to; None when it deletes whatever has the name."""
        if self.verb != "delete" or self.body is None:
            return None
        uid = (self.body.get("preconditions") or {}).get("uid")
        return str(uid) if uid else None


@dataclass
class Plan:
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # Set when the sync must stop and be retried with backoff (e.g. an object we do not own).
    error: str | None = None
    created: bool = False
    succeeded: bool = False
    failed: bool = False
    launcher_name: str | None = None
    # Whether the plan stamps the waiting gang's objects for the scheduler (SyncContext.nudge).
    nudged: bool = False
    # Sync again after this many seconds, when nothing else will (a finished job's TTL, the
    # end of a hold on the workers' count).
    requeue_after: float | None = None
    # The next sync continues from this one's status write: its watch event must sync the job
    # (other writes' events only show what this sync already knew).
    continued: bool = False

    def stop(self, message: str) -> Plan:
        self.error = message
        return self


class ClusterView(Protocol):
    """Read-only access to the operator's caches. Returned objects must not be mutated."""

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    def worker_pods(self, job: MPIJob) -> Sequence[dict[str, Any]]: ...

    def launcher_pods(self, launcher: dict[str, Any]) -> Sequence[dict[str, Any]]: ...

    def node_labels(self, name: str) -> Mapping[str, str] | None:
        """A node's labels; None when the node is not known."""
        ...

    def node_loads(self) -> Sequence[NodeLoad] | None:
        """Each node with what the pods bound to it hold; None when not known."""
        ...


@dataclass(frozen=True)
class SyncContext:
    facts: ClusterFacts
    gang: GangScheduler | None
    now: str
    new_key_pair: Callable[[], SSHKeyPair] = generate_ssh_key_pair
    # How the stored object becomes the job to sync (AdmissionCache.admit remembers it).
    admit: Callable[[object, ClusterFacts, GangScheduler | None], Admission] = admit
    # The cluster may have room for the gang now: give the scheduler the strategy's nudge if
    # the gang still waits.
    nudge: bool = False
    # Failure messages (conditions, events) quote a failed container's termination message,
    # with FallbackToLogsOnError its log's tail; False keeps only its exit code and reason.
    failure_log_tail: bool = True
    # The strategy's kinds the API server does not serve (their CRDs are not installed): a
    # job that needs gang objects creates none of them, nor anything after them, meanwhile.
    unserved: Sequence[GangKind] = ()


def plan_sync(obj: dict[str, Any] | None, view: ClusterView, ctx: SyncContext) -> Plan:
    """What to do for a job whose cached object is ``obj`` (None: it is gone)."""
    plan = Plan()
    if obj is None:
        return plan
    admission = ctx.admit(obj, ctx.facts, ctx.gang)
    if admission.job is None:
        return _invalid(plan, admission.errors) if admission.errors else plan
    return _Sync(admission.job, view, ctx, plan).run()


def _invalid(plan: Plan, errors: Sequence[FieldError]) -> Plan:
    detail = bounded("Found validation errors: " + "; ".join(str(e) for e in errors))
    plan.events.append(Event(WARNING, REASON_VALIDATION, detail))
    return plan


class _Sync:
    def __init__(
        self, job: DefaultedMPIJob, view: ClusterView, ctx: SyncContext, plan: Plan
    ) -> None:
        self.job, self.view, self.ctx, self.plan = job, view, ctx, plan
        self.ns = job.namespace
        self.suspended = bool(job.spec.run_policy.suspend)
        self.clean_pod_policy = job.spec.run_policy.clean_pod_policy or c.CLEAN_POD_POLICY_NONE
        self.status = current_status(job)
        self.original_status = copy.deepcopy(self.status)
        self.desired_gang: list[tuple[str, dict[str, Any]]] | None = None
        # What the children's steps found or created this sync.
        self.launcher: dict[str, Any] | None = None
        self.workers: list[dict[str, Any]] = []
        # Worker names this sync deletes: free for anyone to take, so granted nothing on.
        self.withdrawn: set[str] = set()
        # What this sync deleted of the launcher's exec access before touching its workers.
        self.revoked_early: set[tuple[str, str]] = set()
        # Set when the job's gang needs kinds the API server does not serve.
        self.gang_unserved: GangState | None = None
        self.failures = WorkerFailures()

    def run(self) -> Plan:
        created = mark_created(self.job, self.status, self.ctx.now)
        if created:
            self.plan.events.append(created)
            self.plan.created = True
        conditions = self.status.get("conditions") or []
        if is_finished(conditions) and self.status.get("completionTime"):
            return self._finished()
        if not self.status.get("startTime") and not self.suspended:
            self.status["startTime"] = self.ctx.now

        launcher = self.view.get(JOB.plural, self.ns, names.launcher_name(self.job))
        if launcher is not None and not self._owned(launcher, JOB.plural):
            return self.plan
        done = launcher is not None and _job_finished(launcher)
        self.launcher = launcher
        self.failures = WorkerFailures(
            recorded=recorded_worker_failures(self.status),
            limit=backoff_limit(self.job),
            launcher_failures=launcher_failures(launcher),
        )
        if not done and not self._ensure_children():
            return self.plan
        launcher, workers, failures = self.launcher, self.workers, self.failures
        if launcher is not None and not done:
            self._sync_launcher_suspension(launcher, workers)
        if self.suspended:
            if not self._clean_up_workers() or not self._revoke_grants():
                return self.plan
            workers = []
        launcher_pods = self.view.launcher_pods(launcher) if launcher is not None else []
        seen = Observed(launcher, launcher_pods, workers, self.suspended, failures)
        outcome = compute_status(
            self.job, self.status, seen, self.ctx.now, log_tail=self.ctx.failure_log_tail
        )
        self.plan.events.extend(outcome.events)
        self.plan.succeeded, self.plan.failed = outcome.succeeded, outcome.failed
        # A job that finishes now is cleaned up by its next sync (_finished).
        self.plan.continued = outcome.continued or outcome.succeeded or outcome.failed
        self.status = outcome.status
        if self.ctx.gang is not None and not self.suspended:
            self._observe_gang(self.ctx.gang, placed_only=done)
        if not self.suspended and not done:
            self._judge_domain_room()
        if launcher is not None:
            self.plan.launcher_name = names.launcher_name(self.job)
        hold = worker_counts_hold(self.original_status, self.status, seen, self.ctx.now)
        if hold is not None:
            self.status = self.original_status
            self.plan.requeue_after = hold
        self._write_status()
        return self.plan

    # -- finished jobs -----------------------------------------------------------------
    def _finished(self) -> Plan:
        left = seconds_until_deletion(self.job, self.status["completionTime"], self.ctx.now)
        if left is not None and left <= 0:
            # The garbage collector removes the children, as for any deleted MPIJob.
            body = {"preconditions": {"uid": self.job.metadata.get("uid")}}
            self._write("delete", c.PLURAL, self.job.name, body)
            return self.plan
        self.plan.requeue_after = left
        if self.ctx.gang is not None:
            self._observe_gang(self.ctx.gang, placed_only=True)
        if not self._stop_launcher() or not self._revoke_grants():
            return self.plan
        if not self._expire_launcher():
            return self.plan
        cleans = self.clean_pod_policy in (c.CLEAN_POD_POLICY_ALL, c.CLEAN_POD_POLICY_RUNNING)
        if cleans and not self._clean_up_workers():
            return self.plan
        self._write_status()
        return self.plan

    def _stop_launcher(self) -> bool:
        """Suspend a launcher still running under a finished job (one failed by an evicted
        worker): the Job controller then deletes its running pod and keeps the Job, its
        status and its finished pods, as a finished launcher is kept."""
        launcher = self.view.get(JOB.plural, self.ns, names.launcher_name(self.job))
        if launcher is None or _job_finished(launcher) or _job_suspended(launcher):
            return True
        if not self._owned(launcher, JOB.plural):
            return False
        self._suspend_launcher(launcher)
        return True

    def _expire_launcher(self) -> bool:
        """Give a finished job's launcher Job its TTL (kubeflow.org/v2beta1's rule): the Job
        controller deletes it that long after it finished; the MPIJob stays."""
        ttl = launcher_ttl(self.job)
        launcher = self.view.get(JOB.plural, self.ns, names.launcher_name(self.job))
        if ttl is None or launcher is None or not _job_finished(launcher):
            return True
        if (launcher.get("spec") or {}).get("ttlSecondsAfterFinished") == ttl:
            return True
        if not self._owned(launcher, JOB.plural):
            return False
        updated = copy.deepcopy(launcher)
        updated["spec"]["ttlSecondsAfterFinished"] = ttl
        self._write("update", JOB.plural, launcher["metadata"]["name"], updated)
        return True

    def _clean_up_workers(self) -> bool:
        """Delete worker pods per cleanPodPolicy (suspension deletes them under None too)."""
        for pod in self.view.worker_pods(self.job):
            if not self._owned(pod, POD.plural):
                return False
            phase = (pod.get("status") or {}).get("phase")
            if self.clean_pod_policy == c.CLEAN_POD_POLICY_RUNNING and phase not in (
                "Running",
                "Pending",
                None,
            ):
                continue
            self._write("delete", POD.plural, pod["metadata"]["name"], batch=WORKER_PODS)
        if not self._delete_owned(self._gang_object_names()):
            return False
        # Worker failures stay counted: they are the job's history, and suspension does not
        # give retries back.
        failed = recorded_worker_failures(self.status)
        replica_statuses = self.status.setdefault("replicaStatuses", {})
        replica_statuses[c.WORKER] = {"failed": failed} if failed else {}
        return True

    # -- children ----------------------------------------------------------------------
    def _ensure_children(self) -> bool:
        """Create or update each child in ``desired.objects.children`` order, as rendering
        lists them; False when the sync must stop (an object of ours is someone else's)."""
        ensure: dict[Child, Callable[[], bool]] = {
            Child.SERVICE: self._ensure_service,
            Child.CONFIG_MAP: self._ensure_config_map,
            Child.SSH_SECRET: self._ensure_secret,
            Child.EXEC_ACCESS: self._ensure_exec_access,
            Child.GANG_OBJECTS: self._ensure_gang_objects,
            Child.WORKERS: self._ensure_workers,
            Child.LAUNCHER: self._ensure_launcher,
        }
        for child in children(self.job, self.ctx.gang):
            if child is Child.GANG_OBJECTS and self.ctx.unserved:
                self._wait_for_gang_kinds()
                return True
            if not ensure[child]():
                return False
        return True

    def _wait_for_gang_kinds(self) -> None:
        """The gang's objects cannot be created, so nothing that comes after them is: the
        sync goes on with the pods the job already has, and the GangScheduled condition says
        which CRD is missing."""
        self.gang_unserved = unserved_state(self.ctx.unserved)
        self.workers = [
            pod for pod in self.view.worker_pods(self.job) if is_controlled_by(pod, self.job)
        ]

    def _ensure_service(self) -> bool:
        desired = new_service(self.job)
        current = self.view.get(SERVICE.plural, self.ns, names.service_name(self.job))
        if current is None:
            self._write(
                "create", SERVICE.plural, desired["metadata"]["name"], desired, batch=SHARED_OBJECTS
            )
            return True
        if not self._owned(current, SERVICE.plural):
            return False
        current_spec, desired_spec = current.get("spec") or {}, desired["spec"]
        if current_spec.get("selector") != desired_spec.get("selector") or bool(
            current_spec.get("publishNotReadyAddresses")
        ) != bool(desired_spec.get("publishNotReadyAddresses")):
            updated = copy.deepcopy(current)
            updated["spec"]["selector"] = desired_spec.get("selector")
            updated["spec"]["publishNotReadyAddresses"] = desired_spec.get(
                "publishNotReadyAddresses", False
            )
            self._write(
                "update", SERVICE.plural, desired["metadata"]["name"], updated, batch=SHARED_OBJECTS
            )
        return True

    def _ensure_config_map(self) -> bool:
        workers = self.view.worker_pods(self.job)
        running = sorted(
            pod["metadata"]["name"]
            for pod in workers
            if (pod.get("status") or {}).get("phase") == "Running"
        )
        desired = new_config_map(self.job, self.ctx.facts, running, self._placements(workers))
        name = desired["metadata"]["name"]
        current = self.view.get(CONFIG_MAP.plural, self.ns, name)
        if current is None:
            self._write("create", CONFIG_MAP.plural, name, desired, batch=SHARED_OBJECTS)
            return True
        if not self._owned(current, CONFIG_MAP.plural):
            return False
        if (current.get("data") or {}) != desired["data"]:
            updated = copy.deepcopy(current)
            updated["data"] = desired["data"]
            self._write("update", CONFIG_MAP.plural, name, updated, batch=SHARED_OBJECTS)
        return True

    def _placements(self, workers: Sequence[dict[str, Any]]) -> Placements:
        """Each placed worker's domain and node, when the job asks for a domain."""
        topology = job_topology(self.job)
        if topology is None:
            return {}
        placements: dict[str, tuple[str, str]] = {}
        for pod in workers:
            node = (pod.get("spec") or {}).get("nodeName")
            labels = self.view.node_labels(node) if node else None
            if node and labels is not None and topology.key in labels:
                placements[pod["metadata"]["name"]] = (labels[topology.key], node)
        return placements

    def _ensure_secret(self) -> bool:
        name = names.ssh_secret_name(self.job)
        current = self.view.get(SECRET.plural, self.ns, name)
        if current is not None and not self._owned(current, SECRET.plural):
            return False
        # A key pair is generated only when one is needed: upstream makes one every sync.
        expected_keys = {"ssh-privatekey", "ssh-publickey"}
        if current is not None and set(current.get("data") or {}) == expected_keys:
            return True
        desired = new_ssh_secret(self.job, self.ctx.new_key_pair())
        if current is None:
            self._write("create", SECRET.plural, name, desired, batch=SHARED_OBJECTS)
        else:
            updated = copy.deepcopy(current)
            updated["data"] = desired["data"]
            self._write("update", SECRET.plural, name, updated, batch=SHARED_OBJECTS)
        return True

    def _ensure_exec_access(self) -> bool:
        """The launcher's account and, while the job has workers proven its own, the Role
        naming exactly those and its binding. Runs after the workers' writes, so a name is
        granted only once the pod of that name was found or created as the job's."""
        granted = [
            pod["metadata"]["name"]
            for pod in self.workers
            if pod["metadata"]["name"] not in self.withdrawn and not is_terminating(pod)
        ]
        for resource, desired in exec_access(self.job, granted):
            name = desired["metadata"]["name"]
            # The API server checks a new binding against its Role's rules (no one may grant
            # more than they hold), so the binding waits until the Role exists.
            batch = "" if resource == ROLE_BINDING.plural else SHARED_OBJECTS
            revoked = (resource, name) in self.revoked_early
            current = None if revoked else self.view.get(resource, self.ns, name)
            if current is None:
                self._write("create", resource, name, desired, batch=batch)
                continue
            if not self._owned(current, resource):
                return False
            fields = KEPT_CURRENT[resource]
            if any(current.get(key) != desired[key] for key in fields):
                updated = copy.deepcopy(current)
                updated.update({key: desired[key] for key in fields})
                self._write("update", resource, name, updated, batch=batch)
        return bool(granted) or self._revoke_grants()

    def _revoke_stale_grant(self) -> bool:
        """Before any worker is written: when the launcher's Role names a pod that the caches
        no longer show as the job's own (deleted, or taken by someone else since), its binding
        goes first. A create that then meets someone else's pod of that name stops the sync
        with nothing of theirs granted; otherwise the exec access step binds the Role again."""
        if Child.EXEC_ACCESS not in transport_of(self.job).after_workers:
            return True
        name = names.launcher_access_name(self.job)
        role = self.view.get(ROLE.plural, self.ns, name)
        binding = self.view.get(ROLE_BINDING.plural, self.ns, name)
        if role is None or binding is None:
            return True
        if not self._owned(role, ROLE.plural) or not self._owned(binding, ROLE_BINDING.plural):
            return False
        proven = {
            pod["metadata"]["name"]
            for pod in self.view.worker_pods(self.job)
            if is_controlled_by(pod, self.job) and not is_terminating(pod)
        }
        if granted_pods(role) <= proven:
            return True
        self._write("delete", ROLE_BINDING.plural, name)
        self.revoked_early.add((ROLE_BINDING.plural, name))
        return True

    def _revoke_grants(self) -> bool:
        """Take away what the transport grants while the job runs (the launcher's exec rights)
        once the job no longer runs (finished or suspended) or has no worker to reach; a
        resumed job gets them again."""
        revocation = revocation_of(transport_of(self.job))
        if revocation is None:
            return True
        revoked = revocation.revoked(self.job)
        return self._delete_owned([obj for obj in revoked if obj not in self.revoked_early])

    def _delete_owned(self, objects: Sequence[tuple[str, str]]) -> bool:
        """Delete each (resource, name) that is cached; False, deleting nothing more, at the
        first one that is not ours."""
        for resource, name in objects:
            current = self.view.get(resource, self.ns, name)
            if current is None:
                continue
            if not self._owned(current, resource):
                return False
            self._write("delete", resource, name)
        return True

    def _ensure_gang_objects(self) -> bool:
        gang = gang_objects_of(self.ctx.gang)
        assert gang is not None  # children() lists the gang's objects only then
        nudger = capacity_nudge_of(gang) if self.ctx.nudge else None
        written = False
        for resource, desired in self._gang_objects():
            name = desired["metadata"]["name"]
            current = self.view.get(resource, self.ns, name)
            if current is None:
                self._write("create", resource, name, desired)
                written = True
                continue
            if not self._owned(current, resource):
                return False
            if gang.needs_update(current, desired):
                # The update wakes the scheduler as a nudge would.
                self._write("update", resource, name, gang.updated_object(current, desired))
                written = True
            elif nudger is not None and nudger.waits(current):
                self._write("patch", resource, name, nudger.capacity_nudge(self.ctx.now))
                self.plan.nudged = True
        if written:
            self._announce_layout_notice()
        return True

    def _announce_layout_notice(self) -> None:
        """With each write of the gang's objects (without any: each sync creating workers):
        what of the job's domain they leave out."""
        layout = cluster_layout_of(self.ctx.gang)
        notice = layout.layout_notice(self.job, self.ctx.facts) if layout else None
        if notice is not None:
            self.plan.events.append(Event(WARNING, notice.reason, notice.message))

    def _gang_objects(self) -> list[tuple[str, dict[str, Any]]]:
        """The gang's desired objects, each with its resource plural (built once a sync); none
        for a scheduler whose gang is only marks on the pods."""
        if self.desired_gang is None:
            gang = gang_objects_of(self.ctx.gang)
            objects = gang.gang_objects(self.job, self.ctx.facts) if gang else []
            resources = gang_resources_of(gang)
            self.desired_gang = [(r.plural, o) for r, o in zip(resources, objects, strict=True)]
        return self.desired_gang

    def _gang_object_names(self) -> list[tuple[str, str]]:
        return [(plural, obj["metadata"]["name"]) for plural, obj in self._gang_objects()]

    def _stored_gang(self) -> StoredGang | None:
        """The job's gang as cached; None while any of its objects is not stored yet."""
        objects = {}
        for resource, name in self._gang_object_names():
            stored = self.view.get(resource, self.ns, name)
            if stored is None:
                return None
            objects[resource] = stored
        pods = list(self.view.worker_pods(self.job))
        launcher = self.view.get(JOB.plural, self.ns, names.launcher_name(self.job))
        if launcher is not None:
            pods.extend(self.view.launcher_pods(launcher))
        return StoredGang(self.job, objects, pods)

    def _observe_gang(self, gang: GangScheduler, *, placed_only: bool = False) -> None:
        """Report the scheduler's verdict on the gang as the GangScheduled condition.

        Once the launcher has finished (``placed_only``) only a first "placed" verdict is
        taken: a short launcher can finish before the scheduler reports its gang placed, and
        a gang that ran must not read as waiting when its pods go and the scheduler's status
        falls back to pending.
        """
        state = self.gang_unserved or self._gang_verdict(gang, placed_only)
        if state is None or state.scheduled is None:
            self._forget_unserved(gang)
            return
        if placed_only and (
            not state.scheduled
            or is_true(self.status.get("conditions") or [], c.CONDITION_GANG_SCHEDULED)
        ):
            return
        conditions = self.status.setdefault("conditions", [])
        if state.scheduled and not creating_api(self.job).shows_gang_scheduled:
            # A placed gang's condition goes, its event stays.
            if remove_condition(conditions, c.CONDITION_GANG_SCHEDULED):
                self.plan.events.append(Event(NORMAL, state.reason, state.message))
            return
        status = "True" if state.scheduled else "False"
        changed = set_condition(
            conditions,
            c.CONDITION_GANG_SCHEDULED,
            status,
            state.reason,
            state.message,
            self.ctx.now,
        )
        if changed:
            kind = WARNING if state.warning else NORMAL
            self.plan.events.append(Event(kind, state.reason, state.message))

    def _gang_verdict(self, gang: GangScheduler, placed_only: bool) -> GangState | None:
        """The scheduler's verdict on the stored gang; None while the gang is not stored."""
        stored = self._stored_gang()
        if stored is None:
            return None
        state = gang.gang_state(stored)
        inputs = cluster_inputs_of(gang)
        if not state.scheduled and not placed_only and inputs is not None:
            state = inputs.blocked(stored, self._cluster_object) or state
        return state

    def _forget_unserved(self, gang: GangScheduler) -> None:
        """A missing CRD the gang waited for is served now, and the scheduler has said nothing
        yet: the condition goes, as before any report."""
        if self.ctx.unserved:
            return
        conditions = self.status.get("conditions") or []
        condition = find_condition(conditions, c.CONDITION_GANG_SCHEDULED)
        missing = {crd_missing_reason(kind) for kind in gang_kinds_of(gang)}
        if condition is not None and condition.get("reason") in missing:
            remove_condition(conditions, c.CONDITION_GANG_SCHEDULED)

    def _judge_domain_room(self) -> None:
        """Whether a domain of the job's required topology has room for its workers, as the
        TopologyFits condition: set False while none has, turned True once one has or the
        workers are placed, and only for a job that waited. Counted only while none of the
        workers is bound (the room then left is the whole job's); a job some of whose
        workers are bound keeps its condition until all are."""
        topology = job_topology(self.job)
        if topology is None or not topology.required or not self.workers:
            return
        wanted = len(self.workers)
        bound = sum(1 for pod in self.workers if (pod.get("spec") or {}).get("nodeName"))
        if bound == wanted:
            message = f"the {wanted} workers are placed in one {quoted(topology.key)}"
            self._set_domain_condition("True", c.REASON_WORKERS_PLACED, message)
            return
        loads = self.view.node_loads() if bound == 0 else None
        if loads is None:
            return
        worker = new_worker_pod(self.job, 0, self.ctx.facts, None)["spec"]
        best = roomiest(room_by_domain(topology.key, worker, loads))
        kind = topology.key.rpartition("/")[2]
        if best is not None and best.room >= wanted:
            message = (
                f"{kind} {quoted(best.domain)} of {quoted(topology.key)} has room for the "
                f"{wanted} workers"
            )
            self._set_domain_condition("True", c.REASON_DOMAIN_FITS, message)
            return
        needs = f"needs {wanted} workers in one {quoted(topology.key)}"
        if best is None:
            message = f"{needs}; no node has that label"
        else:
            most = f"the most any has room for is {best.room} ({kind} {quoted(best.domain)})"
            message = f"{needs}; {most}"
        self._set_domain_condition("False", c.REASON_NO_DOMAIN_FITS, message)

    def _set_domain_condition(self, status: str, reason: str, message: str) -> None:
        """Set TopologyFits: True only over a False one (a True one stays as it is); a False
        one with new counts changes its message only."""
        conditions = self.status.get("conditions") or []
        current = find_condition(conditions, c.CONDITION_TOPOLOGY_FITS)
        if status == "True" and (current is None or current.get("status") == "True"):
            return
        if current is not None and (current.get("status"), current.get("reason")) == (
            status,
            reason,
        ):
            if current.get("message") != message:
                current["message"] = message
                current["lastUpdateTime"] = self.ctx.now
            return
        set_condition(
            self.status.setdefault("conditions", []),
            c.CONDITION_TOPOLOGY_FITS,
            status,
            reason,
            message,
            self.ctx.now,
        )
        self.plan.events.append(Event(WARNING if status == "False" else NORMAL, reason, message))

    def _cluster_object(self, plural: str, name: str) -> dict[str, Any] | None:
        return self.view.get(plural, "", name)

    def _ensure_workers(self) -> bool:
        if not self._revoke_stale_grant():
            return False
        workers = self._ensure_worker_pods()
        if workers is None:
            return False
        self.workers = workers
        self.failures = self._replace_failed_workers(workers, self.failures, self.launcher)
        return True

    def _ensure_worker_pods(self) -> list[dict[str, Any]] | None:
        """Worker pods after creating missing ones and deleting surplus ones; None on conflict."""
        existing = {pod["metadata"]["name"]: pod for pod in self.view.worker_pods(self.job)}
        wanted = names.worker_names(self.job)
        wanted_names = set(wanted)  # up to MAX_WORKERS names: no quadratic scan
        for name, pod in sorted(existing.items()):
            if name not in wanted_names:
                if not self._owned(pod, POD.plural):
                    return None
                self._write("delete", POD.plural, name, batch=WORKER_PODS)
                self.withdrawn.add(name)
        workers: list[dict[str, Any]] = []
        created_any = False
        for index, name in enumerate(wanted):
            found = existing.get(name) or self.view.get(POD.plural, self.ns, name)
            if found is None:
                created = new_worker_pod(self.job, index, self.ctx.facts, self.ctx.gang)
                self._write("create", POD.plural, name, created, batch=WORKER_PODS)
                workers.append(created)
                created_any = True
                continue
            if not self._owned(found, POD.plural):
                return None
            workers.append(found)
        if created_any and gang_objects_of(self.ctx.gang) is None:
            # The layout shapes the workers themselves when the gang has no objects of its own.
            self._announce_layout_notice()
        return workers

    def _replace_failed_workers(
        self,
        workers: Sequence[dict[str, Any]],
        failures: WorkerFailures,
        launcher: dict[str, Any] | None,
    ) -> WorkerFailures:
        """Delete failed workers while the job has retries left; the next sync creates them
        again. The delete names the pod's uid, so it never removes a replacement."""
        judged = judge_worker_failures(
            workers,
            failures.recorded,
            failures.launcher_failures,
            failures.limit,
            launcher_exists=launcher is not None,
        )
        for pod in (*judged.replaced, *judged.ended):
            uid = pod["metadata"].get("uid")
            body = {"preconditions": {"uid": uid}} if uid else None
            self._write("delete", POD.plural, pod["metadata"]["name"], body, batch=WORKER_PODS)
            self.withdrawn.add(pod["metadata"]["name"])
        return judged

    # -- launcher ----------------------------------------------------------------------
    def _ensure_launcher(self) -> bool:
        if self.launcher is None and self._launcher_may_start(self.workers):
            self.launcher = self._create_launcher()
        return True

    def _launcher_may_start(self, workers: Sequence[dict[str, Any]]) -> bool:
        if self.gang_unserved is not None:
            # The launcher's pod belongs to the gang, which cannot be placed yet.
            return False
        if self.job.spec.launcher_creation_policy == c.LAUNCHER_CREATION_AT_STARTUP:
            return True
        # WaitForWorkersReady: a suspended job has no workers to wait for, which upstream
        # takes as "all ready" and starts the launcher anyway (kubeflow/mpi-operator#615).
        return not self.suspended and all(_pod_ready(pod) for pod in workers)

    def _create_launcher(self) -> dict[str, Any]:
        desired = new_launcher_job(self.job, self.ctx.facts, self.ctx.gang)
        if template_sets_restart_policy(self.job):
            self.plan.events.append(Event(WARNING, REASON_RESTART_POLICY, RESTART_POLICY_MESSAGE))
        self._write("create", JOB.plural, desired["metadata"]["name"], desired)
        return desired

    def _sync_launcher_suspension(
        self, launcher: dict[str, Any], workers: Sequence[dict[str, Any]]
    ) -> None:
        launcher_suspended = _job_suspended(launcher)
        if self.suspended and not launcher_suspended:
            self._suspend_launcher(launcher)
        elif not self.suspended and launcher_suspended and self._launcher_may_start(workers):
            self._resume_launcher(launcher)

    def _suspend_launcher(self, launcher: dict[str, Any]) -> None:
        updated = copy.deepcopy(launcher)
        updated["spec"]["suspend"] = True
        self._write("update", JOB.plural, launcher["metadata"]["name"], updated)

    def _resume_launcher(self, launcher: dict[str, Any]) -> None:
        name = launcher["metadata"]["name"]
        updated = copy.deepcopy(launcher)
        if (updated.get("status") or {}).get("startTime"):
            # The Job's pod template is immutable while it has a start time.
            cleared = copy.deepcopy(updated)
            del cleared["status"]["startTime"]
            self._write("update_status", f"{JOB.plural}/status", name, cleared)
            del updated["status"]["startTime"]
        template = launcher_pod_template(self.job, self.ctx.facts, self.ctx.gang)
        current_template = updated["spec"].setdefault("template", {})
        metadata = current_template.setdefault("metadata", {})
        desired_metadata = template.get("metadata") or {}
        for field_name in ("labels", "annotations"):
            merged = dict(metadata.get(field_name) or {})
            merged.update(desired_metadata.get(field_name) or {})
            if merged:
                metadata[field_name] = merged
        pod_spec = current_template.setdefault("spec", {})
        desired_spec = template.get("spec") or {}
        for field_name in ("nodeSelector", "tolerations", "schedulingGates"):
            if field_name in desired_spec:
                pod_spec[field_name] = copy.deepcopy(desired_spec[field_name])
            else:
                pod_spec.pop(field_name, None)
        updated["spec"]["suspend"] = False
        if template_sets_restart_policy(self.job):
            self.plan.events.append(Event(WARNING, REASON_RESTART_POLICY, RESTART_POLICY_MESSAGE))
        self._write("update", JOB.plural, name, updated)

    # -- helpers -----------------------------------------------------------------------
    def _owned(self, obj: dict[str, Any], resource: str) -> bool:
        if is_controlled_by(obj, self.job):
            return True
        name = metadata_of(obj).get("name", "")
        message = resource_exists_message(name, self._kind(resource))
        self.plan.events.append(Event(WARNING, REASON_RESOURCE_EXISTS, message))
        self.plan.stop(message)
        return False

    def _kind(self, resource: str) -> str:
        # The kind ErrResourceExists names (upstream's message leaves it empty); a gang
        # object's is its strategy's.
        if child := CHILD_KINDS_BY_PLURAL.get(resource):
            return child.kind
        gang_kinds = {r.plural: r.kind for r in gang_resources_of(self.ctx.gang)}
        return gang_kinds.get(resource, resource)

    def _write(
        self,
        verb: Verb,
        resource: str,
        name: str,
        body: dict[str, Any] | None = None,
        batch: str = "",
    ) -> None:
        self.plan.actions.append(Action(verb, resource, self.ns, name, body, batch))

    def _write_status(self) -> None:
        state_last(self.status.get("conditions") or [])
        if self.status == self.original_status:
            return
        body = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": {
                "name": self.job.name,
                "namespace": self.ns,
                "resourceVersion": self.job.metadata.get("resourceVersion"),
            },
            "status": self.status,
        }
        self._write("update_status", "mpijobs/status", self.job.name, body)


def resource_exists_message(name: str, kind: str) -> str:
    return f'Resource "{name}" of Kind "{kind}" already exists and is not managed by MPIJob'


def _job_finished(job: dict[str, Any]) -> bool:
    return any(
        cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True"
        for cond in (job.get("status") or {}).get("conditions") or []
    )


def _job_suspended(job: dict[str, Any]) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def _pod_ready(pod: dict[str, Any]) -> bool:
    return any(
        cond.get("type") == "Ready" and cond.get("status") == "True"
        for cond in (pod.get("status") or {}).get("conditions") or []
    )


__all__ = [
    "NORMAL",
    "Action",
    "ClusterView",
    "Plan",
    "SyncContext",
    "plan_sync",
    "resource_exists_message",
]
