"""The leader's work: caches, queue, workers, built once the Lease is held.

Apart from the process around it (``main``), as upstream builds its caches only once it leads:
this module loads after the Lease is taken, and the sync's own modules (the MPIJob models, the
controller) while the caches list, so a start, a restart and a failover hold the Lease without
waiting for them, and the lists do not wait for them either.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from gang import GangScheduler, cluster_inputs_of, select_gang_scheduler
from mpi_operator.operator.caches import (
    Caches,
    asks_for_domain,
    build_caches,
    child_resources,
    domain_waiting_jobs,
    enqueue_gang_input_users,
    enqueue_gang_owners,
    enqueue_owner,
    gang_resources,
    waiting_gang_objects,
)
from mpi_operator.operator.capacity import (
    Change,
    NudgeSchedule,
    frees_capacity,
    gangs_to_nudge,
    watch_capacity,
)
from mpi_operator.operator.mpijobs import MPIJOBS
from mpi_operator.operator.options import Options
from mpi_operator.operator.served import (
    ServedGang,
    ask_served,
    asks_served,
    describe_unserved,
    watch_served,
)
from mpi_operator.runtime.client import NODES, PODS, ApiError, Client, Resource
from mpi_operator.runtime.controller import Controller
from mpi_operator.runtime.echoes import OwnWrites
from mpi_operator.runtime.events import ClientEventSink, EventRecorder
from mpi_operator.runtime.informer import wait_for_cache_sync
from mpi_operator.runtime.objects import Object, object_key
from mpi_operator.runtime.ratelimit import controller_rate_limiter
from mpi_operator.runtime.workqueue import RateLimitingQueue

log = logging.getLogger("mpi_operator")

EVENT_COMPONENT: Final = "mpi-job-controller"
RECONCILER_NAME: Final = "mpijob"
# Allocations between young collections (CPython's default is 700).
YOUNG_COLLECTION_THRESHOLD: Final = 10_000
CHILD_EVENTS_QUIET: Final = 1.0
CHILD_EVENTS_LONGEST: Final = 5.0
"""A child's change syncs its job once the job's children have been quiet for a second, at
most five seconds after the first change: a stream of pods starting is one sync."""


def resources_for(gang: GangScheduler | None) -> dict[str, Resource]:
    """Where each resource a sync plan writes lives in the API."""
    resources = [*child_resources(), MPIJOBS, *gang_resources(gang)]
    return {resource.plural: resource for resource in resources}


class Operator:
    """The leader's work: caches, queue, workers. ``run`` blocks until ``stop`` is set."""

    def __init__(
        self, client: Client, options: Options, ready: threading.Event, write_threads: int
    ) -> None:
        self.options = options
        self.client = client
        self.gang = select_gang_scheduler(options.gang_scheduling or None)
        self.caches: Caches | None = None
        self.ready = ready
        self.write_threads = write_threads

    def run(self, stop: threading.Event) -> None:
        """Lead until ``stop``: caches built for the kinds the API server serves, built again
        whenever that changes (a gang scheduler's CRD installed or removed, its layout kinds'
        included)."""
        options, client = self.options, self.client
        if not asks_served(self.gang):
            self._run_caches(stop, ServedGang(self.gang, ()))
            return
        while not stop.is_set():
            served = ask_served(client, options.namespace, self.gang)
            if served.unserved:
                log.warning("%s", describe_unserved(served.unserved))
            session = threading.Event()
            watcher = threading.Thread(
                target=watch_served,
                args=(client, options.namespace, self.gang, served, stop, session),
                name="served-kinds",
                daemon=True,
            )
            watcher.start()
            try:
                self._run_caches(session, served)
            finally:
                session.set()

    def _run_caches(self, stop: threading.Event, served: ServedGang) -> None:
        """Caches, queue and workers until ``stop``, for ``served.gang`` (the strategy in the
        versions served); the gang's kinds cached only when none of them is unserved, its
        layout kinds when served."""
        options, client = self.options, self.client
        gang, unserved = served.gang, served.unserved
        caches = build_caches(
            client,
            options.namespace,
            gang,
            gang_kinds_served=not unserved,
            layout_served=served.layout,
        )
        self.caches = caches
        queue = RateLimitingQueue(
            RECONCILER_NAME,
            controller_rate_limiter(
                options.controller_queue_rate_limit, options.controller_queue_burst
            ),
        )
        own_writes = OwnWrites()
        caches.mpijobs.add_event_handler(
            on_add=lambda obj: queue.add(object_key(obj)),
            on_update=lambda old, new: _enqueue_changed(queue, old, new, own_writes),
            on_delete=lambda obj: queue.add(object_key(obj)),
        )
        # A job's children change in bursts (each worker turning Running, its launcher pod
        # after them): one sync after the burst writes the status and the ConfigMap once.
        to_owner = enqueue_owner(
            caches,
            lambda key: queue.add_when_quiet(key, CHILD_EVENTS_QUIET, CHILD_EVENTS_LONGEST),
        )
        for resource, informer in caches.children.items():
            informer.add_event_handler(*_child_handlers(resource, to_owner, own_writes))

        # A gang input (a queue opening, say) concerns only the jobs whose gang objects the
        # strategy reads it for; schedulers rewrite them often (Volcano: queue status).
        inputs = cluster_inputs_of(gang)
        for plural, informer in caches.gang_inputs.items():
            assert inputs is not None, "gang inputs are cached only for a strategy that reads them"
            to_users = enqueue_gang_input_users(caches, inputs, plural, queue.add)
            informer.add_event_handler(to_users, to_users, to_users)
        # A layout change (a HyperNode) may change any job's gang objects: each job that has
        # one syncs once the layout is quiet.
        for informer in caches.layout.informers:
            to_gang_owners = enqueue_gang_owners(
                caches,
                gang,
                lambda key: queue.add_when_quiet(key, CHILD_EVENTS_QUIET, CHILD_EVENTS_LONGEST),
            )
            informer.add_event_handler(to_gang_owners, to_gang_owners, to_gang_owners)
        nudges = self._nudge_on_capacity(caches, gang, queue)
        _sync_domain_waiting_on_capacity(caches, queue)
        recorder = EventRecorder(ClientEventSink(client), EVENT_COMPONENT)
        # Writes of one sync that do not depend on each other (worker pods) go out together.
        pool = ThreadPoolExecutor(self.write_threads, "writes")
        for informer in caches.started:
            informer.start()
        try:
            # Imported while the caches list: the sync's modules (the models, the controller)
            # are most of the import time, and the lists mostly wait on the API server.
            from mpi_operator.operator.reconciler import MPIJobReconciler, SyncError
            from mpi_operator.operator.writer import ApiWriter

            # Once leading and the modules loaded, not at start: the freeze then covers the
            # sync's modules, which a standby never loads.
            tune_garbage_collector()
            reconciler = MPIJobReconciler(
                caches,
                ApiWriter(client, resources_for(gang)),
                recorder,
                gang,
                options.static_facts(),
                pool=pool,
                nudges=nudges,
                own_writes=own_writes,
                failure_log_tail=options.failure_log_tail,
                unserved=unserved,
            )
            controller = Controller(
                RECONCILER_NAME,
                queue,
                reconciler,
                options.threadiness,
                quiet_errors=(ApiError, SyncError),
            )
            while not stop.is_set() and not wait_for_cache_sync(caches.all, timeout=5.0):
                log.info("waiting for caches to sync")
            if stop.is_set():
                return
            log.info("caches synced; starting %d workers", options.threadiness)
            self.ready.set()
            controller.run(stop)
        finally:
            self.ready.clear()
            for informer in caches.owned:
                informer.stop()
            pool.shutdown(wait=True)
            recorder.flush(5.0)
            recorder.stop()

    def _nudge_on_capacity(
        self, caches: Caches, gang: GangScheduler | None, queue: RateLimitingQueue
    ) -> NudgeSchedule | None:
        """When the strategy's scheduler needs it: a change that may free capacity marks the
        jobs of waiting gangs, whose syncs then nudge them (at most once per job per interval)."""
        if gang is None or not caches.capacity:
            return None
        nudges = NudgeSchedule(lambda key, delay: queue.add_when_quiet(key, delay, delay))

        def on_change(change: Change) -> None:
            nudges.request(gangs_to_nudge(change, lambda: waiting_gang_objects(caches, gang)))

        watch_capacity(caches.capacity, on_change)
        return nudges


