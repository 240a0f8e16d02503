"""Volcano gang scheduling (scheduling.volcano.sh/v1beta1 PodGroups)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from gang import ClusterResource, GangNotice, GangState, Lookup, StoredGang
from gang.members import gang_priority_class, min_resources, scheduling_policy
from gang.pod_group import (
    PodGroupScheduler,
    optional_resource_list,
    pod_group_kind,
    same_spec,
    scalar,
)
from gang.pod_template import assign_to_gang
from gang.volcano.hypernodes import tier_grouping_by
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.topology import JobTopology, job_topology
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
HYPER_NODE_RESOURCE: Final = ClusterResource(
    "topology.volcano.sh", "v1alpha1", "HyperNode", "hypernodes", "Volcano"
)
# PodGroup spec.networkTopology.mode for a Required domain and for a Preferred one.
NETWORK_TOPOLOGY_HARD: Final = "hard"
NETWORK_TOPOLOGY_SOFT: Final = "soft"
REASON_NO_HYPER_NODE_TIER: Final = "NoHyperNodeTier"

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
    layout_resources: Sequence[ClusterResource] = (HYPER_NODE_RESOURCE,)

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
        network_topology = _network_topology(job, facts)
        if network_topology is not None:
            spec["networkTopology"] = network_topology
        return spec

    def layout_notice(self, job: DefaultedMPIJob, facts: ClusterFacts) -> GangNotice | None:
        topology = job_topology(job)
        if topology is None or facts.layout is None or _tier(topology, facts) is not None:
            return None
        return GangNotice(
            REASON_NO_HYPER_NODE_TIER,
            f'No tier of Volcano HyperNodes groups the nodes by the label "{topology.key}": '
            "the PodGroup has no networkTopology, and the workers' pod affinity alone keeps "
            "them in one domain.",
        )

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


def _network_topology(job: DefaultedMPIJob, facts: ClusterFacts) -> dict[str, Any] | None:
    topology = job_topology(job)
    tier = _tier(topology, facts) if topology is not None else None
    if topology is None or tier is None:
        return None
    mode = NETWORK_TOPOLOGY_HARD if topology.required else NETWORK_TOPOLOGY_SOFT
    # The tier's number, not its name: vc-scheduler v1.14 turns highestTierName into the
    # number in its allocate action only (every other reader, the PodGroup controller among
    # them, reads highestTierAllowed alone), and a HyperNode need not have a tierName.
    return {"mode": mode, "highestTierAllowed": tier}


def _tier(topology: JobTopology, facts: ClusterFacts) -> int | None:
    layout = facts.layout
    tier = (
        layout.derive(HYPER_NODE_RESOURCE.plural, topology.key, tier_grouping_by)
        if layout
        else None
    )
    return tier if isinstance(tier, int) else None


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
