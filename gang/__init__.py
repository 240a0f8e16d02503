"""Gang scheduling strategies: everything scheduler-specific lives below this package.

The core operator only knows the ``GangScheduler`` protocol, its optional capabilities and
``select_gang_scheduler``. A new gang scheduler is one new module below ``gang/`` plus one entry
in ``_STRATEGIES`` (docs/gang-scheduling.md, "Adding a scheduler").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mpi_operator.api.cluster import ClusterFacts

if TYPE_CHECKING:
    # The models load with a strategy's module: flag parsing and the Lease need none of them.
    from mpi_operator.api.defaults import DefaultedMPIJob
    from mpi_operator.api.topology import JobTopology


@dataclass(frozen=True)
class GangState:
    """What the scheduler says about a gang, for the job's GangScheduled condition.

    ``scheduled`` is None when the scheduler has not decided anything yet.
    """

    scheduled: bool | None
    reason: str
    message: str
    # Recorded as a Warning event, not a Normal one: the scheduler turned the gang down, or
    # the gang waits for something only a person can fix.
    warning: bool = False


@dataclass(frozen=True)
class GangResource:
    """Where a kind of the gang's own objects lives in the API: namespaced, one object per job,
    controlled by the MPIJob (a scheduler's PodGroup, say). ``shipped_by`` names who installs
    its CRD, for the message shown while it is not served.

    A kind of Kubernetes' own API has no CRD: ``enabled_by`` then says how a cluster serves it,
    and ``fallback_versions`` the older versions the strategy also writes, asked for in order
    when ``version`` is not served (``WithServedVersions``)."""

    group: str
    version: str
    kind: str
    plural: str
    shipped_by: str
    fallback_versions: tuple[str, ...] = ()
    enabled_by: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"


@dataclass(frozen=True)
class ClusterResource:
    """A cluster-scoped kind a strategy reads to judge a gang (Volcano's queues, say)."""

    group: str
    version: str
    kind: str
    plural: str
    shipped_by: str

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"


GangKind = GangResource | ClusterResource


@dataclass(frozen=True)
class StoredGang:
    """A job's gang as the operator's caches hold it: what a scheduler's verdict is read from."""

    job: DefaultedMPIJob
    # The gang's stored objects by plural: one of each ``gang_resources`` kind.
    objects: Mapping[str, dict[str, Any]]
    # The job's pods (workers and launcher): labels and status, no spec or annotations.
    pods: Sequence[dict[str, Any]]


Lookup = Callable[[str, str], dict[str, Any] | None]
"""``lookup(plural, name)``: a cached cluster-scoped object of a ``watched_resources`` kind."""


class GangScheduler(Protocol):
    """A gang scheduler the operator can hand a job's pods to: the core every strategy has.

    What else a scheduler needs is a capability it declares by having its members, checked by
    type (``runtime_checkable``), as kueue's job framework checks its optional interfaces:
    objects of its own for a gang (``WithGangObjects``: a PodGroup, say), cluster-scoped inputs
    to its verdict (``WithClusterInputs``: Volcano's queues) or to its objects
    (``WithClusterLayout``: Volcano's HyperNodes), a nudge when capacity appears
    (``WithCapacityNudge``) and a dialect for keeping workers in one network domain
    (``WithTopology``: Koordinator's rank hints). A scheduler whose gang is only marks on the
    pods (Koordinator's annotations) needs nothing else.
    """

    @property
    def scheduler_name(self) -> str:
        """The pods' spec.schedulerName."""
        ...

    def decorate_pod_template(
        self, template: dict[str, Any], job: DefaultedMPIJob
    ) -> dict[str, Any]:
        """A copy of ``template`` that this scheduler places in the job's gang."""
        ...

    def gang_state(self, gang: StoredGang) -> GangState:
        """The scheduler's verdict on a job's gang, read from its stored objects and pods."""
        ...


@runtime_checkable
class WithGangObjects(GangScheduler, Protocol):
    """A scheduler with objects of its own for each gang (none, one or several, each of a kind
    in ``gang_resources``), created before the pods and deleted with them."""

    @property
    def gang_resources(self) -> Sequence[GangResource]:
        """The kinds of the gang's own objects; the operator caches, creates and deletes them."""
        ...

    def gang_objects(self, job: DefaultedMPIJob, facts: ClusterFacts) -> list[dict[str, Any]]:
        """The desired objects of a (defaulted, valid) job's gang, metadata included: one of
        each ``gang_resources`` kind, in that order (the order they are created in)."""
        ...

    def needs_update(self, current: dict[str, Any], desired: dict[str, Any]) -> bool:
        """Whether a stored gang object's spec differs from the desired one in meaning."""
        ...

    def updated_object(
        self, current: Mapping[str, Any], desired: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The object to send as an update: a copy of ``current`` with the desired spec."""
        ...


@runtime_checkable
class WithServedVersions(WithGangObjects, Protocol):
    """A scheduler whose gang objects exist in more than one API version (Kubernetes' own
    PodGroup: v1alpha2 in 1.36, v1beta1 in 1.37): the operator asks which one the API server
    serves and uses the strategy this gives for its caches, writes and verdicts."""

    def served_in(self, versions: Mapping[str, str]) -> WithServedVersions:
        """This strategy with each gang kind in the version served, by plural (a version from
        the kind's ``version`` and ``fallback_versions``; kinds not named keep theirs)."""
        ...


@runtime_checkable
class WithClusterInputs(WithGangObjects, Protocol):
    """A scheduler whose verdict also depends on cluster-scoped objects, which the gang's own
    objects do not reflect (a Volcano queue that does not exist, say)."""

    @property
    def watched_resources(self) -> Sequence[ClusterResource]:
        """Cluster-scoped kinds ``blocked`` reads; the operator caches them."""
        ...

    def blocked(self, gang: StoredGang, lookup: Lookup) -> GangState | None:
        """Why the scheduler will not consider an unplaced gang at all, when the reason lies
        outside the gang's objects and pods (which then say nothing); None when nothing
        blocks it."""
        ...

    def inputs_of(self, gang_object: dict[str, Any]) -> Sequence[tuple[str, str]]:
        """``(plural, name)`` of each ``watched_resources`` object that ``blocked`` reads for
        the gang of this stored gang object: a change to one concerns only those jobs."""
        ...


@dataclass(frozen=True)
class GangNotice:
    """Something a job's author should know about its gang objects, recorded as a Warning
    event each time they are written (a domain the scheduler's own dialect cannot name, say)."""

    reason: str
    message: str


@runtime_checkable
class WithClusterLayout(GangScheduler, Protocol):
    """A scheduler whose gang objects, or else whose workers' marks, name groups of nodes that
    cluster-scoped objects describe (Volcano's HyperNodes, Koordinator's
    ClusterNetworkTopology), objects a cluster may not serve. The operator caches them when it
    can and passes them with the nodes' labels as ``ClusterFacts.layout``; it never waits for
    them, and without them (``layout`` None) the gang objects or workers leave those names
    out."""

    @property
    def layout_resources(self) -> Sequence[ClusterResource]:
        """Cluster-scoped kinds read into ``ClusterFacts.layout``; optional in the cluster."""
        ...

    def layout_notice(self, job: DefaultedMPIJob, facts: ClusterFacts) -> GangNotice | None:
        """Why the job's gang objects (without any: its new workers) leave out what the job
        asks for although the layout is known (no group of nodes matches its domain, say);
        None when nothing is left out."""
        ...


@runtime_checkable
class WithCapacityNudge(WithGangObjects, Protocol):
    """A scheduler that does not look at a waiting gang again by itself when the cluster may
    have room for it (a node added or made schedulable, allocatable grown, a bound pod gone)."""

    def waits(self, gang_object: dict[str, Any]) -> bool:
        """Whether this stored gang object alone shows its gang as not placed yet: the
        objects a ``capacity_nudge`` is patched onto."""
        ...

    def capacity_nudge(self, stamp: str) -> dict[str, Any]:
        """A merge patch for each gang object that ``waits``, making the scheduler look at the
        gang again, different for each ``stamp``."""
        ...


@runtime_checkable
class WithTopology(GangScheduler, Protocol):
    """A scheduler with a dialect of its own for keeping a job's workers in one network domain
    (``schedulingPolicy.topology``); any other gets pod affinity on the domain's node label."""

    def keep_in_domain(
        self,
        worker: dict[str, Any],
        job: DefaultedMPIJob,
        topology: JobTopology,
        index: int,
        facts: ClusterFacts,
    ) -> dict[str, Any]:
        """A copy of worker ``index``'s pod template that the scheduler places in the domain
        of the job's other workers (``facts.layout``: how the cluster's nodes are grouped,
        when known)."""
        ...


def gang_objects_of(gang: GangScheduler | None) -> WithGangObjects | None:
    return gang if isinstance(gang, WithGangObjects) else None


def cluster_inputs_of(gang: GangScheduler | None) -> WithClusterInputs | None:
    return gang if isinstance(gang, WithClusterInputs) else None


def cluster_layout_of(gang: GangScheduler | None) -> WithClusterLayout | None:
    return gang if isinstance(gang, WithClusterLayout) else None


def capacity_nudge_of(gang: GangScheduler | None) -> WithCapacityNudge | None:
    return gang if isinstance(gang, WithCapacityNudge) else None


def served_versions_of(gang: GangScheduler | None) -> WithServedVersions | None:
    return gang if isinstance(gang, WithServedVersions) else None


def in_served_versions(
    gang: GangScheduler | None, versions: Mapping[str, str]
) -> GangScheduler | None:
    """The strategy with its gang kinds in the versions served (``plural -> version``);
    unchanged for a strategy whose kinds have one version."""
    choice = served_versions_of(gang)
    return choice.served_in(versions) if choice is not None and versions else gang


def place_worker(
    gang: GangScheduler | None,
    worker: dict[str, Any],
    job: DefaultedMPIJob,
    index: int,
    facts: ClusterFacts,
) -> dict[str, Any]:
    """Worker ``index``'s template kept in the job's network domain, by the scheduler's own
    dialect or else by pod affinity; unchanged when the job asks for no domain."""
    from mpi_operator.api.topology import job_topology

    topology = job_topology(job)
    if topology is None:
        return worker
    if isinstance(gang, WithTopology):
        return gang.keep_in_domain(worker, job, topology, index, facts)
    from gang.topology import with_worker_affinity

    return with_worker_affinity(worker, job, topology)


def gang_resources_of(gang: GangScheduler | None) -> Sequence[GangResource]:
    """The kinds of the gang's own objects; none for a scheduler without any."""
    with_objects = gang_objects_of(gang)
    return with_objects.gang_resources if with_objects is not None else ()


def gang_kinds_of(gang: GangScheduler | None) -> tuple[GangKind, ...]:
    """Every kind the strategy caches: its gang objects' and its cluster inputs'. A job that
    gets gang objects needs all of them served (their CRDs installed)."""
    inputs = cluster_inputs_of(gang)
    watched = inputs.watched_resources if inputs is not None else ()
    return (*gang_resources_of(gang), *watched)


def crd_missing_reason(kind: GangKind) -> str:
    """The GangScheduled reason while ``kind`` is not served: ``PodGroupCRDMissing``, say, or
    ``PodGroupAPIMissing`` for a kind of Kubernetes' own API."""
    return f"{kind.kind}APIMissing" if _enabled_by(kind) else f"{kind.kind}CRDMissing"


def unserved_state(missing: Sequence[GangKind]) -> GangState:
    """The verdict on a gang whose scheduler's kinds are not all served by the API server:
    it waits, with nothing of it created, until they are."""
    names = " and ".join(kind.crd_name for kind in missing)
    subject, verb = ("it", "is") if len(missing) == 1 else ("they", "are")
    built_in = [_enabled_by(kind) for kind in missing if _enabled_by(kind)]
    shippers = " and ".join(
        dict.fromkeys(f"{kind.shipped_by}'s" for kind in missing if not _enabled_by(kind))
    )
    remedies = [*dict.fromkeys(built_in), *([f"install {shippers} CRDs"] if shippers else [])]
    return GangState(
        False,
        crd_missing_reason(missing[0]),
        f"{names} {verb} not served by the API server: {'; '.join(remedies)}. The gang's "
        f"objects and pods are created once {subject} {verb} served.",
        warning=True,
    )


def _enabled_by(kind: GangKind) -> str:
    return kind.enabled_by if isinstance(kind, GangResource) else ""


def _volcano(name: str) -> GangScheduler:
    from gang.volcano import VolcanoScheduler

    return VolcanoScheduler()


def _koordinator(name: str) -> GangScheduler:
    from gang.koordinator import KoordinatorScheduler

    return KoordinatorScheduler()


def _native(name: str) -> GangScheduler:
    from gang.native import NativeScheduler

    return NativeScheduler()


def _coscheduling(name: str) -> GangScheduler:
    from gang.coscheduling import CoschedulingScheduler

    return CoschedulingScheduler(scheduler_name=name)


# Flag value -> strategy. Any other non-empty name means the coscheduling plugin running
# under that scheduler name, exactly as kubeflow/mpi-operator's --gang-scheduling flag.
# koord-scheduler reads neither those PodGroups nor their label (its PodGroups are of the older
# scheduling.sigs.k8s.io group), so its name selects its own annotation-only gang. Kubernetes'
# own gang is selected by a value with a slash, which the flag never takes as a scheduler name
# (a DNS-1123 subdomain).
_STRATEGIES: dict[str, Callable[[str], GangScheduler]] = {
    "volcano": _volcano,
    "koord-scheduler": _koordinator,
    "scheduling.k8s.io/podgroup": _native,
}
_FALLBACK: Callable[[str], GangScheduler] = _coscheduling


def every_strategy() -> list[GangScheduler]:
    """One of each strategy ``select_gang_scheduler`` can give (the fallback under a sample
    name), for what must cover them all: the operator's RBAC rules, say."""
    return [make(name) for name, make in _STRATEGIES.items()] + [_FALLBACK("coscheduling")]


def flag_help() -> str:
    """What the --gang-scheduling flag accepts, for its help text."""
    named = ", ".join(f"'{name}'" for name in _STRATEGIES)
    return f"{named}, or the name of a scheduler running the coscheduling plugin"


def select_gang_scheduler(name: str | None) -> GangScheduler | None:
    """The strategy for a --gang-scheduling value; None when gang scheduling is off."""
    if not name:
        return None
    return _STRATEGIES.get(name, _FALLBACK)(name)


def scheduler_name_of(name: str) -> str:
    """The pods' schedulerName under a --gang-scheduling value; empty when it is off."""
    gang = select_gang_scheduler(name)
    return gang.scheduler_name if gang is not None else ""
