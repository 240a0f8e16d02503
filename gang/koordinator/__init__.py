"""Koordinator's koord-scheduler, its gang given by annotations on the pods alone.

koord-scheduler's Coscheduling plugin forms a gang from the first pod it sees carrying a gang
name and keeps its parameters while any pod of it exists; no PodGroup (and no CRD) is needed.
The scheduler reports only on the pods, through their ``PodScheduled`` condition, and reads
a gang's network-topology-spec from the first of its pods it sees too: the workers carry it,
created before the launcher.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from gang import ClusterResource, GangNotice, GangState, StoredGang
from gang.koordinator.network_topology import TOPOLOGY_NAME, Layer, layer_grouping_by
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
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.topology import JobTopology, job_topology

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
# The gang's network domain, a layer of the ClusterNetworkTopology to gather its pods in.
NETWORK_TOPOLOGY_SPEC_ANNOTATION: Final = f"{_PREFIX}/network-topology-spec"
MUST_GATHER: Final = "MustGather"
PREFER_GATHER: Final = "PreferGather"
CLUSTER_NETWORK_TOPOLOGY_RESOURCE: Final = ClusterResource(
    "scheduling.koordinator.sh",
    "v1alpha1",
    "ClusterNetworkTopology",
    "clusternetworktopologies",
    "Koordinator",
)
REASON_NO_NETWORK_TOPOLOGY_LAYER: Final = "NoNetworkTopologyLayer"
# Strict: a member that cannot be placed sends the whole gang back, so no part of it holds
# nodes while the rest waits.
STRICT: Final = "Strict"
UNSCHEDULABLE: Final = "Unschedulable"


class KoordinatorScheduler:
    """Gangs placed by koord-scheduler, declared on the pods: nothing to create."""

    layout_resources: Sequence[ClusterResource] = (CLUSTER_NETWORK_TOPOLOGY_RESOURCE,)

    def keep_in_domain(
        self,
        worker: dict[str, Any],
        job: DefaultedMPIJob,
        topology: JobTopology,
        index: int,
        facts: ClusterFacts,
    ) -> dict[str, Any]:
        # The pod affinity holds the domain under any koord-scheduler; the gather rule, which
        # names a ClusterNetworkTopology layer rather than a label, only where a layer is built.
        placed = with_worker_affinity(worker, job, topology)
        annotations = placed["metadata"].setdefault("annotations", {})
        annotations[NETWORK_TOPOLOGY_INDEX_ANNOTATION] = str(index)
        layer = _layer(topology, facts)
        if layer is not None and layer.built:
            annotations[NETWORK_TOPOLOGY_SPEC_ANNOTATION] = network_topology_spec(
                layer.name, topology
            )
        return placed

    def layout_notice(self, job: DefaultedMPIJob, facts: ClusterFacts) -> GangNotice | None:
        topology = job_topology(job)
        if topology is None or facts.layout is None:
            return None
        layer = _layer(topology, facts)
        if layer is not None and layer.built:
            return None
        keeps = (
            "the workers have no network-topology-spec, and their pod affinity alone keeps "
            "them in one domain."
        )
        if layer is None:
            message = (
                f'No layer of Koordinator\'s ClusterNetworkTopology "{TOPOLOGY_NAME}" groups '
                f'the nodes by the label "{topology.key}": {keeps}'
            )
        else:
            message = (
                f'The layer "{layer.name}" of Koordinator\'s ClusterNetworkTopology '
                f'"{TOPOLOGY_NAME}" groups the nodes by the label "{topology.key}", but its '
                "status does not show it built by koord-scheduler (started with "
                f"--enable-network-topology-manager): {keeps}"
            )
        return GangNotice(REASON_NO_NETWORK_TOPOLOGY_LAYER, message)

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


def network_topology_spec(layer: str, topology: JobTopology) -> str:
    """The gang's gather rule: its pods in one domain of ``layer``, required or preferred."""
    strategy = MUST_GATHER if topology.required else PREFER_GATHER
    rule = {"layer": layer, "strategy": strategy}
    return json.dumps({"gatherStrategy": [rule]}, separators=(",", ":"))


def _layer(topology: JobTopology, facts: ClusterFacts) -> Layer | None:
    layout = facts.layout
    plural = CLUSTER_NETWORK_TOPOLOGY_RESOURCE.plural
    layer = layout.derive(plural, topology.key, layer_grouping_by) if layout else None
    return layer if isinstance(layer, Layer) else None


def _pod_scheduled(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled":
            return condition
    return {}
