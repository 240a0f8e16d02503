"""scheduler-plugins coscheduling (scheduling.x-k8s.io/v1alpha1 PodGroups)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from gang import GangState
from gang.members import min_resources, scheduling_policy
from gang.pod_group import (
    PodGroupScheduler,
    optional,
    pod_group_kind,
    resource_list,
    same_spec,
    scalar,
)
from gang.pod_template import assign_to_gang
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.quantity import format_resources

POD_GROUP_RESOURCE: Final = pod_group_kind("scheduling.x-k8s.io", "v1alpha1", "scheduler-plugins")
# Pod label naming the pod's PodGroup (scheduler-plugins' PodGroupLabel).
POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
# PodGroup annotation the operator stamps when the cluster may have room for a waiting gang.
# The plugin requeues a gang it turned down on a Pod add or a PodGroup add/update, never on a
# Node add or a Pod delete; any change to the PodGroup, this one included, is such an update.
CAPACITY_ANNOTATION: Final = "training.kubeflow.org/capacity-changed-at"

_SPEC_FIELDS: Final = {
    "minMember": scalar(0),
    "minResources": resource_list,
    # A pointer: kubeflow/mpi-operator always sends it, 0 meaning the plugin's own
    # permitWaitingTimeSeconds.
    "scheduleTimeoutSeconds": optional,
}


@dataclass(frozen=True)
class CoschedulingScheduler(PodGroupScheduler):
    """Gangs placed by a kube-scheduler running the Coscheduling plugin under this name."""

    scheduler_name: str
    pod_group_resource = POD_GROUP_RESOURCE

    def spec_fields(self, job: DefaultedMPIJob, facts: ClusterFacts) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        resources = min_resources(job, facts)
        if resources:
            spec["minResources"] = format_resources(resources)
        timeout = scheduling_policy(job).schedule_timeout_seconds
        spec["scheduleTimeoutSeconds"] = timeout or 0
        return spec

    def decorate_pod_template(
        self, template: dict[str, Any], job: DefaultedMPIJob
    ) -> dict[str, Any]:
        return assign_to_gang(template, self.scheduler_name, labels={POD_GROUP_LABEL: job.name})

    def waits(self, gang_object: dict[str, Any]) -> bool:
        return self.pod_group_state(gang_object).scheduled is False

    def capacity_nudge(self, stamp: str) -> dict[str, Any]:
        # The plugin retries a turned-down gang only on a Pod add or a PodGroup change.
        return {"metadata": {"annotations": {CAPACITY_ANNOTATION: stamp}}}

    def needs_update(self, current: dict[str, Any], desired: dict[str, Any]) -> bool:
        return not same_spec(current.get("spec") or {}, desired.get("spec") or {}, _SPEC_FIELDS)

    def pod_group_state(self, pod_group: dict[str, Any]) -> GangState:
        status = pod_group.get("status") or {}
        phase = status.get("phase") or ""
        wanted = (pod_group.get("spec") or {}).get("minMember") or 0
        if phase in ("Running", "Finished"):
            return GangState(
                True, f"PodGroup{phase}", "The scheduler placed at least minMember pods together."
            )
        if phase == "Failed":
            return GangState(
                True, "PodGroupFailed", "The scheduler placed the gang; some of its pods failed."
            )
        if phase == "Scheduling":
            running = (status.get("running") or 0) + (status.get("succeeded") or 0)
            return GangState(
                False,
                "PodGroupScheduling",
                f"{running} of {wanted} pods run; the scheduler places the gang only as a whole.",
            )
        if phase == "Pending":
            return GangState(
                False,
                "PodGroupPending",
                f"Fewer than {wanted} pods of the gang exist yet.",
            )
        if not phase:
            return GangState(
                None,
                "PodGroupNotObserved",
                "The scheduler-plugins controller has not reported on the PodGroup yet.",
            )
        return GangState(None, "PodGroupUnknown", f'The PodGroup is in phase "{phase}".')
