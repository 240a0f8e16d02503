"""One reconcile of one MPIJob key: read the caches, plan, write, record, count."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from gang import GangScheduler
from mpi_operator.controller.execute import Writer, execute
from mpi_operator.controller.plan import Plan, SyncContext, plan_sync
from mpi_operator.controller.status import Event
from mpi_operator.operator import metrics
from mpi_operator.operator.caches import Caches
from mpi_operator.runtime.controller import Result
from mpi_operator.runtime.events import EventRecorder
from mpi_operator.runtime.objects import Object

log = logging.getLogger(__name__)

CONTROLLER_NAME: Final = "mpijob"


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
        cluster_domain: str = "",
        now: Callable[[], str] = rfc3339_now,
    ) -> None:
        self._caches = caches
        self._view = caches.view()
        self._writer = writer
        self._recorder = recorder
        self._gang = gang
        self._cluster_domain = cluster_domain
        self._now = now

    def __call__(self, key: str) -> Result | None:
        obj = self._caches.mpijobs.store.get(key)
        if obj is None:
            # Children carry owner references; the garbage collector removes them.
            log.debug("mpijob %s is gone", key)
            return None
        facts = self._caches.facts(self._cluster_domain)
        plan = plan_sync(obj, self._view, SyncContext(facts, self._gang, self._now()))

        def announce(event: Event) -> None:
            self._recorder.event(obj, event.type, event.reason, event.message)

        outcome = execute(plan, self._writer, announce)
        if outcome.done == len(plan.actions):
            self._count(obj, plan)
        if outcome.cache_behind:
            # The cache is behind our own last write: sync again once it has caught up.
            log.debug("conflict, requeued: %s", outcome.error)
            return Result(requeue=True)
        if outcome.error is not None:
            # Everything else, an object of the job's name that someone else owns included
            # (whether the cache showed it or a create met it), is an error retried with
            # backoff, as upstream's.
            raise SyncError(outcome.error)
        return None

    def _count(self, obj: Object, plan: Plan) -> None:
        """Upstream's counters, moved only once the status write that records them landed."""
        if plan.created:
            metrics.JOBS_CREATED.inc()
        if plan.succeeded:
            metrics.JOBS_SUCCESSFUL.inc()
        if plan.failed:
            metrics.JOBS_FAILED.inc()
        if plan.launcher_name:
            namespace = obj["metadata"].get("namespace", "")
            metrics.JOB_INFO.labels(plan.launcher_name, namespace).set(1)
