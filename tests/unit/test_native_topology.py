"""A network domain on Kubernetes' own PodGroup: spec.schedulingConstraints for Required, the
pod affinity alone for Preferred, the constraint never updated in place, and the gang's
condition saying when the stored PodGroup does not carry the job's domain."""

from __future__ import annotations

from typing import Any, Final

import pytest
from golden import assert_matches_golden

from gang import StoredGang
from gang.native import NativeScheduler
from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.cli import dump_objects
from mpi_operator.testing.wrappers import MPIJobWrapper

RACK: Final = "example.com/rack"
BETA: Final = NativeScheduler()
ALPHA: Final = NativeScheduler("v1alpha2")
PLACED: Final = {
    "conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}]
}


def job(mode: str | None = c.TOPOLOGY_REQUIRED, key: str = RACK) -> MPIJobWrapper:
    wrapper = MPIJobWrapper("pi", "ns").launcher(cpu="1").workers(2, cpu="2")
    if mode is None:
        return wrapper
    return wrapper.scheduling_policy(topology={"key": key, "mode": mode})


def pod_group(wrapper: MPIJobWrapper, scheduler: NativeScheduler = BETA) -> dict[str, Any]:
    [obj] = scheduler.gang_objects(wrapper.job(), ClusterFacts())
    return obj


@pytest.mark.parametrize("mode", [c.TOPOLOGY_REQUIRED, c.TOPOLOGY_PREFERRED])
def test_pod_group_matches_golden(mode: str) -> None:
    text = dump_objects([pod_group(job(mode))])
    assert_matches_golden(f"gang/native-topology-{mode.lower()}.yaml", text)


@pytest.mark.parametrize("scheduler", [BETA, ALPHA], ids=["v1beta1", "v1alpha2"])
def test_required_is_a_scheduling_constraint_in_every_version(scheduler: NativeScheduler) -> None:
    spec = pod_group(job(), scheduler)["spec"]
    assert spec["schedulingConstraints"] == {"topology": [{"key": RACK}]}


def test_a_kueue_annotation_standing_in_for_the_knob_is_a_constraint_too() -> None:
    wrapper = job(None).template_annotation("Worker", c.KUEUE_REQUIRED_TOPOLOGY, RACK)
    assert pod_group(wrapper)["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}


@pytest.mark.parametrize("mode", [c.TOPOLOGY_PREFERRED, None], ids=["Preferred", "no domain"])
def test_preferred_and_no_domain_write_no_constraint(mode: str | None) -> None:
    assert "schedulingConstraints" not in pod_group(job(mode))["spec"]


def test_the_stored_constraint_is_never_updated_and_a_min_count_update_keeps_it() -> None:
    stored = {**pod_group(job()), "status": PLACED}
    for other in (job(key="example.com/block"), job(c.TOPOLOGY_PREFERRED)):
        assert not BETA.needs_update(stored, pod_group(other))
    smaller = pod_group(job(key="example.com/block").scheduling_policy(minAvailable=2))
    assert BETA.needs_update(stored, smaller)
    updated = BETA.updated_object(stored, smaller)
    assert updated["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    assert updated["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}


def state_of(stored_spec_from: MPIJobWrapper, wanted: MPIJobWrapper) -> tuple[str, bool]:
    stored = {**pod_group(stored_spec_from), "status": PLACED}
    state = BETA.gang_state(StoredGang(wanted.job(), {"podgroups": stored}, []))
    assert state.scheduled is True and state.reason == "PodGroupScheduled"
    return state.message, state.warning


PLACED_MESSAGE: Final = "kube-scheduler placed at least minCount pods together."


@pytest.mark.parametrize(
    ("stored", "wanted", "expected"),
    [
        (job(), job(), (PLACED_MESSAGE, False)),
        (job(c.TOPOLOGY_PREFERRED), job(c.TOPOLOGY_PREFERRED), (PLACED_MESSAGE, False)),
        (
            job(None),
            job(),
            (
                f'{PLACED_MESSAGE} The PodGroup has no spec.schedulingConstraints for "{RACK}": '
                "the API server drops the field while its TopologyAwareWorkloadScheduling "
                "feature gate is off, and the PodGroup keeps the constraints it was created "
                "with; the workers' pod affinity alone keeps them in one domain.",
                True,
            ),
        ),
        (
            job(),
            job(key="example.com/block"),
            (
                f"{PLACED_MESSAGE} The PodGroup keeps the spec.schedulingConstraints it was "
                f'created with ("{RACK}"): the field is immutable, so the job\'s domain '
                "applies once the PodGroup is created again (the job suspended and resumed).",
                True,
            ),
        ),
        (
            job(),
            job(c.TOPOLOGY_PREFERRED),
            (
                f"{PLACED_MESSAGE} The PodGroup keeps the spec.schedulingConstraints it was "
                f'created with ("{RACK}"): the field is immutable, so the job\'s domain '
                "applies once the PodGroup is created again (the job suspended and resumed).",
                True,
            ),
        ),
    ],
    ids=[
        "the constraint stored",
        "Preferred: none wanted, none stored",
        "dropped by the API server (or asked for after the PodGroup was created)",
        "another label asked for after creation",
        "Preferred asked for after creation",
    ],
)
def test_the_condition_says_when_the_stored_pod_group_lacks_the_jobs_domain(
    stored: MPIJobWrapper, wanted: MPIJobWrapper, expected: tuple[str, bool]
) -> None:
    assert state_of(stored, wanted) == expected


@pytest.mark.parametrize(
    ("stored_constraints", "shown"),
    [({"topology": "rack"}, "no domain"), ({"topology": [{}, {"key": 7}]}, "null, 7")],
    ids=["not a list", "terms without a label key"],
)
def test_a_stored_constraint_of_any_shape_is_named_without_a_traceback(
    stored_constraints: Any, shown: str
) -> None:
    stored = pod_group(job())
    stored["spec"]["schedulingConstraints"] = stored_constraints
    stored["status"] = PLACED
    state = BETA.gang_state(StoredGang(job().job(), {"podgroups": stored}, []))
    assert f"created with ({shown})" in state.message
