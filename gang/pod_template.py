"""Handing a pod template to a gang scheduler: its scheduler name and its group's key."""

from __future__ import annotations

import copy
from typing import Any


def assign_to_gang(
    template: dict[str, Any],
    scheduler_name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A copy of ``template`` scheduled by ``scheduler_name`` and carrying these keys.

    A schedulerName the user wrote is replaced: a pod placed by another scheduler would
    never join the gang, which would then wait forever.
    """
    assigned = copy.deepcopy(template)
    spec = assigned.get("spec")
    if not isinstance(spec, dict):
        spec = assigned["spec"] = {}
    spec["schedulerName"] = scheduler_name
    metadata = assigned.get("metadata")
    if not isinstance(metadata, dict):
        metadata = assigned["metadata"] = {}
    for field, values in (("labels", labels), ("annotations", annotations)):
        if values:
            existing = metadata.get(field)
            metadata[field] = {**(existing if isinstance(existing, dict) else {}), **values}
    return assigned