def _sync_domain_waiting_on_capacity(caches: Caches, queue: RateLimitingQueue) -> None:
    """A change that may free capacity syncs every job no topology domain had room for, once
    the changes are quiet: its sync counts the room again. Bound pods watched on demand sync,
    once listed, every job that asks for a domain: the first count found none."""
    if caches.nodes is None or caches.bound_pods is None:
        return
    if caches.loads is not None:

        def count_again() -> None:
            for job in caches.mpijobs.store.list():
                if asks_for_domain(job):
                    queue.add(object_key(job))

        caches.loads.on_listed(count_again)

    def on_change(change: Change) -> None:
        if frees_capacity(change):
            for key in domain_waiting_jobs(caches):
                queue.add_when_quiet(key, CHILD_EVENTS_QUIET, CHILD_EVENTS_LONGEST)

    watch_capacity({NODES.plural: caches.nodes, PODS.plural: caches.bound_pods}, on_change)


def _enqueue_changed(
    queue: RateLimitingQueue, old: Object, new: Object, own_writes: OwnWrites
) -> None:
    # A relist replays every object as an update; only real changes need a sync, and our own
    # status write coming back changes nothing its sync did not know.
    if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
        return
    if not own_writes.is_echo(MPIJOBS.plural, new):
        queue.add(object_key(new))


def _child_handlers(
    resource: str, to_owner: Callable[[Object], None], own_writes: OwnWrites
) -> tuple[Callable[[Object], None], Callable[[Object, Object], None], Callable[[Object], None]]:
    """A child's add, update and delete handlers: its job is enqueued for each, except for
    an event that only shows our own write of the child."""

    def added(obj: Object) -> None:
        if not own_writes.is_echo(resource, obj):
            to_owner(obj)

    def updated(old: Object, new: Object) -> None:
        if own_writes.is_echo(resource, new):
            return
        # A changed owner reference moves a child: both jobs need a look.
        to_owner(old)
        to_owner(new)

    def deleted(obj: Object) -> None:
        own_writes.is_echo(resource, obj)  # forgets a write of the object, if any
        to_owner(obj)

    return added, updated, deleted


def tune_garbage_collector() -> None:
    """Keep the cyclic collector off what lives as long as the process, and run it less often.

    Its passes were 6% of the CPU of a 1,000-job run, most of them walking objects that never
    die (modules, pydantic's schemas: frozen here, once started) and young objects that die on
    their own (decoded events, a sync's dicts) a few thousand allocations later (see
    docs/performance.md).

    No full collection first: once the sync's modules are loaded it found a dozen unreachable
    objects, for 8-16 ms of CPU that a restart's first sync waits for; freezing them costs
    nothing, and objects freed by their reference counts are freed frozen or not."""
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
