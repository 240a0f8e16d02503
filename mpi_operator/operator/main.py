"""The operator process: clients, probes, leader election, informers, workers, shutdown.

The start-up order follows upstream's: metrics first (every replica serves them), then a check
that the CRD is installed, then the health server, then the Lease; only the leader builds the
caches and runs the workers, caching the gang scheduler's kinds only while the API server
serves them all (``served``), so a missing PodGroup CRD never holds readiness back. SIGTERM
and SIGINT stop everything cleanly: workers finish their current key, events are flushed and
the Lease is handed back for a standby to take at once.
"""

from __future__ import annotations

import gc
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import Final

from gang import (
    GangKind,
    GangScheduler,
    cluster_inputs_of,
    gang_kinds_of,
    gang_resources_of,
    select_gang_scheduler,
)
from mpi_operator import __version__
from mpi_operator.controller.execute import MAX_CONCURRENT_WRITES
from mpi_operator.operator.caches import (
    MPIJOBS,
    Caches,
    build_caches,
    child_resources,
    enqueue_gang_input_users,
    enqueue_owner,
    gang_resources,
    waiting_gang_objects,
)
from mpi_operator.operator.capacity import Change, NudgeSchedule, gangs_to_nudge, watch_capacity
from mpi_operator.operator.logs import configure_logging
from mpi_operator.operator.options import DEFAULT_LEASE_NAME, Options
from mpi_operator.operator.reconciler import RECONCILER_NAME, MPIJobReconciler, SyncError
from mpi_operator.operator.served import ask_served, describe_unserved, watch_served
from mpi_operator.operator.writer import ApiWriter
from mpi_operator.runtime.client import (
    ApiError,
    Client,
    Resource,
    is_not_found,
)
from mpi_operator.runtime.controller import Controller
from mpi_operator.runtime.credentials import ConfigError
from mpi_operator.runtime.echoes import OwnWrites
from mpi_operator.runtime.events import WRITERS as EVENT_WRITERS
from mpi_operator.runtime.events import ClientEventSink, EventRecorder
from mpi_operator.runtime.health import HealthServer, start_metrics_server
from mpi_operator.runtime.informer import wait_for_cache_sync
from mpi_operator.runtime.leader import IS_LEADER, LeaderElectionConfig, LeaderElector
from mpi_operator.runtime.objects import Object, object_key
from mpi_operator.runtime.ratelimit import controller_rate_limiter
from mpi_operator.runtime.workqueue import RateLimitingQueue

log = logging.getLogger("mpi_operator")

EVENT_COMPONENT: Final = "mpi-job-controller"
USER_AGENT: Final = "mpi-operator"
MAX_WRITE_THREADS: Final = 32
# Allocations between young collections (CPython's default is 700).
YOUNG_COLLECTION_THRESHOLD: Final = 10_000
CHILD_EVENTS_QUIET: Final = 1.0
CHILD_EVENTS_LONGEST: Final = 5.0
"""A child's change syncs its job once the job's children have been quiet for a second, at
most five seconds after the first change: a stream of pods starting is one sync."""
EXIT_LOST_LEADERSHIP: Final = 1
EXIT_NO_CRD: Final = 1
EXIT_NO_CONFIG: Final = 1


def own_budget_groups(gang: GangScheduler | None) -> tuple[str, ...]:
    """API groups that get a request budget of their own, as upstream's clientsets have:
    kubeflow.org (MPIJobs) and the gang scheduler's groups; Kubernetes' own groups share one."""
    groups = [MPIJOBS.group]
    groups.extend(resource.group for resource in gang_resources_of(gang))
    inputs = cluster_inputs_of(gang)
    watched = inputs.watched_resources if inputs is not None else ()
    groups.extend(resource.group for resource in watched)
    return tuple(dict.fromkeys(groups))


def resources_for(gang: GangScheduler | None) -> dict[str, Resource]:
    """Where each resource a sync plan writes lives in the API."""
    resources = [*child_resources(), MPIJOBS, *gang_resources(gang)]
    return {resource.plural: resource for resource in resources}


class Operator:
    """The leader's work: caches, queue, workers. ``run`` blocks until ``stop`` is set."""

    def __init__(self, client: Client, options: Options) -> None:
        self.options = options
        self.client = client
        self.gang = select_gang_scheduler(options.gang_scheduling or None)
        self.caches: Caches | None = None
        self.ready = threading.Event()

    def run(self, stop: threading.Event) -> None:
        """Lead until ``stop``: caches built for the kinds the API server serves, built again
        whenever that changes (a gang scheduler's CRD installed or removed)."""
        # Once leading, not at start: the full collection it begins with is CPU a standby
        # and the Lease's acquisition need not wait for.
        tune_garbage_collector()
        options, client = self.options, self.client
        if not gang_kinds_of(self.gang):
            self._run_caches(stop, self.gang, ())
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
                self._run_caches(session, served.gang, served.unserved)
            finally:
                session.set()

    def _run_caches(
        self, stop: threading.Event, gang: GangScheduler | None, unserved: tuple[GangKind, ...]
    ) -> None:
        """Caches, queue and workers until ``stop``, for ``gang`` (the strategy in the
        versions served); the gang's kinds cached only when none of them is ``unserved``."""
        options, client = self.options, self.client
        caches = build_caches(client, options.namespace, gang, gang_kinds_served=not unserved)
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
        nudges = self._nudge_on_capacity(caches, gang, queue)
        recorder = EventRecorder(ClientEventSink(client), EVENT_COMPONENT)
        # Writes of one sync that do not depend on each other (worker pods) go out together.
        pool = ThreadPoolExecutor(write_threads(options.threadiness), "writes")
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
        for informer in caches.started:
            informer.start()
        try:
            while not stop.is_set() and not wait_for_cache_sync(caches.all, timeout=5.0):
                log.info("waiting for caches to sync")
            if stop.is_set():
                return
            log.info("caches synced; starting %d workers", options.threadiness)
            self.ready.set()
            controller.run(stop)
        finally:
            self.ready.clear()
            for informer in caches.started:
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


