"""The operator process: client, probes, leader election, shutdown.

Start-up: a check that the CRD is installed, the first attempt at the Lease, then the metrics
and probe servers (every replica serves them; upstream starts them before the Lease, but their
imports are a third of the start's, and the Lease need not wait for them); only the leader
imports and builds the caches and runs the workers (``leading``), caching the gang scheduler's
kinds only while the API server serves them all (``served``), so a missing PodGroup CRD never
holds readiness back. SIGTERM and SIGINT stop everything cleanly: workers finish their current
key, events are flushed and the Lease is handed back for a standby to take at once.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Final

from gang import GangScheduler, cluster_inputs_of, gang_resources_of, select_gang_scheduler
from mpi_operator import __version__
from mpi_operator.controller.limits import MAX_CONCURRENT_WRITES
from mpi_operator.operator.logs import configure_logging
from mpi_operator.operator.mpijobs import MPIJOBS
from mpi_operator.operator.options import DEFAULT_LEASE_NAME, Options
from mpi_operator.runtime.client import ApiError, Client, is_not_found
from mpi_operator.runtime.credentials import ConfigError
from mpi_operator.runtime.events import WRITERS as EVENT_WRITERS
from mpi_operator.runtime.leader import IS_LEADER, LeaderElectionConfig, LeaderElector

if TYPE_CHECKING:
    from mpi_operator.runtime.health import HealthServer, MetricsServer

log = logging.getLogger("mpi_operator")

USER_AGENT: Final = "mpi-operator"
MAX_WRITE_THREADS: Final = 32
EXIT_LOST_LEADERSHIP: Final = 1
EXIT_NO_CRD: Final = 1
EXIT_NO_CONFIG: Final = 1
EXIT_NO_PORT: Final = 1


def own_budget_groups(gang: GangScheduler | None) -> tuple[str, ...]:
    """API groups that get a request budget of their own, as upstream's clientsets have:
    kubeflow.org (MPIJobs) and the gang scheduler's groups; Kubernetes' own groups share one."""
    groups = [MPIJOBS.group]
    groups.extend(resource.group for resource in gang_resources_of(gang))
    inputs = cluster_inputs_of(gang)
    watched = inputs.watched_resources if inputs is not None else ()
    groups.extend(resource.group for resource in watched)
    return tuple(dict.fromkeys(groups))


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
        return EXIT_NO_CONFIG
    stop = threading.Event()
    _stop_on_signals(stop)
    if not check_crd(client, options.namespace):
        return EXIT_NO_CRD
    endpoints = _Endpoints(options)
    lost = False
    try:
        if options.leader_elect:
            lost = _lead(client, options, endpoints, stop)
        else:
            endpoints.start(None)
            endpoints.elected.set()
            IS_LEADER.set(1)
            _operate(client, options, endpoints.caches_ready, stop)
    except PortError as error:
        log.error("%s", error)
        return EXIT_NO_PORT
    finally:
        endpoints.stop()
        client.close()
    if lost:
        log.error("leader election lost")
        return EXIT_LOST_LEADERSHIP
    log.info("stopped")
    return 0


class PortError(Exception):
    """A server's port cannot be bound (taken, or not ours to take)."""


class _Endpoints:
    """The metrics and probe servers. They start once the first attempt at the Lease has been
    answered: their imports (prometheus-client, ``http.server``) are a third of the start's, and
    a replica is not ready before that attempt anyway."""

    def __init__(self, options: Options) -> None:
        self._options = options
        self.caches_ready = threading.Event()
        self.elected = threading.Event()
        self._metrics: MetricsServer | None = None
        self._health: HealthServer | None = None

    def start(self, elector: LeaderElector | None) -> None:
        from mpi_operator.runtime.health import HealthServer, start_metrics_server

        options = self._options
        if options.monitoring_port:
            try:
                self._metrics = start_metrics_server(options.monitoring_port, options.bind_address)
            except OSError as error:
                raise PortError(
                    f"cannot serve metrics on --monitoring-port {options.monitoring_port}: "
                    f"{error.strerror or error}"
                ) from error
        health = HealthServer(options.bind_address, options.health_port)
        health.add_healthz("ping", lambda: True)
        # A standby is ready to take over; the leader once its caches are complete.
        health.add_readyz("caches", lambda: self.caches_ready.is_set() or not self.elected.is_set())
        if elector is not None:
            health.add_healthz("leaderElection", elector.healthy)
            health.add_readyz("leaseNamespace", elector.can_campaign)
        try:
            health.start()
        except OSError as error:
            raise PortError(
                f"cannot serve /healthz and /readyz on --health-port {options.health_port}: "
                f"{error.strerror or error}"
            ) from error
        self._health = health

    def stop(self) -> None:
        if self._health is not None:
            self._health.stop()
        if self._metrics is not None:
            self._metrics.stop()


def _operate(
    client: Client, options: Options, caches_ready: threading.Event, stop: threading.Event
) -> None:
    """The leader's work until ``stop``."""
    # Imported once leading, not at start: the controller, the models and the caches are most
    # of the operator's import time, which the Lease's acquisition need not wait for.
    from mpi_operator.operator.leading import Operator

    Operator(client, options, caches_ready, write_threads(options.threadiness)).run(stop)


def _lead(client: Client, options: Options, endpoints: _Endpoints, stop: threading.Event) -> bool:
    """Run the leader's work while holding the Lease; True when leadership was lost, not given
    up."""
    config = LeaderElectionConfig(
        DEFAULT_LEASE_NAME,
        options.lock_namespace,
        missing_namespace_advice=(
            f"create it (kubectl create namespace {options.lock_namespace}) or pass "
            "--lock-namespace with an existing namespace"
        ),
    )

    def lead(stopped: threading.Event) -> None:
        endpoints.elected.set()
        _operate(client, options, endpoints.caches_ready, stopped)

    elector = LeaderElector(
        config,
        client.with_options(user_agent="leader-election", request_timeout=config.renew_deadline),
        on_started_leading=lead,
        after_first_attempt=lambda: endpoints.start(elector),
    )
    elector.run(stop)
    return endpoints.elected.is_set() and not stop.is_set()


def _stop_on_signals(stop: threading.Event) -> None:
    def handle(signum: int, frame: FrameType | None) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
