"""One reconcile of one MPIJob key: read the caches, plan, write, record, count."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from datetime import UTC, datetime
from typing import Any, Final

from gang import GangKind, GangScheduler
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.controller.admission import AdmissionCache
from mpi_operator.controller.execute import Writer, execute
from mpi_operator.controller.plan import Action, Plan, SyncContext, plan_sync
from mpi_operator.controller.status import Event
from mpi_operator.operator import metrics
from mpi_operator.operator.caches import Caches
from mpi_operator.operator.capacity import NudgeSchedule
from mpi_operator.operator.mpijobs import MPIJOBS
from mpi_operator.runtime.controller import Result
from mpi_operator.runtime.echoes import OwnWrites
from mpi_operator.runtime.events import EventRecorder
from mpi_operator.runtime.expectations import Expectations, Written
from mpi_operator.runtime.objects import Object, make_key, split_key

log = logging.getLogger(__name__)

"""The reconciler's name in logs and in controller-runtime's metrics (``controller=...``)."""


STATUS_RESOURCE: Final = f"{MPIJOBS.plural}/status"
# controller-runtime's advice for a conflict: requeue after a short delay, not with backoff.
CONFLICT_RETRY_SECONDS: Final = 1.0


class SyncError(Exception):
    """The sync stopped before it was done; the key is retried with backoff."""


def rfc3339_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class MPIJobReconciler:
    def __init__(
        self,
        caches: Caches,
        writer: Writer,
        recorder: EventRecorder,
        gang: GangScheduler | None,
        static_facts: ClusterFacts | None = None,
        now: Callable[[], str] = rfc3339_now,
        expectations: Expectations | None = None,
        pool: Executor | None = None,
        nudges: NudgeSchedule | None = None,
        own_writes: OwnWrites | None = None,
        failure_log_tail: bool = True,
        unserved: Sequence[GangKind] = (),
    ) -> None:
        self._caches = caches
        self._view = caches.view()
        self._writer = writer
        self._recorder = recorder
        self._gang = gang
        self._static_facts = static_facts or ClusterFacts()
        self._now = now
        self._expectations = expectations or Expectations()
        self._pool = pool
        self._nudges = nudges
        self._admissions = AdmissionCache()
        self._own_writes = OwnWrites() if own_writes is None else own_writes
        self._failure_log_tail = failure_log_tail
        self._unserved = unserved

    def __call__(self, key: str) -> Result | None:
        obj = self._caches.mpijobs.store.get(key)
        if obj is None:
            # Children carry owner references; the garbage collector removes them.
            log.debug("mpijob %s is gone", key)
            self._expectations.forget(key)
            self._admissions.forget(*split_key(key))
            self._own_writes.forget(key)
            if self._nudges is not None:
                self._nudges.forget(key)
            return None
        wait = self._expectations.wait_left(key, self._cached)
        if wait is not None:
            # Our last writes are not in the caches yet: a plan now would repeat them or
            # write status over a version we replaced. Their cache events enqueue the key.
            log.debug("caches behind our last writes; sync skipped")
            self._own_writes.waiting(key, True)
            return Result(requeue_after=wait)
        self._own_writes.waiting(key, False)
        facts = self._caches.facts(self._static_facts)
        nudge = self._nudges is not None and self._nudges.take(key)
        ctx = SyncContext(
            facts,
            self._gang,
            self._now(),
            nudge=nudge,
            admit=self._admissions.admit,
            failure_log_tail=self._failure_log_tail,
            unserved=self._unserved,
        )
        plan = plan_sync(obj, self._view, ctx)

        def announce(event: Event) -> None:
            self._recorder.event(obj, event.type, event.reason, event.message)

        outcome = execute(plan, self._writer, announce, self._pool)
        self._expectations.expect(key, self._awaited(outcome.written))
        self._remember_own_writes(key, outcome.written, continued=plan.continued)
        self._count_nudge(key, plan, outcome.written)
        if outcome.done == len(plan.actions):
            self._count(obj, plan, outcome.written)
        if outcome.cache_behind:
            # The cache is behind a newer version of the object: the event that brings it
            # enqueues the key; the delay only covers an event that never comes.
            log.debug("conflict, requeued: %s", outcome.error)
            return Result(requeue_after=CONFLICT_RETRY_SECONDS)
        if outcome.error is not None:
            # Everything else, an object of the job's name that someone else owns included
            # (whether the cache showed it or a create met it), is an error retried with
            # backoff, as upstream's.
            raise SyncError(outcome.error)
        if plan.requeue_after is not None:
            return Result(requeue_after=plan.requeue_after)
        return None

    def _remember_own_writes(
        self,
        key: str,
        written: Sequence[tuple[Action, dict[str, Any] | None]],
        *,
        continued: bool,
    ) -> None:
        """What each write of a cached kind made, so its watch event is known for ours; not
        the status write of a sync that the next one continues from."""
        for resource, action, answer in self._of_cached_kinds(written):
            if action.verb == "delete" or (continued and action.resource == STATUS_RESOURCE):
                continue
            version = _version(answer)
            if version:
                self._own_writes.wrote(key, resource, action.namespace, action.name, version)

    def _of_cached_kinds(
        self, written: Sequence[tuple[Action, dict[str, Any] | None]]
    ) -> Iterator[tuple[str, Action, dict[str, Any] | None]]:
        """The writes of kinds the caches hold, each with its resource plural."""
        for action, answer in written:
            resource = action.resource.partition("/")[0]
            if resource == MPIJOBS.plural or resource in self._caches.children:
                yield resource, action, answer

    def _cached(self, resource: str, namespace: str, name: str) -> Object | None:
        if resource == MPIJOBS.plural:
            return self._caches.mpijobs.store.get(make_key(namespace, name))
        return self._view.get(resource, namespace, name)

    def _awaited(
        self, written: Sequence[tuple[Action, dict[str, Any] | None]]
    ) -> Iterator[Written]:
        """The writes whose effect the caches will show: creates, changing updates and
        uid-bound deletes of cached kinds. (A plain delete planned from a stale cache only
        meets a harmless 404; a replaced worker's must not be counted twice.)"""
        for resource, action, answer in self._of_cached_kinds(written):
            if action.verb == "create":
                yield Written(resource, action.namespace, action.name)
            elif action.deleted_uid is not None:
                yield Written(
                    resource, action.namespace, action.name, deleted_uid=action.deleted_uid
                )
            elif action.verb in ("update", "update_status"):
                replaced = _version(action.body)
                if replaced and _version(answer) != replaced:
                    yield Written(resource, action.namespace, action.name, replaced)

    def _count_nudge(
        self, key: str, plan: Plan, written: Sequence[tuple[Action, dict[str, Any] | None]]
    ) -> None:
        """Count a nudge the API server took; ask again for one the sync stopped before."""
        if not plan.nudged or self._nudges is None:
            return
        if any(action.verb == "patch" for action, _ in written):
            metrics.GANG_CAPACITY_NUDGES.inc()
        else:
            self._nudges.request([key])

    def _count(
        self, obj: Object, plan: Plan, written: Sequence[tuple[Action, dict[str, Any] | None]]
    ) -> None:
        """Upstream's counters and the job-time histograms, moved only once the status write
        that records them landed."""
        for action, answer in written:
            if action.resource == STATUS_RESOURCE:
                # The write carried the cached resourceVersion: the status it replaced is
                # the cached one, so what changed between them happened exactly once.
                stored = (answer or action.body or {}).get("status") or {}
                metrics.observe_transitions(obj["metadata"], obj.get("status") or {}, stored)
        if plan.created:
            metrics.JOBS_CREATED.inc()
        if plan.succeeded:
            metrics.JOBS_SUCCESSFUL.inc()
        if plan.failed:
            metrics.JOBS_FAILED.inc()
        if plan.launcher_name:
            namespace = obj["metadata"].get("namespace", "")
            metrics.JOB_INFO.labels(plan.launcher_name, namespace).set(1)


def _version(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")