def write_threads(threadiness: int) -> int:
    """Threads sending the concurrent writes of all syncs together."""
    return min(MAX_WRITE_THREADS, threadiness * MAX_CONCURRENT_WRITES)


def requests_in_flight(threadiness: int) -> int:
    """Requests sent at once: one per worker and one round of a sync's concurrent writes. More
    in flight did not make more jobs a second on 2 cores, and each costs a handle's memory
    (docs/performance.md)."""
    return threadiness + MAX_CONCURRENT_WRITES


def connection_pool_size(threadiness: int) -> int:
    """HTTP connections per client: every worker and write thread, the watches (up to 16) and
    the event writers each get one without opening and closing connections under load."""
    return max(32, threadiness + write_threads(threadiness) + 16 + EVENT_WRITERS)


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


def check_crd(client: Client, namespace: str) -> bool:
    """False (after saying why) when the MPIJob CRD is not installed."""
    try:
        # One request: following the continue token would page through every MPIJob, one
        # per request, before the first reconcile.
        client.list_first_page(MPIJOBS, namespace or None, limit=1)
    except ApiError as error:
        if is_not_found(error):
            log.error("CRD doesn't exist. Exiting: install crds/kubeflow.org_mpijobs.yaml first")
            return False
        log.warning("could not check for the MPIJob CRD: %s", error)
    return True


def run(options: Options, ignored_flags: Sequence[str] = ()) -> int:
    configure_logging(options.verbosity, options.log_format)
    log.info(
        "mpi-operator %s starting: namespace=%s gang-scheduling=%s threadiness=%d",
        __version__,
        options.namespace or "(all)",
        options.gang_scheduling or "(none)",
        options.threadiness,
    )
    if ignored_flags:
        log.info("ignoring klog's flags, which set nothing here: %s", " ".join(ignored_flags))
    metrics_server = None
    if options.monitoring_port:
        metrics_server = start_metrics_server(options.monitoring_port, options.bind_address)
    try:
        client = Client.from_kubeconfig(
            options.kubeconfig or None,
            master=options.master or None,
            user_agent=USER_AGENT,
            qps=options.kube_api_qps,
            burst=options.kube_api_burst,
            pool_maxsize=connection_pool_size(options.threadiness),
            max_requests_in_flight=requests_in_flight(options.threadiness),
            own_budget_groups=own_budget_groups(
                select_gang_scheduler(options.gang_scheduling or None)
            ),
        )
    except (ConfigError, OSError) as error:
        log.error("cannot load the cluster configuration: %s", error)
        if metrics_server is not None:
            metrics_server.stop()
        return EXIT_NO_CONFIG
    stop = threading.Event()
    _stop_on_signals(stop)
    if not check_crd(client, options.namespace):
        return EXIT_NO_CRD
    operator = Operator(client, options)
    elected = threading.Event()
    health = HealthServer(options.bind_address, options.health_port)
    health.add_healthz("ping", lambda: True)
    # A standby is ready to take over; the leader once its caches are complete.
    health.add_readyz("caches", lambda: operator.ready.is_set() or not elected.is_set())
    health.start()
    lost = False
    try:
        if options.leader_elect:
            lost = _lead(client, options, operator, elected, stop, health)
        else:
            elected.set()
            IS_LEADER.set(1)
            operator.run(stop)
    finally:
        health.stop()
        if metrics_server is not None:
            metrics_server.stop()
        client.close()
    if lost:
        log.error("leader election lost")
        return EXIT_LOST_LEADERSHIP
    log.info("stopped")
    return 0


def tune_garbage_collector() -> None:
    """Keep the cyclic collector off what lives as long as the process, and run it less often.

    Its passes were 6% of the CPU of a 1,000-job run, most of them walking objects that never
    die (modules, pydantic's schemas: frozen here, once started) and young objects that die on
    their own (decoded events, a sync's dicts) a few thousand allocations later (see
    docs/performance.md)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])


def _lead(
    client: Client,
    options: Options,
    operator: Operator,
    elected: threading.Event,
    stop: threading.Event,
    health: HealthServer,
) -> bool:
    """Run ``operator`` while holding the Lease; True when leadership was lost, not given up."""
    config = LeaderElectionConfig(
        DEFAULT_LEASE_NAME,
        options.lock_namespace,
        missing_namespace_advice=(
            f"create it (kubectl create namespace {options.lock_namespace}) or pass "
            "--lock-namespace with an existing namespace"
        ),
    )

    def lead(stopped: threading.Event) -> None:
        elected.set()
        operator.run(stopped)

    elector = LeaderElector(
        config,
        client.with_options(user_agent="leader-election", request_timeout=config.renew_deadline),
        on_started_leading=lead,
    )
    health.add_healthz("leaderElection", elector.healthy)
    health.add_readyz("leaseNamespace", elector.can_campaign)
    elector.run(stop)
    return elected.is_set() and not stop.is_set()


def _stop_on_signals(stop: threading.Event) -> None:
    def handle(signum: int, frame: FrameType | None) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
