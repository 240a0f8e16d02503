"""Kubernetes' own gang scheduling: kube-scheduler's GangScheduling plugin placing the pods of a
``scheduling.k8s.io`` PodGroup all together or not at all.

The PodGroup is a built-in kind (no CRD), served as ``v1beta1`` from Kubernetes 1.37 and as
``v1alpha2`` in 1.36, behind the ``GenericWorkload`` feature gate. Pods join it through
``spec.schedulingGroup.podGroupName``; the scheduler reports on it in a status condition.

A Required network domain becomes the PodGroup's ``spec.schedulingConstraints.topology``, which
kube-scheduler's TopologyPlacementGenerator plugin enforces behind the alpha
``TopologyAwareWorkloadScheduling`` gate: it tries the gang in one domain after another, so a
gang waits only when no domain holds it. The constraint is hard only; a Preferred domain keeps
the workers' pod affinity alone.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from gang import GangResource, GangState, StoredGang
from gang.members import gang_priority_class, min_member, template_in_gang
from gang.pod_group import new_pod_group
from gang.pod_template import assign_to_gang
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.topology import job_topology
from mpi_operator.field_errors import quoted

# The GangScheduling plugin runs in kube-scheduler's default profile.
SCHEDULER_NAME: Final = "default-scheduler"
POD_GROUP_RESOURCE: Final = GangResource(
    "scheduling.k8s.io",
    "v1beta1",
    kind="PodGroup",
    plural="podgroups",
    shipped_by="Kubernetes",
    fallback_versions=("v1alpha2",),
    enabled_by=(
        "turn on the GenericWorkload feature gate of kube-apiserver and kube-scheduler and "
        "serve the API version (--runtime-config=scheduling.k8s.io/v1beta1=true on 1.37, "
        "scheduling.k8s.io/v1alpha2=true on 1.36)"
    ),
)
# The condition kube-scheduler writes on a PodGroup it tried: PodGroupInitiallyScheduled from
# v1beta1 on (True once, for good), PodGroupScheduled in v1alpha2.
SCHEDULED_CONDITIONS: Final = ("PodGroupInitiallyScheduled", "PodGroupScheduled")
# Reasons of a False condition that a person has to look into.
_WARNING_REASONS: Final = frozenset({"Unschedulable", "SchedulerError"})
TOPOLOGY_GATE: Final = "TopologyAwareWorkloadScheduling"


@dataclass(frozen=True)
class _VersionRules:
    """What a PodGroup version accepts beyond schedulingPolicy."""

    # v1alpha2 forbids spec.priorityClassName unless the alpha WorkloadAwarePreemption gate is on.
    priority_class: bool
    # v1alpha2's whole schedulingPolicy is immutable; v1beta1 lets gang.minCount change.
    min_count_mutable: bool


_RULES: Final = {
    "v1beta1": _VersionRules(priority_class=True, min_count_mutable=True),
    "v1alpha2": _VersionRules(priority_class=False, min_count_mutable=False),
}


@dataclass(frozen=True)
class NativeScheduler:
    """Gangs placed by kube-scheduler itself, as PodGroups of the version the cluster serves."""

    version: str = POD_GROUP_RESOURCE.version

    @property
    def scheduler_name(self) -> str:
        return SCHEDULER_NAME

    @property
    def pod_group_resource(self) -> GangResource:
        return replace(POD_GROUP_RESOURCE, version=self.version)

    @property
    def gang_resources(self) -> Sequence[GangResource]:
        return (self.pod_group_resource,)

    def served_in(self, versions: Mapping[str, str]) -> NativeScheduler:
        return replace(self, version=versions.get(POD_GROUP_RESOURCE.plural, self.version))

    def gang_objects(self, job: DefaultedMPIJob, facts: ClusterFacts) -> list[dict[str, Any]]:
        return [new_pod_group(self.pod_group_resource, job, self.pod_group_spec(job))]

    def pod_group_spec(self, job: DefaultedMPIJob) -> dict[str, Any]:
        members = min_member(job)
        # minCount must be at least 1: minAvailable 0, no gang, is the basic policy.
        policy = {"gang": {"minCount": members}} if members > 0 else {"basic": {}}
        spec: dict[str, Any] = {"schedulingPolicy": policy}
        priority_class = gang_priority_class(job)
        if priority_class and self._rules.priority_class:
            spec["priorityClassName"] = priority_class
        constraints = _scheduling_constraints(job)
        if constraints is not None:
            spec["schedulingConstraints"] = constraints
        return spec

    def decorate_pod_template(
        self, template: dict[str, Any], job: DefaultedMPIJob
    ) -> dict[str, Any]:
        assigned = assign_to_gang(template, SCHEDULER_NAME)
        if template_in_gang(template, job):
            assigned["spec"]["schedulingGroup"] = {"podGroupName": names.pod_group_name(job)}
        return assigned

    def needs_update(self, current: dict[str, Any], desired: dict[str, Any]) -> bool:
        # Only gang.minCount may change in place; what else differs (schedulingConstraints
        # included) waits for the PodGroup to be created again (the job suspended and resumed),
        # as the API server refuses the rest.
        if not self._rules.min_count_mutable:
            return False
        now, wanted = _min_count(current), _min_count(desired)
        return now is not None and wanted is not None and now != wanted

    def updated_object(
        self, current: Mapping[str, Any], desired: Mapping[str, Any]
    ) -> dict[str, Any]:
        updated = copy.deepcopy(dict(current))
        updated["spec"]["schedulingPolicy"]["gang"]["minCount"] = _min_count(desired)
        return updated

    def gang_state(self, gang: StoredGang) -> GangState:
        pod_group = gang.objects[POD_GROUP_RESOURCE.plural]
        state = pod_group_state(pod_group)
        note = _constraints_note(pod_group, _scheduling_constraints(gang.job))
        if note is None:
            return state
        return replace(state, message=f"{state.message} {note}", warning=True)

    @property
    def _rules(self) -> _VersionRules:
        return _RULES.get(self.version, _RULES[POD_GROUP_RESOURCE.version])


def _scheduling_constraints(job: DefaultedMPIJob) -> dict[str, Any] | None:
    """The PodGroup's constraints for a Required domain: every pod of the group, the launcher
    too when it is in the gang, on nodes sharing one value of the label."""
    topology = job_topology(job)
    if topology is None or not topology.required:
        return None
    return {"topology": [{"key": topology.key}]}


def _constraints_note(pod_group: Mapping[str, Any], wanted: dict[str, Any] | None) -> str | None:
    """Why the stored PodGroup's constraints are not the job's, for the gang's condition; None
    when they are. The API server drops the field while the gate is off, keeps it unchanged
    once written, and has nothing to keep when the job asked for no domain at creation."""
    spec = pod_group.get("spec")
    stored = spec.get("schedulingConstraints") if isinstance(spec, Mapping) else None
    if stored == wanted:
        return None
    if stored is None and wanted is not None:
        return (
            f"The PodGroup has no spec.schedulingConstraints for {_keys(wanted)}: the API "
            f"server drops the field while its {TOPOLOGY_GATE} feature gate is off, and the "
            "PodGroup keeps the constraints it was created with; the workers' pod affinity "
            "alone keeps them in one domain."
        )
    return (
        f"The PodGroup keeps the spec.schedulingConstraints it was created with "
        f"({_keys(stored)}): the field is immutable, so the job's domain applies once the "
        "PodGroup is created again (the job suspended and resumed)."
    )


def _keys(constraints: object) -> str:
    topology = constraints.get("topology") if isinstance(constraints, Mapping) else None
    keys = [
        quoted(term.get("key"))
        for term in (topology if isinstance(topology, list) else [])
        if isinstance(term, Mapping)
    ]
    return ", ".join(keys) or "no domain"


def pod_group_state(pod_group: Mapping[str, Any]) -> GangState:
    """kube-scheduler's verdict, from the PodGroup's scheduled condition."""
    condition = _scheduled_condition(pod_group)
    if condition is None:
        return GangState(
            None,
            "PodGroupNotObserved",
            "kube-scheduler has not reported on the PodGroup yet: it tries the gang once "
            "minCount of its pods exist.",
        )
    if condition.get("status") == "True":
        return GangState(
            True, "PodGroupScheduled", "kube-scheduler placed at least minCount pods together."
        )
    reason = str(condition.get("reason") or "PodGroupNotScheduled")
    message = str(condition.get("message") or "kube-scheduler cannot place the gang yet.")
    return GangState(False, reason, message, warning=reason in _WARNING_REASONS)


def _scheduled_condition(pod_group: Mapping[str, Any]) -> Mapping[str, Any] | None:
    status = pod_group.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, Mapping) and condition.get("type") in SCHEDULED_CONDITIONS:
            return condition
    return None


def _min_count(pod_group: Mapping[str, Any]) -> object:
    """The gang's minCount, None under the basic policy."""
    spec = pod_group.get("spec")
    policy = spec.get("schedulingPolicy") if isinstance(spec, Mapping) else None
    gang = policy.get("gang") if isinstance(policy, Mapping) else None
    return gang.get("minCount") if isinstance(gang, Mapping) else None
