"""Keeping a job's workers in one network domain: what every scheduler understands.

A scheduler with a dialect of its own for a domain implements ``gang.WithTopology``; any
other (the default scheduler, coscheduling) gets pod affinity on the domain's node label over
the job's own workers, which kube-scheduler's InterPodAffinity plugin enforces: the first
worker chooses the domain, every later one must join it (required) or is drawn to it
(preferred).
"""

from __future__ import annotations

import copy
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.topology import JobTopology

# The strongest pull a preferred term may have, so the domain outweighs spreading scores.
PREFERRED_WEIGHT: Final = 100


def with_worker_affinity(
    template: dict[str, Any], job: DefaultedMPIJob, topology: JobTopology
) -> dict[str, Any]:
    """A copy of a worker's template drawn to the domain of the job's other workers; the
    template's own affinity terms are kept beside it."""
    placed = copy.deepcopy(template)
    spec = placed.setdefault("spec", {})
    affinity = spec.get("affinity") or {}
    spec["affinity"] = affinity
    pod_affinity = affinity.get("podAffinity") or {}
    affinity["podAffinity"] = pod_affinity
    term: dict[str, Any] = {
        "labelSelector": {
            "matchLabels": {c.LABEL_JOB_NAME: job.name, c.LABEL_JOB_ROLE: c.ROLE_WORKER}
        },
        "topologyKey": topology.key,
    }
    field = "requiredDuringSchedulingIgnoredDuringExecution"
    entry: dict[str, Any] = term
    if not topology.required:
        field = "preferredDuringSchedulingIgnoredDuringExecution"
        entry = {"weight": PREFERRED_WEIGHT, "podAffinityTerm": term}
    pod_affinity[field] = [*(pod_affinity.get(field) or []), entry]
    return placed
