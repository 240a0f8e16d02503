"""Volcano gang scheduling (scheduling.volcano.sh/v1beta1 PodGroups)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from gang import ClusterResource, GangState, Lookup, StoredGang
from gang.members import gang_priority_class, min_resources, scheduling_policy
from gang.pod_group import (
    PodGroupScheduler,
    optional_resource_list,
    pod_group_kind,
    same_spec,
    scalar,
)
from gang.pod_template import assign_to_gang
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.quantity import format_resources

SCHEDULER_NAME: Final = "volcano"
POD_GROUP_RESOURCE: Final = pod_group_kind("scheduling.volcano.sh", "v1beta1", "Volcano")
# Pod annotation naming the pod's PodGroup (volcano's KubeGroupNameAnnotationKey).
GROUP_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-name"
# MPIJob annotation choosing the queue when the schedulingPolicy names none.
QUEUE_NAME_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
# The queue the Volcano CRD (v1.12 on) stores when a PodGroup names none.
DEFAULT_QUEUE: Final = "default"
QUEUE_RESOURCE: Final = ClusterResource(
    "scheduling.volcano.sh", "v1beta1", "Queue", "queues", "Volcano"
)
QUEUE_OPEN: Final = "Open"

_SPEC_FIELDS: Final = {
    "minMember": scalar(0),
    "queue": scalar(""),
    "priorityClassName": scalar(""),
    # A pointer in Volcano's API: without minResources the gang skips queue admission,
    # while an empty list still goes through it, so the two are different specs.
    "minResources": optional_resource_list,
}


class VolcanoScheduler(PodGroupScheduler):
    """Gangs placed by vc-scheduler, admitted through Volcano queues."""

    pod_group_resource = POD_GROUP_RESOURCE
    # Volcano looks at waiting gangs again by itself (every second): no capacity nudge.
    watched_resources: Sequence[ClusterResource] = (QUEUE_RESOURCE,)

    @property
    def scheduler_name(self) -> str:
        return SCHEDULER_NAME

    def spec_fields(self, job: DefaultedMPIJob, facts: ClusterFacts) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        queue = _queue(job)
        if queue:
            spec["queue"] = queue
        priority_class = gang_priority_class(job)
        if priority_class:
            spec["priorityClassName"] = priority_class
        resources = min_resources(job, facts)
        if resources is not None:
            spec["minResources"] = format_resources(resources)
        return spec

    def decorate_pod_template(
        self, template: dict[str, Any], job: DefaultedMPIJob
    ) -> dict[str, Any]:
        return assign_to_gang(
            template, SCHEDULER_NAME, annotations={GROUP_NAME_ANNOTATION: job.name}
        )

    def needs_update(self, current: dict[str, Any], desired: dict[str, Any]) -> bool:
        stored = dict(current.get("spec") or {})
        wanted = desired.get("spec") or {}
        if not wanted.get("queue") and stored.get("queue") == DEFAULT_QUEUE:
            # The CRD filled in the default for the empty queue we sent; sending it again
            # would be stored as "default" again, an update on every sync for nothing.
            del stored["queue"]
        return not same_spec(stored, wanted, _SPEC_FIELDS)

    def pod_group_state(self, pod_group: dict[str, Any]) -> GangState:
        status = pod_group.get("status") or {}
        phase = status.get("phase") or ""
        if phase in ("Running", "Completed"):
            return GangState(
                True, f"PodGroup{phase}", "Volcano placed at least minMember pods of the gang."
            )
        unschedulable = _true_condition(status, "Unschedulable")
        if unschedulable is not None:
            message = unschedulable.get("message") or unschedulable.get("reason") or ""
            return GangState(
                False,
                "Unschedulable",
                message or "Volcano cannot place the gang yet.",
                warning=True,
            )
        if not phase:
            return GangState(
                None, "PodGroupNotObserved", "Volcano has not reported on the PodGroup yet."
            )
        if phase == "Inqueue":
            return GangState(
                False,
                "PodGroupInqueue",
                "The gang is admitted to its queue; Volcano has not placed its pods yet.",
            )
        if phase == "Unknown":
            return GangState(
                False,
                "PodGroupUnknown",
                "Some pods of the gang run, but Volcano cannot place the others.",
            )
        queue = _pod_group_queue(pod_group)
        return GangState(
            False,
            "PodGroupPending",
            f'The gang waits for admission to Volcano queue "{queue}".',
        )

    def blocked(self, gang: StoredGang, lookup: Lookup) -> GangState | None:
        # Volcano writes nothing on a PodGroup whose queue is missing or not Open: the gang
        # just never enters a queue, so the queue itself is the only place the cause shows.
        name = _pod_group_queue(gang.objects[POD_GROUP_RESOURCE.plural])
        queue = lookup(QUEUE_RESOURCE.plural, name)
        if queue is None:
            return GangState(
                False,
                "QueueNotFound",
                f'Volcano queue "{name}" does not exist; the gang waits until it is created.',
            )
        state = (queue.get("status") or {}).get("state") or QUEUE_OPEN
        if state != QUEUE_OPEN:
            return GangState(
                False,
                "QueueNotOpen",
                f'Volcano queue "{name}" is {state}; it admits no new gangs until it is Open.',
            )
        return None

    def inputs_of(self, pod_group: dict[str, Any]) -> Sequence[tuple[str, str]]:
        return ((QUEUE_RESOURCE.plural, _pod_group_queue(pod_group)),)


def _pod_group_queue(pod_group: Mapping[str, Any]) -> str:
    """The queue a stored PodGroup waits in (the CRD's default when it names none)."""
    spec = pod_group.get("spec")
    queue = spec.get("queue") if isinstance(spec, Mapping) else None
    return queue if isinstance(queue, str) and queue else DEFAULT_QUEUE


def _queue(job: DefaultedMPIJob) -> str:
    return scheduling_policy(job).queue or job.annotations.get(QUEUE_NAME_ANNOTATION) or ""


def _true_condition(status: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    for condition in status.get("conditions") or []:
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == condition_type
            and condition.get("status") == "True"
        ):
            return condition
    return None
