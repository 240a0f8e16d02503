"""Gang scheduling strategies: everything scheduler-specific lives below this package.

The core operator only knows the ``GangScheduler`` protocol and ``select_gang_scheduler``.
A new gang scheduler is one new module below ``gang/`` plus one entry in ``_STRATEGIES``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.v2beta1 import MPIJob


@dataclass(frozen=True)
class GangState:
    """What the scheduler says about a gang, for the job's GangScheduled condition.

    ``scheduled`` is None when the scheduler has not decided anything yet.
    """

    scheduled: bool | None
    reason: str
    message: str


@dataclass(frozen=True)
class PodGroupResource:
    """Where a scheduler's PodGroup lives in the API."""

    group: str
    version: str
    kind: str = "PodGroup"
    plural: str = "podgroups"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


@dataclass(frozen=True)
class ClusterResource:
    """A cluster-scoped kind a strategy reads to judge a gang (Volcano's queues, say)."""

    group: str
    version: str
    kind: str
    plural: str


Lookup = Callable[[str, str], dict[str, Any] | None]
"""``lookup(plural, name)``: a cached cluster-scoped object of a ``watched_resources`` kind."""


class GangScheduler(Protocol):
    """A gang scheduler the operator can hand a job's pods to."""

    @property
    def scheduler_name(self) -> str:
        """The pods' spec.schedulerName."""
        ...

    @property
    def pod_group_resource(self) -> PodGroupResource: ...

    def pod_group(self, job: MPIJob, facts: ClusterFacts) -> dict[str, Any]:
        """The desired PodGroup of a (defaulted, valid) job, metadata included."""
        ...

    def decorate_pod_template(self, template: dict[str, Any], job: MPIJob) -> dict[str, Any]:
        """A copy of ``template`` that this scheduler places in the job's gang."""
        ...

    def needs_update(self, current: dict[str, Any], desired: dict[str, Any]) -> bool:
        """Whether a stored PodGroup's spec differs from the desired one in meaning."""
        ...

    def updated_pod_group(
        self, current: Mapping[str, Any], desired: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The object to send as an update: a copy of ``current`` with the desired spec."""
        ...

    def gang_state(self, pod_group: dict[str, Any]) -> GangState:
        """The scheduler's verdict on a stored PodGroup, read from its status."""
        ...

    @property
    def watched_resources(self) -> Sequence[ClusterResource]:
        """Cluster-scoped kinds ``blocked`` reads; the operator caches them."""
        ...

    def blocked(self, pod_group: dict[str, Any], lookup: Lookup) -> GangState | None:
        """Why the scheduler will not consider an unplaced gang at all, when the reason lies
        outside the PodGroup (which then says nothing); None when nothing blocks it."""
        ...

    def inputs_of(self, pod_group: dict[str, Any]) -> Sequence[tuple[str, str]]:
        """``(plural, name)`` of each ``watched_resources`` object that ``blocked`` reads for
        this stored PodGroup: a change to one concerns only the jobs whose PodGroups name it."""
        ...

    def capacity_nudge(self, stamp: str) -> dict[str, Any] | None:
        """What the scheduler needs when the cluster may have room for a waiting gang (a node
        added or made schedulable, allocatable grown, a bound pod gone): a merge patch for the
        gang's PodGroup that makes the scheduler look at the gang again, different for each
        ``stamp``; None when the scheduler looks again by itself. The answer does not depend
        on the gang, so None for one stamp means None for all: no capacity watch is needed."""
        ...


def needs_capacity_nudges(gang: GangScheduler | None) -> bool:
    """Whether the scheduler must be told when the cluster may have room for waiting gangs."""
    return gang is not None and gang.capacity_nudge("") is not None


def waits(gang: GangScheduler, pod_group: dict[str, Any]) -> bool:
    """Whether the scheduler reports the gang of this stored PodGroup as not placed yet."""
    return gang.gang_state(pod_group).scheduled is False


def _volcano(name: str) -> GangScheduler:
    from gang.volcano import VolcanoScheduler

    return VolcanoScheduler()


def _coscheduling(name: str) -> GangScheduler:
    from gang.coscheduling import CoschedulingScheduler

    return CoschedulingScheduler(scheduler_name=name)


# Flag value -> strategy. Any other non-empty name means the coscheduling plugin running
# under that scheduler name, exactly as kubeflow/mpi-operator's --gang-scheduling flag.
_STRATEGIES: dict[str, Callable[[str], GangScheduler]] = {"volcano": _volcano}
_FALLBACK: Callable[[str], GangScheduler] = _coscheduling


def select_gang_scheduler(name: str | None) -> GangScheduler | None:
    """The strategy for a --gang-scheduling value; None when gang scheduling is off."""
    if not name:
        return None
    return _STRATEGIES.get(name, _FALLBACK)(name)
