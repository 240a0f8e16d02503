"""The network domain a job's workers are placed in: ``schedulingPolicy.topology``, else the
Kueue annotation on the workers' template that asks for the same thing.

Kueue reads its annotations from the MPIJob's templates, before the operator sees the job
resumed, so a job written for Kueue keeps them; the operator takes them as the knob, and a job
that states both must state the same domain.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.field_errors import FieldError, quoted
from mpi_operator.pod_rules import dns

KNOB_PATH: Final = "spec.runPolicy.schedulingPolicy.topology"
_KUEUE_MODES: Final = (
    (c.KUEUE_REQUIRED_TOPOLOGY, c.TOPOLOGY_REQUIRED),
    (c.KUEUE_PREFERRED_TOPOLOGY, c.TOPOLOGY_PREFERRED),
)
_KUEUE_ANNOTATION_OF_MODE: Final = {mode: annotation for annotation, mode in _KUEUE_MODES}


@dataclass(frozen=True)
class JobTopology:
    """Every worker on nodes sharing one value of the node label ``key``; ``required``: the
    gang waits for such a domain rather than spreading over several."""

    key: str
    required: bool

    @property
    def mode(self) -> str:
        return c.TOPOLOGY_REQUIRED if self.required else c.TOPOLOGY_PREFERRED


def job_topology(job: MPIJob) -> JobTopology | None:
    """The domain of a valid job's workers; None when it asks for none."""
    knob = _knob(job)
    return knob if knob is not None else _from_kueue(job)


def topology_errors(job: MPIJob) -> Iterator[FieldError]:
    """A knob without a valid label key or with an unknown mode, and a Kueue annotation on the
    workers naming another domain than the knob."""
    policy = job.spec.run_policy.scheduling_policy if job.spec and job.spec.run_policy else None
    topology = policy.topology if policy else None
    if topology is None:
        return
    if not topology.key:
        yield FieldError(f"{KNOB_PATH}.key", "must name a node label")
    else:
        for problem in dns.qualified_name(topology.key):
            yield FieldError(
                f"{KNOB_PATH}.key", f"invalid node label {quoted(topology.key)}: {problem}"
            )
    if topology.mode is not None and topology.mode not in c.TOPOLOGY_MODES:
        choices = ", ".join(f'"{mode}"' for mode in c.TOPOLOGY_MODES)
        yield FieldError(
            f"{KNOB_PATH}.mode",
            f"unsupported value {quoted(topology.mode)}: must be one of {choices}",
        )
    knob = _knob(job)
    kueue = _from_kueue(job)
    if knob is not None and kueue is not None and kueue != knob:
        annotation = _KUEUE_ANNOTATION_OF_MODE[kueue.mode]
        yield FieldError(
            f"spec.mpiReplicaSpecs[{c.WORKER}].template.metadata.annotations[{annotation}]",
            f"asks Kueue for {quoted(kueue.key)} ({kueue.mode}) but {KNOB_PATH} asks for "
            f"{quoted(knob.key)} ({knob.mode}): state one domain",
        )


def _knob(job: MPIJob) -> JobTopology | None:
    policy = job.spec.run_policy.scheduling_policy if job.spec and job.spec.run_policy else None
    topology = policy.topology if policy else None
    if topology is None or not topology.key:
        return None
    return JobTopology(topology.key, topology.mode != c.TOPOLOGY_PREFERRED)


def _from_kueue(job: MPIJob) -> JobTopology | None:
    replica = job.replica_spec(c.WORKER)
    template = replica.template if replica else None
    metadata = template.get("metadata") if isinstance(template, Mapping) else None
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return None
    for annotation, mode in _KUEUE_MODES:
        key = annotations.get(annotation)
        if isinstance(key, str) and key:
            return JobTopology(key, mode == c.TOPOLOGY_REQUIRED)
    return None
