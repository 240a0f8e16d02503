"""A job's admission, remembered across syncs that only bring a new status."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gang import select_gang_scheduler
from mpi_operator.api.bounds import MAX_VALUES
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.controller.admission import Admission, AdmissionCache, admit
from mpi_operator.controller.plan import SyncContext, plan_sync
from mpi_operator.desired.transports.ssh import SSHKeyPair
from mpi_operator.testing.view import MemoryView
from mpi_operator.testing.wrappers import MPIJobWrapper

FACTS = ClusterFacts()
KEY = SSHKeyPair("-----BEGIN EC PRIVATE KEY-----\nx\n-----END EC PRIVATE KEY-----\n", "k\n")
CREATED = {
    "conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated"}],
    "startTime": "2026-01-01T00:00:00Z",
}


def stored(
    wrapper: MPIJobWrapper, version: str = "1", status: Any = None, **metadata: Any
) -> dict[str, Any]:
    obj = wrapper.obj()
    obj["metadata"].update(resourceVersion=version, generation=1, **metadata)
    if status is not None:
        obj["status"] = copy.deepcopy(status)
    return obj


def job() -> MPIJobWrapper:
    return MPIJobWrapper().workers(2)


def summary(admission: Admission) -> tuple[Any, ...]:
    """Everything a sync reads of an admission."""
    if admission.job is None:
        return (None, [str(error) for error in admission.errors])
    model = admission.job
    return (
        model.model_dump(by_alias=True),
        list(model.metadata),
        sorted(model.model_fields_set),
        model.model_extra,
        [str(error) for error in admission.errors],
    )


def test_a_new_status_and_version_reuse_the_admitted_spec() -> None:
    cache = AdmissionCache()
    first = cache.admit(stored(job(), "1"), FACTS, None)
    second = cache.admit(stored(job(), "2", CREATED), FACTS, None)
    assert first.job is not None and second.job is not None
    assert second.job.spec is first.job.spec
    assert second.job.metadata["resourceVersion"] == "2"
    assert second.job.status is not None and second.job.status.start_time == CREATED["startTime"]
    assert first.job.metadata["resourceVersion"] == "1" and first.job.status is None


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(lambda obj: obj["spec"].update(slotsPerWorker=2), id="spec"),
        pytest.param(lambda obj: obj["metadata"].update(labels={"a": "b"}), id="label"),
        pytest.param(
            lambda obj: obj["metadata"].update(annotations={"kueue.x-k8s.io/queue-name": "q"}),
            id="annotation",
        ),
        pytest.param(lambda obj: obj.update(apiVersion="kubeflow.org/v1"), id="apiVersion"),
    ],
)
def test_anything_but_status_and_version_admits_anew(changed: Any) -> None:
    cache = AdmissionCache()
    first = cache.admit(stored(job()), FACTS, None)
    obj = stored(job(), "2")
    changed(obj)
    second = cache.admit(obj, FACTS, None)
    assert first.job is not None and second.job is not None
    assert second.job.spec is not first.job.spec
    assert summary(second) == summary(admit(obj, FACTS, None))


def test_new_cluster_facts_or_another_scheduler_admit_anew() -> None:
    cache = AdmissionCache()
    first = cache.admit(stored(job()), FACTS, None)
    facts = ClusterFacts(cluster_domain="example.org")
    by_facts = cache.admit(stored(job()), facts, None)
    by_gang = cache.admit(stored(job()), facts, select_gang_scheduler("volcano"))
    assert first.job is not None and by_facts.job is not None and by_gang.job is not None
    assert len({id(first.job.spec), id(by_facts.job.spec), id(by_gang.job.spec)}) == 3


def test_the_cache_keeps_the_most_recently_synced_jobs_only() -> None:
    cache = AdmissionCache(size=2)
    jobs = [MPIJobWrapper(name).workers(1) for name in ("a", "b", "c")]
    admitted = [cache.admit(stored(wrapper), FACTS, None).job for wrapper in jobs]
    again = [cache.admit(stored(wrapper, "2"), FACTS, None).job for wrapper in jobs]
    assert all(job is not None for job in admitted + again)
    # "a" was dropped for "c"; re-admitting "a" then dropped "b", and "b" dropped "c".
    assert [new.spec is old.spec for new, old in zip(again, admitted, strict=True)] == [  # type: ignore[union-attr]
        False,
        False,
        False,
    ]
    last = cache.admit(stored(jobs[2], "3"), FACTS, None).job
    assert last is not None and last.spec is again[2].spec  # type: ignore[union-attr]


def test_the_default_cache_holds_a_thousand_jobs_in_flight() -> None:
    # At a thousand jobs each job's syncs are seconds apart, with every other job's between.
    cache = AdmissionCache()
    jobs = [MPIJobWrapper(f"job-{index}").workers(1) for index in range(1000)]
    admitted = [cache.admit(stored(wrapper), FACTS, None).job for wrapper in jobs]
    again = [cache.admit(stored(wrapper, "2"), FACTS, None).job for wrapper in jobs]
    assert all(
        new is not None and old is not None and new.spec is old.spec
        for new, old in zip(again, admitted, strict=True)
    )


def test_a_forgotten_job_is_admitted_anew() -> None:
    cache = AdmissionCache()
    first = cache.admit(stored(job()), FACTS, None)
    cache.forget("ns", "test")
    second = cache.admit(stored(job(), "2"), FACTS, None)
    assert first.job is not None and second.job is not None
    assert second.job.spec is not first.job.spec


def _bulky_status(values: int) -> dict[str, Any]:
    return {"conditions": [], "extra": [0] * values}


# Each object is admitted after the same job was admitted with another status and version:
# whatever the cache kept, the answer is admit()'s.
CASES = {
    "valid, no status": stored(job(), "7"),
    "valid, status": stored(job(), "7", CREATED),
    "status null": stored(job(), "7", None) | {"status": None},
    "kubeflow.org/v1": stored(job().v1(), "7", CREATED),
    "no resourceVersion": {**job().obj(), "status": CREATED},
    "status of the wrong type": stored(job(), "7", ["Running"]),
    "condition of the wrong type": stored(job(), "7", {"conditions": [{"type": 3}]}),
    "status with unknown fields": stored(job(), "7", {"phase": "Running", **CREATED}),
    "status with a lone surrogate": stored(job(), "7", {"startTime": "\udc80"}),
    "status over the document's limit": stored(job(), "7", _bulky_status(MAX_VALUES)),
    "resourceVersion not a string": stored(job(), "7") | {"metadata": {}},
    "invalid spec": stored(job().replicas("Worker", -1), "7", CREATED),
    "invalid spec and status": stored(job().replicas("Worker", -1), "7", ["x"]),
    "spec of the wrong type and status": stored(job().spec_field("slotsPerWorker", "2"), "7", 3),
    "managed elsewhere": stored(job().run_policy(managedBy="kueue.x-k8s.io/multikueue"), "7"),
    "being deleted": stored(job(), "7", CREATED, deletionTimestamp="2026-01-01T00:00:00Z"),
    "not an object": ["MPIJob"],
    "no metadata": {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "spec": {}},
}
CASES["resourceVersion not a string"]["metadata"] = {
    **stored(job())["metadata"],
    "resourceVersion": 7.5,
}


@pytest.mark.parametrize("obj", CASES.values(), ids=CASES.keys())
def test_the_cache_answers_as_admit_does(obj: Any) -> None:
    cache = AdmissionCache()
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        earlier = {**copy.deepcopy(obj), "status": {"startTime": "2025-01-01T00:00:00Z"}}
        earlier["metadata"]["resourceVersion"] = "6"
        cache.admit(earlier, FACTS, None)
    assert summary(cache.admit(obj, FACTS, None)) == summary(admit(obj, FACTS, None))


def _run_pods(view: MemoryView) -> None:
    """Every pod running and ready, every Job active: the syncs that follow see them."""
    ready = {"type": "Ready", "status": "True"}
    for (resource, _, _), obj in view.objects.items():
        if resource == "pods":
            obj["status"] = {"phase": "Running", "conditions": [ready]}
        elif resource == "jobs":
            obj["status"] = {"active": 1}


@pytest.mark.parametrize(
    ("wrapper", "gang"),
    [
        (job(), ""),
        (job().v1(), ""),
        (job(), "volcano"),
        (job().launcher_creation_policy("WaitForWorkersReady"), "scheduler-plugins"),
    ],
    ids=["ssh", "kubectl exec", "volcano", "coscheduling, wait for workers"],
)
def test_syncs_leave_the_admitted_job_as_it_was(wrapper: MPIJobWrapper, gang: str) -> None:
    """The admitted job is shared by a job's syncs: none may change it."""
    cache = AdmissionCache()
    scheduler = select_gang_scheduler(gang)
    ctx = SyncContext(FACTS, scheduler, "2026-01-01T00:00:00Z", lambda: KEY, admit=cache.admit)
    view = MemoryView(
        {"kind": "Queue", "metadata": {"name": "default"}, "status": {"state": "Open"}}
    )
    obj = stored(wrapper)
    admitted = cache.admit(obj, FACTS, scheduler).job
    assert admitted is not None
    before = summary(Admission(admitted))
    for version in range(2, 6):
        plan = plan_sync(obj, view, ctx)
        view.apply(plan.actions)
        _run_pods(view)
        for action in plan.actions:
            if action.resource == "mpijobs/status" and action.body:
                obj = {**obj, "status": action.body["status"]}
        obj["metadata"] = {**obj["metadata"], "resourceVersion": str(version)}
    assert summary(Admission(admitted)) == before
    assert cache.admit(obj, FACTS, scheduler).job.spec is admitted.spec  # type: ignore[union-attr]
