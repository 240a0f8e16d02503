"""Koordinator's koord-scheduler, its gang given by annotations on the pods alone.

koord-scheduler's Coscheduling plugin forms a gang from the first pod it sees carrying a gang
name and keeps its parameters while any pod of it exists; no PodGroup (and no CRD) is needed.
The scheduler reports only on the pods, through their ``PodScheduled`` condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gang import GangState, StoredGang
from gang.members import (
    gang_replica_types,
    gang_size,
    min_member,
    replica_type_of,
    scheduling_policy,
    template_in_gang,
)
from gang.pod_template import assign_to_gang
from gang.topology import with_worker_affinity
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.topology import JobTopology

SCHEDULER_NAME: Final = "koord-scheduler"
# Pod annotations of an annotation-only gang (koordinator's apis/extension/coscheduling.go).
_PREFIX: Final = "gang.scheduling.koordinator.sh"
NAME_ANNOTATION: Final = f"{_PREFIX}/name"
MIN_AVAILABLE_ANNOTATION: Final = f"{_PREFIX}/min-available"
TOTAL_NUMBER_ANNOTATION: Final = f"{_PREFIX}/total-number"
MODE_ANNOTATION: Final = f"{_PREFIX}/mode"
WAITING_TIME_ANNOTATION: Final = f"{_PREFIX}/waiting-time"
# A worker's rank hint: koord-scheduler's network-topology-aware placement puts consecutive
# indexes close together (apis/extension/coscheduling.go, GetPodIndex).
NETWORK_TOPOLOGY_INDEX_ANNOTATION: Final = f"{_PREFIX}/network-topology-index"
# Strict: a member that cannot be placed sends the whole gang back, so no part of it holds
# nodes while the rest waits.
STRICT: Final = "Strict"
UNSCHEDULABLE: Final = "Unschedulable"


class KoordinatorScheduler:
    """Gangs placed by koord-scheduler, declared on the pods: nothing to create or watch."""

    def keep_in_domain(
        self, worker: dict[str, Any], job: DefaultedMPIJob, topology: JobTopology, index: int
    ) -> dict[str, Any]:
        # The domain itself is pod affinity, which koord-scheduler enforces as kube-scheduler
        # does; its own gather rules name a ClusterNetworkTopology layer, not a node label.
        placed = with_worker_affinity(worker, job, topology)
        annotations = placed["metadata"].setdefault("annotations", {})
        annotations[NETWORK_TOPOLOGY_INDEX_ANNOTATION] = str(index)
        return placed

    @property
    def scheduler_name(self) -> str:
        return SCHEDULER_NAME

    def decorate_pod_template(
        self, template: dict[str, Any], job: DefaultedMPIJob
    ) -> dict[str, Any]:
        if not template_in_gang(template, job):
            return assign_to_gang(template, SCHEDULER_NAME)
        return assign_to_gang(template, SCHEDULER_NAME, annotations=gang_annotations(job))

    def gang_state(self, gang: StoredGang) -> GangState:
        roles = gang_replica_types(gang.job)
        members = sorted(
            (pod for pod in gang.pods if replica_type_of(pod.get("metadata")) in roles),
            key=lambda pod: str(pod["metadata"].get("name", "")),
        )
        conditions = [_pod_scheduled(pod) for pod in members]
        placed = sum(1 for condition in conditions if condition.get("status") == "True")
        if placed and placed >= min_member(gang.job):
            return GangState(
                True, "PodsScheduled", "koord-scheduler placed at least min-available pods."
            )
        for condition in conditions:
            if condition.get("status") == "False" and condition.get("reason") == UNSCHEDULABLE:
                message = condition.get("message") or "koord-scheduler cannot place the gang yet."
                return GangState(False, UNSCHEDULABLE, str(message), warning=True)
        return GangState(
            None, "PodsNotScheduled", "koord-scheduler has not reported on the gang's pods yet."
        )


def gang_name(job: DefaultedMPIJob) -> str:
    """The job's name and UID: koord-scheduler keeps a gang while any pod of it exists, so a
    job recreated under the same name must not join the old job's gang."""
    return f"{job.name}-{job.uid}" if job.uid else job.name


def gang_annotations(job: DefaultedMPIJob) -> dict[str, str]:
    """The annotations every pod of the gang carries; koord-scheduler reads its first pod's."""
    annotations = {
        NAME_ANNOTATION: gang_name(job),
        MIN_AVAILABLE_ANNOTATION: str(min_member(job)),
        TOTAL_NUMBER_ANNOTATION: str(gang_size(job)),
        MODE_ANNOTATION: STRICT,
    }
    timeout = scheduling_policy(job).schedule_timeout_seconds
    if timeout:
        # A Go duration; without it (or at 0) the scheduler's own default applies.
        annotations[WAITING_TIME_ANNOTATION] = f"{timeout}s"
    return annotations


def _pod_scheduled(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled":
            return condition
    return {}
