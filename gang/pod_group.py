"""What every scheduler's PodGroup shares: its identity and owner, its minMember, how its spec
is compared, the object sent to update it, and a verdict read from the PodGroup alone."""

from __future__ import annotations

import abc
import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from gang import GangResource, GangState, StoredGang
from gang.members import min_member
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import child_metadata
from mpi_operator.quantity import InvalidQuantityError, Quantity

# Turns one spec field into a value that compares equal exactly when the API means the same.
Normalizer = Callable[[Any], object]


def pod_group_kind(group: str, version: str, shipped_by: str) -> GangResource:
    """A scheduler's PodGroup kind in the API; ``shipped_by`` installs its CRD."""
    return GangResource(group, version, kind="PodGroup", plural="podgroups", shipped_by=shipped_by)


def new_pod_group(
    resource: GangResource, job: DefaultedMPIJob, spec: dict[str, Any]
) -> dict[str, Any]:
    """A PodGroup named after the job, in its namespace, controlled by it, with no labels or
    annotations of its own."""
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": child_metadata(job, names.pod_group_name(job)),
        "spec": spec,
    }


def updated_pod_group(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The object to send as an update: the stored one with the desired spec.

    ``current`` usually comes from a shared cache, so it is copied, never changed.
    """
    updated = copy.deepcopy(dict(current))
    updated["spec"] = copy.deepcopy(desired.get("spec") or {})
    return updated


class PodGroupScheduler(abc.ABC):
    """The part of a gang scheduler that every PodGroup-based one shares; a scheduler adds its
    own spec fields, how it compares specs and how it reads a PodGroup's status."""

    pod_group_resource: ClassVar[GangResource]

    @property
    def gang_resources(self) -> Sequence[GangResource]:
        return (self.pod_group_resource,)

    def gang_objects(self, job: DefaultedMPIJob, facts: ClusterFacts) -> list[dict[str, Any]]:
        return [self.pod_group(job, facts)]

    def pod_group(self, job: DefaultedMPIJob, facts: ClusterFacts) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        members = min_member(job)
        if members:
            spec["minMember"] = members
        spec.update(self.spec_fields(job, facts))
        return new_pod_group(self.pod_group_resource, job, spec)

    @abc.abstractmethod
    def spec_fields(self, job: DefaultedMPIJob, facts: ClusterFacts) -> dict[str, Any]:
        """The scheduler's own spec fields, sent after minMember in this order."""

    def updated_object(
        self, current: Mapping[str, Any], desired: Mapping[str, Any]
    ) -> dict[str, Any]:
        return updated_pod_group(current, desired)

    def gang_state(self, gang: StoredGang) -> GangState:
        return self.pod_group_state(gang.objects[self.pod_group_resource.plural])

    @abc.abstractmethod
    def pod_group_state(self, pod_group: dict[str, Any]) -> GangState:
        """The scheduler's verdict on a stored PodGroup, read from its status."""


def same_spec(
    current: Mapping[str, Any],
    desired: Mapping[str, Any],
    normalizers: Mapping[str, Normalizer],
) -> bool:
    """Whether two specs mean the same; fields without a normalizer compare structurally."""
    for key in current.keys() | desired.keys():
        normalize = normalizers.get(key, structural)
        if normalize(current.get(key)) != normalize(desired.get(key)):
            return False
    return True


def scalar(zero: object) -> Normalizer:
    """A plain field whose absence means its zero value (Go's omitempty)."""
    return lambda value: zero if value is None else value


def optional(value: Any) -> object:
    """A pointer field: absent and zero differ."""
    return value


def resource_list(value: Any) -> object:
    """A resource list by value (``1536Mi`` is ``1.5Gi``); absent is empty."""
    if not isinstance(value, Mapping):
        return {}
    return {name: _amount(raw) for name, raw in value.items()}


def optional_resource_list(value: Any) -> object:
    """A resource-list pointer: absent differs from present-and-empty."""
    return None if value is None else resource_list(value)


def structural(value: Any) -> object:
    """Any other value, where null, empty maps and empty lists all mean absent."""
    if isinstance(value, Mapping):
        items = {key: structural(item) for key, item in value.items()}
        kept = {key: item for key, item in items.items() if item is not None}
        return kept or None
    if isinstance(value, list):
        return [structural(item) for item in value] or None
    return value


def _amount(raw: object) -> object:
    try:
        return Quantity.parse(raw).value
    except InvalidQuantityError:
        return raw
