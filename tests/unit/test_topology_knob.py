"""schedulingPolicy.topology: the knob, its refusals, and the Kueue annotations it stands for."""

from __future__ import annotations

import pytest

from mpi_operator.api import constants as c
from mpi_operator.api.topology import JobTopology, job_topology
from mpi_operator.api.validation import parse_mpijob
from mpi_operator.desired.validation import validate
from mpi_operator.testing.wrappers import MPIJobWrapper

KNOB = "spec.runPolicy.schedulingPolicy.topology"
RACK = "example.com/rack"


def errors_of(wrapper: MPIJobWrapper) -> list[str]:
    return [str(error) for error in validate(parse_mpijob(wrapper.obj()))]


@pytest.mark.parametrize("version", ["v2beta1", "v1"])
@pytest.mark.parametrize(
    ("knob", "expected"),
    [
        ({"key": RACK}, JobTopology(RACK, required=True)),
        ({"key": RACK, "mode": "Required"}, JobTopology(RACK, required=True)),
        ({"key": RACK, "mode": "Preferred"}, JobTopology(RACK, required=False)),
    ],
)
def test_the_knob_reads_the_same_through_both_versions(
    version: str, knob: dict[str, str], expected: JobTopology
) -> None:
    wrapper = MPIJobWrapper().workers(2).scheduling_policy(topology=knob)
    if version == "v1":
        wrapper = wrapper.v1()
    assert errors_of(wrapper) == []
    assert job_topology(wrapper.defaulted()) == expected


def test_no_knob_and_no_annotation_is_no_topology() -> None:
    assert job_topology(MPIJobWrapper().workers(2).defaulted()) is None


@pytest.mark.parametrize(
    ("annotation", "required"),
    [(c.KUEUE_REQUIRED_TOPOLOGY, True), (c.KUEUE_PREFERRED_TOPOLOGY, False)],
)
def test_a_kueue_annotation_on_the_workers_stands_in_for_the_knob(
    annotation: str, required: bool
) -> None:
    wrapper = MPIJobWrapper().workers(2).template_annotation(c.WORKER, annotation, RACK)
    assert errors_of(wrapper) == []
    assert job_topology(wrapper.defaulted()) == JobTopology(RACK, required)


def test_the_knob_and_the_same_kueue_annotation_agree() -> None:
    wrapper = (
        MPIJobWrapper()
        .workers(2)
        .scheduling_policy(topology={"key": RACK, "mode": "Preferred"})
        .template_annotation(c.WORKER, c.KUEUE_PREFERRED_TOPOLOGY, RACK)
    )
    assert errors_of(wrapper) == []


@pytest.mark.parametrize(
    ("knob", "annotation", "expected"),
    [
        (
            {"key": RACK, "mode": "Requird"},
            None,
            f'{KNOB}.mode: unsupported value "Requird": must be one of "Required", "Preferred"',
        ),
        (
            {"key": RACK, "mdoe": "Required"},
            None,
            f'{KNOB}.mdoe: unknown field; did you mean "mode"?',
        ),
        ({"mode": "Required"}, None, f"{KNOB}.key: must name a node label"),
        (
            {"key": "rack name"},
            None,
            f'{KNOB}.key: invalid node label "rack name": name part must consist of '
            "alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character",
        ),
        (
            {"key": RACK},
            (c.KUEUE_PREFERRED_TOPOLOGY, "example.com/block"),
            f"spec.mpiReplicaSpecs[Worker].template.metadata.annotations"
            f'[{c.KUEUE_PREFERRED_TOPOLOGY}]: asks Kueue for "example.com/block" (Preferred) '
            f'but {KNOB} asks for "{RACK}" (Required): state one domain',
        ),
    ],
)
def test_a_bad_knob_is_refused_by_field_path(
    knob: dict[str, str], annotation: tuple[str, str] | None, expected: str
) -> None:
    wrapper = MPIJobWrapper().workers(2).scheduling_policy(topology=knob)
    if annotation is not None:
        wrapper = wrapper.template_annotation(c.WORKER, *annotation)
    assert errors_of(wrapper) == [expected]
