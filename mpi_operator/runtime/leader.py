"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's algorithm.

Why this is written here instead of using ``kubernetes.leaderelection`` + ``LeaseLock``
(present in kubernetes 37.0.2, and read before deciding):

* **It cannot be stopped.** ``LeaderElection.run()`` retries ``acquire`` forever with no stop
  signal, so a standby replica cannot shut down cleanly on SIGTERM, and there is no way to
  release the Lease on a clean shutdown (client-go's ``ReleaseOnCancel``): the next leader has to
  wait out the full lease duration after every rollout.
* **It exits the process from library code.** ``Config`` calls ``sys.exit`` on invalid durations
  and ``LeaderElection(None)`` does the same; we raise ``ValueError`` and let the CLI decide.
* **It cannot use our client.** ``LeaseLock`` builds ``CoordinationV1Api()`` on the global
  default configuration: no ``leader-election`` user agent, no client-side QPS, no request
  metrics, no short request timeout — and it goes through the typed models we avoid everywhere
  else.
* **Time.** Records are built with naive local ``datetime.fromtimestamp`` and round-tripped
  through strings, and expiry is judged on ``time.time()``, which jumps with NTP. Here expiry is
  judged, as in client-go, on the local *monotonic* time since the Lease last changed (no
  dependence on clock agreement between nodes), times are written as UTC MicroTime, and the
  clock is injectable so the whole state machine is unit-tested without sleeping.
* **Losing the lease does not stop the work** (the ``onstarted_leading`` thread keeps running),
  there is no healthz watchdog and ``leaseTransitions`` is never incremented. Here the callback
  receives an event that is set when leadership ends, and :meth:`LeaderElector.healthy`
  implements client-go's ``HealthzAdaptor``.

The algorithm is client-go's: a candidate creates the Lease or takes it over once the holder has
not renewed it for ``leaseDurationSeconds`` (measured locally from when we saw it change); the
leader renews every ``retry_period`` and gives up if no renewal succeeds within
``renew_deadline``. Timings default to upstream mpi-operator's 15 s / 5 s / 3 s.
"""

from __future__ import annotations

import copy
import logging
import random
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from mpi_operator.runtime.client import LEASES, ApiError, Resource, is_not_found
from mpi_operator.runtime.clock import REAL_CLOCK, Clock
from mpi_operator.runtime.counts import Level
from mpi_operator.runtime.objects import Object, resource_version_of

log = logging.getLogger(__name__)

IS_LEADER = Level("mpi_operator_is_leader", "1 while this replica holds the leader Lease.")

# client-go's JitterFactor for retries while not leading: waits of retry_period * [1, 2.2).
_JITTER = 1.2
# How often the error about a missing Lease namespace is repeated while it lasts (seconds).
_MISSING_NAMESPACE_REMINDER = 60.0


class LeaseClient(Protocol):
    """The calls leader election makes; :class:`~mpi_operator.runtime.client.Client` fits.

    Give it a request timeout no longer than the renew deadline, or one hung request can keep
    a leader believing it still leads."""

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Object: ...
    def create(self, resource: Resource, obj: Object, namespace: str | None = None) -> Object: ...
    def update(self, resource: Resource, obj: Object, namespace: str | None = None) -> Object: ...


def default_identity() -> str:
    """``<hostname>_<uuid>``, as upstream: unique even for two processes on one host."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    name: str
    namespace: str
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 5.0
    retry_period: float = 3.0
    release_on_cancel: bool = True
    """On a clean stop, hand the Lease back so a standby takes over at once."""
    healthz_tolerance: float = 20.0
    """How long past lease expiry a leader that cannot renew still reports healthy."""
    missing_namespace_advice: str = "create it"
    """What the error about a Lease namespace that does not exist tells the reader to do."""

    def __post_init__(self) -> None:
        if not self.name or not self.namespace or not self.identity:
            raise ValueError("leader election needs a lease name, namespace and identity")
        if self.retry_period <= 0:
            raise ValueError("retry_period must be positive")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if self.renew_deadline <= _JITTER * self.retry_period:
            raise ValueError(f"renew_deadline must be greater than {_JITTER} * retry_period")
        if self.lease_duration < 1:
            raise ValueError("lease_duration must be at least one second")


def format_micro_time(moment: datetime) -> str:
    """A ``metav1.MicroTime``: RFC 3339, UTC, microseconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class _Record:
    holder: str
    lease_duration: int
    transitions: int
    acquire_time: str

    @classmethod
    def of(cls, lease: Object) -> _Record:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration=int(spec.get("leaseDurationSeconds") or 0),
            transitions=int(spec.get("leaseTransitions") or 0),
            acquire_time=str(spec.get("acquireTime") or ""),
        )


class LeaderElector:
    """Campaigns for the Lease and runs ``on_started_leading`` while holding it.

    ``on_started_leading(stopped)`` runs on its own thread and should block until ``stopped`` is
    set (leadership lost, or :meth:`run`'s stop event set); when it returns or raises, this
    replica gives up leadership. ``on_stopped_leading()`` runs after leading ends, on the thread
    that called :meth:`run`. Upstream exits the process there; the caller decides.
    ``after_first_attempt()`` runs once, on that thread, when the first attempt at the Lease
    has been answered (or failed), before any leader's work.
    """

    def __init__(
        self,
        config: LeaderElectionConfig,
        client: LeaseClient,
        *,
        on_started_leading: Callable[[threading.Event], None],
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        after_first_attempt: Callable[[], None] | None = None,
        clock: Clock = REAL_CLOCK,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.config = config
        self._client = client
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._after_first_attempt = after_first_attempt
        self._clock = clock
        self._rng = rng
        self._lock = threading.Lock()
        self._lease: Object | None = None  # the last Lease read or written
        self._record: _Record | None = None
        self._observed_at = 0.0  # monotonic time when the Lease last changed (or we renewed)
        self._reported_leader = ""
        # Monotonic time of the last error about the Lease's missing namespace; None while the
        # namespace is not known to be missing.
        self._namespace_missing_since_report: float | None = None

    # -- state ---------------------------------------------------------------------------------

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def leader(self) -> str:
        """The holder of the Lease as last observed (``""`` when unknown or released)."""
        with self._lock:
            return self._record.holder if self._record else ""

    def is_leader(self) -> bool:
        return self.leader == self.config.identity

    def can_campaign(self) -> bool:
        """False while the Lease cannot exist because its namespace does not: no replica can
        lead then, so none is ready (a readiness check)."""
        with self._lock:
            return self._namespace_missing_since_report is None

    def healthy(self) -> bool:
        """False only when we lead and have not renewed for lease duration + tolerance: the
        process is stuck, and a liveness probe failing on it lets the kubelet restart it."""
        with self._lock:
            if self._record is None or self._record.holder != self.config.identity:
                return True
            overdue = self._clock.monotonic() - self._observed_at
        return overdue <= self.config.lease_duration + self.config.healthz_tolerance

    # -- the loop ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Campaign until elected or ``stop``; then lead until the Lease is lost or ``stop``."""
        if not self._acquire(stop):
            return
        IS_LEADER.set(1)
        stopped = threading.Event()
        work_ended = threading.Event()
        worker = threading.Thread(
            target=self._lead, args=(stopped, work_ended), name="leader-work", daemon=True
        )
        worker.start()
        try:
            self._renew(stop, work_ended)
        finally:
            stopped.set()
            IS_LEADER.set(0)
            if self.config.release_on_cancel and (stop.is_set() or work_ended.is_set()):
                # Only hand the Lease over once our work has really stopped: a successor must
                # never run next to us.
                worker.join(self.config.renew_deadline)
                if worker.is_alive():
                    log.warning("leader work still running: not releasing the Lease early")
                else:
                    self._release()
            if self._on_stopped is not None:
                try:
                    self._on_stopped()
                except Exception:
                    log.exception("on_stopped_leading failed")

    def _lead(self, stopped: threading.Event, work_ended: threading.Event) -> None:
        try:
            self._on_started(stopped)
        except Exception:
            log.exception("on_started_leading failed: giving up leadership")
        finally:
            work_ended.set()

    def _acquire(self, stop: threading.Event) -> bool:
        log.info("%s: campaigning for Lease %s", self.identity, self._lease_name())
        first = True
        while not stop.is_set():
            acquired = self.try_acquire_or_renew()
            if first and self._after_first_attempt is not None:
                # Before the leader's work starts, whatever the answer.
                self._after_first_attempt()
            first = False
            if acquired:
                log.info("%s: acquired Lease %s", self.identity, self._lease_name())
                return True
            delay = self.config.retry_period * (1.0 + self._rng() * _JITTER)
            self._clock.wait(stop, delay)
        return False

    def _renew(self, stop: threading.Event, work_ended: threading.Event) -> None:
        config = self.config
        while not stop.is_set():
            if work_ended.is_set():
                log.info("%s: leader work ended, giving up the Lease", self.identity)
                return
            deadline = self._clock.monotonic() + config.renew_deadline
            renewed = False
            while not stop.is_set():
                if self.try_acquire_or_renew():
                    renewed = True
                    break
                remaining = deadline - self._clock.monotonic()
                if remaining <= 0:
                    break
                self._clock.wait(stop, min(config.retry_period, remaining))
            if stop.is_set():
                return
            if not renewed:
                log.error(
                    "%s: failed to renew Lease %s within %s s: leadership lost",
                    self.identity,
                    self._lease_name(),
                    config.renew_deadline,
                )
                return
            self._clock.wait(stop, config.retry_period)

    def try_acquire_or_renew(self) -> bool:
        """One step of client-go's ``tryAcquireOrRenew``; True if we hold the Lease after it."""
        now = format_micro_time(self._clock.now())

        # Fast path for a leader: update the Lease we wrote last without reading it first. A
        # conflict means someone else wrote it, and the slow path below sorts that out.
        with self._lock:
            cached = self._lease if self._is_leader_locked() and self._lease_valid() else None
            record = self._record
        if cached is not None and record is not None:
            try:
                self._write(cached, record, now, create=False)
                return True
            except Exception as error:
                log.info("%s: optimistic renew failed (%s), re-reading", self.identity, error)

        try:
            lease: Object | None = self._client.get(LEASES, self.config.name, self.config.namespace)
        except ApiError as error:
            if not is_not_found(error):
                log.warning("%s: reading Lease %s: %s", self.identity, self._lease_name(), error)
                return False
            lease = None
        except Exception as error:
            log.warning("%s: reading Lease %s: %s", self.identity, self._lease_name(), error)
            return False

        if lease is None:
            fresh = _Record(self.identity, int(self.config.lease_duration), 0, now)
            try:
                self._write(self._new_lease(), fresh, now, create=True)
            except Exception as error:
                if is_not_found(error):
                    # A create answered 404 only when the namespace itself does not exist:
                    # retrying cannot help until someone acts, so say what to do.
                    self._report_missing_namespace()
                else:
                    log.info("%s: creating Lease %s: %s", self.identity, self._lease_name(), error)
                return False
            return True

        self._observe(lease)
        current = _Record.of(lease)
        with self._lock:
            held_by_other = (
                bool(current.holder) and current.holder != self.identity and self._lease_valid()
            )
        if held_by_other:
            return False
        # Renewing keeps acquireTime and the transition count; taking over bumps the count.
        if current.holder == self.identity:
            desired = _Record(
                self.identity,
                int(self.config.lease_duration),
                current.transitions,
                current.acquire_time,
            )
        else:
            desired = _Record(
                self.identity, int(self.config.lease_duration), current.transitions + 1, now
            )
        try:
            self._write(lease, desired, now, create=False)
        except Exception as error:
            log.info("%s: updating Lease %s: %s", self.identity, self._lease_name(), error)
            return False
        return True

    # -- helpers -------------------------------------------------------------------------------

    def _is_leader_locked(self) -> bool:
        return self._record is not None and self._record.holder == self.config.identity

    def _lease_valid(self) -> bool:
        """Whether the observed holder's lease is still running (call with the lock held)."""
        if self._record is None:
            return False
        duration = self._record.lease_duration or self.config.lease_duration
        return self._observed_at + duration > self._clock.monotonic()

    def _observe(self, lease: Object) -> None:
        """Note a Lease read from the server; restart the expiry timer if it changed."""
        record = _Record.of(lease)
        with self._lock:
            changed = self._lease is None or resource_version_of(
                self._lease
            ) != resource_version_of(lease)
            self._lease = lease
            self._record = record
            self._namespace_missing_since_report = None
            if changed:
                self._observed_at = self._clock.monotonic()
        if changed:
            self._report_leader(record.holder)

    def _report_missing_namespace(self) -> None:
        now = self._clock.monotonic()
        with self._lock:
            last = self._namespace_missing_since_report
            if last is not None and now - last < _MISSING_NAMESPACE_REMINDER:
                return
            self._namespace_missing_since_report = now
        log.error(
            "%s: cannot create Lease %s: namespace %s does not exist; %s. "
            "Not ready, and nothing is reconciled, until the Lease can be created.",
            self.identity,
            self._lease_name(),
            self.config.namespace,
            self.config.missing_namespace_advice,
        )

    def _write(self, lease: Object, record: _Record, now: str, *, create: bool) -> None:
        body = copy.deepcopy(lease)
        spec = body.setdefault("spec", {})
        spec["holderIdentity"] = record.holder
        spec["leaseDurationSeconds"] = record.lease_duration
        spec["acquireTime"] = record.acquire_time or now
        spec["renewTime"] = now
        spec["leaseTransitions"] = record.transitions
        if create:
            written = self._client.create(LEASES, body, self.config.namespace)
        else:
            written = self._client.update(LEASES, body, self.config.namespace)
        with self._lock:
            self._lease = written if written else body
            self._record = _Record.of(self._lease)
            self._observed_at = self._clock.monotonic()
            self._namespace_missing_since_report = None
        self._report_leader(record.holder)

    def _release(self) -> None:
        """Give the Lease up: empty holder, 1 s duration (client-go's ``release``)."""
        with self._lock:
            lease = self._lease if self._is_leader_locked() else None
            record = self._record
        if lease is None or record is None:
            return
        released = _Record("", 1, record.transitions, "")
        try:
            self._write(lease, released, format_micro_time(self._clock.now()), create=False)
            log.info("%s: released Lease %s", self.identity, self._lease_name())
        except Exception as error:
            log.warning("%s: releasing Lease %s: %s", self.identity, self._lease_name(), error)

    def _new_lease(self) -> Object:
        return {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.config.name, "namespace": self.config.namespace},
            "spec": {},
        }

    def _report_leader(self, holder: str) -> None:
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if holder:
            log.info("Lease %s is held by %s", self._lease_name(), holder)
        if holder and self._on_new_leader is not None:
            try:
                self._on_new_leader(holder)
            except Exception:
                log.exception("on_new_leader failed")

    def _lease_name(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"
