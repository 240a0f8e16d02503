"""schedulingPolicy.topology compiled by each gang strategy: its worker pods against golden
files, the launcher left free, a template's own affinity kept, and a strategy of a new scheduler
bringing its own dialect by ``gang.WithTopology`` alone."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, Final

import pytest
import yaml
from golden import assert_matches_golden

import gang
from gang import WithTopology, select_gang_scheduler
from mpi_operator import sdk
from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.topology import JobTopology
from mpi_operator.testing.wrappers import MPIJobWrapper
from tests.unit.test_fourth_gang_scheduler import NAME as BADGE_SCHEDULER
from tests.unit.test_fourth_gang_scheduler import BadgeScheduler

RACK: Final = "example.com/rack"
SCHEDULERS: Final = {
    "none": None,
    "volcano": "volcano",
    "coscheduling": "scheduler-plugins-scheduler",
    "koordinator": "koord-scheduler",
    "native": "scheduling.k8s.io/podgroup",
}


def rack_job(mode: str = c.TOPOLOGY_REQUIRED) -> MPIJobWrapper:
    return (
        MPIJobWrapper("pi", "ns").workers(2).scheduling_policy(topology={"key": RACK, "mode": mode})
    )


def rendered(wrapper: MPIJobWrapper, gang_scheduling: str | None) -> list[dict[str, Any]]:
    return list(sdk.render(wrapper.obj(), gang_scheduling=gang_scheduling))


def worker_pods(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == "Pod"]


def launcher_pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    job = next(o for o in objects if o["kind"] == "Job")
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("scheduler", list(SCHEDULERS))
@pytest.mark.parametrize("mode", [c.TOPOLOGY_REQUIRED, c.TOPOLOGY_PREFERRED])
def test_worker_pods_match_golden(scheduler: str, mode: str) -> None:
    pods = worker_pods(rendered(rack_job(mode), SCHEDULERS[scheduler]))
    placement = [
        {
            "name": pod["metadata"]["name"],
            "annotations": pod["metadata"].get("annotations", {}),
            "affinity": pod["spec"]["affinity"],
        }
        for pod in pods
    ]
    text = yaml.safe_dump(placement, sort_keys=False)
    assert_matches_golden(f"gang/topology-{scheduler}-{mode.lower()}.yaml", text)


@pytest.mark.parametrize("scheduler", list(SCHEDULERS))
def test_every_worker_is_kept_with_the_others_and_the_launcher_is_not(scheduler: str) -> None:
    objects = rendered(rack_job(), SCHEDULERS[scheduler])
    for pod in worker_pods(objects):
        (term,) = pod["spec"]["affinity"]["podAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert term["topologyKey"] == RACK
        assert term["labelSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert "affinity" not in launcher_pod_spec(objects)


def test_without_a_domain_nothing_is_added() -> None:
    objects = rendered(MPIJobWrapper("pi", "ns").workers(2), None)
    assert all("affinity" not in pod["spec"] for pod in worker_pods(objects))


def test_a_templates_own_affinity_terms_are_kept() -> None:
    own = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}
    wrapper = rack_job().pod_spec_field(
        c.WORKER,
        "affinity",
        {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [own]}},
    )
    (pod, _) = worker_pods(rendered(wrapper, None))
    terms = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [term["topologyKey"] for term in terms] == ["zone", RACK]


def test_a_kueue_annotation_alone_places_the_workers_too() -> None:
    wrapper = (
        MPIJobWrapper("pi", "ns")
        .workers(2)
        .template_annotation(c.WORKER, c.KUEUE_PREFERRED_TOPOLOGY, RACK)
    )
    for pod in worker_pods(rendered(wrapper, None)):
        (term,) = pod["spec"]["affinity"]["podAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"
        ]
        assert term["podAffinityTerm"]["topologyKey"] == RACK
        assert pod["metadata"]["annotations"][c.KUEUE_PREFERRED_TOPOLOGY] == RACK


# -- a new scheduler's own dialect, added by the checklist alone ------------------------------

DOMAIN_ANNOTATION: Final = "domain.example/key"
RANK_ANNOTATION: Final = "domain.example/rank"


class DomainScheduler(BadgeScheduler):
    """The fourth scheduler's test strategy, reading the domain from two pod annotations."""

    def keep_in_domain(
        self,
        worker: dict[str, Any],
        job: DefaultedMPIJob,
        topology: JobTopology,
        index: int,
        facts: ClusterFacts,
    ) -> dict[str, Any]:
        placed = copy.deepcopy(worker)
        placed["metadata"].setdefault("annotations", {}).update(
            {DOMAIN_ANNOTATION: f"{topology.key}={topology.mode}", RANK_ANNOTATION: str(index)}
        )
        return placed


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(gang._STRATEGIES, BADGE_SCHEDULER, lambda name: DomainScheduler())
    yield


@pytest.mark.usefixtures("registered")
def test_a_new_schedulers_dialect_replaces_the_affinity() -> None:
    assert isinstance(select_gang_scheduler(BADGE_SCHEDULER), WithTopology)
    pods = worker_pods(rendered(rack_job(c.TOPOLOGY_PREFERRED), BADGE_SCHEDULER))
    assert [pod["metadata"]["annotations"][RANK_ANNOTATION] for pod in pods] == ["0", "1"]
    assert {pod["metadata"]["annotations"][DOMAIN_ANNOTATION] for pod in pods} == {
        f"{RACK}=Preferred"
    }
    assert all("affinity" not in pod["spec"] for pod in pods)
