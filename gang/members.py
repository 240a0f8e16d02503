"""Which pods form a job's gang and how much of it must fit: the same for every scheduler.

The gang is the set of pods that exist while the scheduler places them. That is the
launcher and every worker, except under ``launcherCreationPolicy: WaitForWorkersReady``:
there the launcher is created only after the workers run, so a gang that counted it could
never be complete (kubeflow/mpi-operator#608).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gang.pod_requests import Amounts, add, pod_requests, scaled
from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.models import SchedulingPolicy
from mpi_operator.quantity import Quantity

_REPLICA_TYPE_OF_ROLE = {c.ROLE_LAUNCHER: c.LAUNCHER, c.ROLE_WORKER: c.WORKER}


@dataclass(frozen=True)
class GangRole:
    """The identical pods of one replica type that belong to the gang."""

    replica_type: str
    pods: int
    priority: int
    pod_requests: Mapping[str, Quantity]


def scheduling_policy(job: DefaultedMPIJob) -> SchedulingPolicy:
    """The job's schedulingPolicy; an empty one when the job has none."""
    return job.spec.run_policy.scheduling_policy or SchedulingPolicy()


def template_pod_spec(job: DefaultedMPIJob, replica_type: str) -> Mapping[str, Any]:
    """The pod spec of a role's template; empty when the role or its template is missing."""
    replica = job.replica_spec(replica_type)
    template = (replica.template if replica else None) or {}
    pod_spec = template.get("spec")
    return pod_spec if isinstance(pod_spec, Mapping) else {}


def template_priority_class(job: DefaultedMPIJob, replica_type: str) -> str:
    name = template_pod_spec(job, replica_type).get("priorityClassName")
    return name if isinstance(name, str) else ""


def gang_priority_class(job: DefaultedMPIJob) -> str:
    """The PriorityClass a PodGroup names: the policy's, else the launcher's, else the
    workers'; existing or not."""
    return (
        scheduling_policy(job).priority_class
        or template_priority_class(job, c.LAUNCHER)
        or template_priority_class(job, c.WORKER)
    )


def replica_type_of(metadata: object) -> str | None:
    """The replica type a pod or template belongs to, by the operator's role label."""
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    role = labels.get(c.LABEL_JOB_ROLE) if isinstance(labels, Mapping) else None
    return _REPLICA_TYPE_OF_ROLE.get(role) if isinstance(role, str) else None


def template_in_gang(template: Mapping[str, Any], job: DefaultedMPIJob) -> bool:
    """Whether the scheduler places the pods of this template in the job's gang: not the
    launcher created once the workers run, which is placed alone."""
    return replica_type_of(template.get("metadata")) in (None, *gang_replica_types(job))


def gang_replica_types(job: DefaultedMPIJob) -> tuple[str, ...]:
    """The roles whose pods the scheduler must place together, launcher first."""
    if _launcher_waits_for_workers(job):
        return (c.WORKER,)
    return tuple(t for t in c.REPLICA_TYPES if job.replica_spec(t) is not None)


def gang_size(job: DefaultedMPIJob) -> int:
    """How many pods the gang has."""
    return sum(job.replicas(t) for t in gang_replica_types(job))


def min_member(job: DefaultedMPIJob) -> int:
    """The PodGroup's minMember: the policy's minAvailable, else every pod of the gang."""
    min_available = scheduling_policy(job).min_available
    if min_available is not None:
        return min_available
    return gang_size(job)


def gang_roles(job: DefaultedMPIJob, facts: ClusterFacts) -> list[GangRole]:
    """The gang's roles in placement order: highest priority first, the launcher on ties."""
    roles = [
        GangRole(
            replica_type=replica_type,
            pods=job.replicas(replica_type),
            priority=facts.priority_of(template_priority_class(job, replica_type)),
            pod_requests=pod_requests(template_pod_spec(job, replica_type)),
        )
        for replica_type in gang_replica_types(job)
    ]
    return placement_order(roles)


def placement_order(roles: list[GangRole]) -> list[GangRole]:
    """Highest priority first; equal priorities keep their order, which lists the launcher
    first, so a tie counts the launcher in (as kubeflow/mpi-operator does)."""
    return sorted(roles, key=lambda role: -role.priority)


def min_resources(job: DefaultedMPIJob, facts: ClusterFacts) -> Amounts | None:
    """The PodGroup's minResources; None when the PodGroup must not carry any.

    The policy's value wins as written. Otherwise it is the sum of the effective requests
    of the minMember pods the scheduler would place first, by priority. A minMember of 0
    asks for no gang, so no resources either.
    """
    policy_resources = scheduling_policy(job).min_resources
    if policy_resources is not None:
        return {name: Quantity.parse(raw) for name, raw in policy_resources.items()}
    remaining = min_member(job)
    if remaining <= 0:
        return None
    total: Amounts = {}
    for role in gang_roles(job, facts):
        counted = min(role.pods, remaining)
        if counted <= 0:
            break
        total = add(total, scaled(role.pod_requests, counted))
        remaining -= counted
    return total


def _launcher_waits_for_workers(job: DefaultedMPIJob) -> bool:
    policy = job.spec.launcher_creation_policy
    return policy == c.LAUNCHER_CREATION_WAIT_FOR_WORKERS_READY and job.replicas(c.WORKER) > 0
