"""The fuzz suite's fixed-seed short run, part of every test run (``make fuzz`` runs it long).

Hypothesis draws the same examples on every run (derandomized), so a failure here reproduces
as is; the budget keeps the whole file well under a minute.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from mpi_operator.testing.pod_rules import ACCEPTED, REFUSED, PodRuleCase

from .harness import FAILURES, VALID, Tally, run_example
from .harness import REFUSED as REFUSED_RUN
from .jobs import Example, examples
from .oracle import problems, unknown_mpijob_fields

TIME_LIMIT = 10.0
BUDGET = 200
_tally = Tally()


@settings(
    max_examples=BUDGET,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(examples())
def test_no_input_ends_in_a_traceback_a_hang_or_an_invalid_object(example: Example) -> None:
    for outcome in run_example(example, TIME_LIMIT):
        _tally.add(example, outcome)
        assert outcome.category not in FAILURES, f"{outcome.path}: {outcome.detail}"


def test_the_short_run_reaches_both_outcomes() -> None:
    # Runs after the property above (file order): a generator that only ever produced
    # refusals, or only valid jobs, would test little.
    if not _tally.counts:
        pytest.skip("runs only together with the property test")
    assert _tally.counts[VALID] > BUDGET // 20
    assert _tally.counts[REFUSED_RUN] > BUDGET // 5


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            {
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "i", "comand": ["x"]}],
                },
            },
            "spec.containers.0: Additional properties are not allowed ('comand' was unexpected)",
        ),
        (
            {"kind": "Service", "metadata": {"name": "a-", "namespace": "ns"}},
            "metadata.name 'a-': not a DNS-1035 label",
        ),
        (
            {
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]},
            },
            "spec.c: image None missing or padded",
        ),
        (
            {
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "i",
                            "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
                        }
                    ],
                },
            },
            "spec.c: cpu request above its limit",
        ),
        (
            {
                "kind": "PodGroup",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"minMember": 2**31},
            },
            "spec.minMember 2147483648: not a non-negative int32",
        ),
        (
            {
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccount": "x-launcher",
                    "containers": [{"name": "c", "image": "i"}],
                },
            },
            "spec: runs as 'x-launcher', a kubeflow.org/v1 launcher's account",
        ),
        (
            {
                "kind": "Job",
                "metadata": {"name": "pi-launcher", "namespace": "ns"},
                "spec": {"template": {"spec": {"serviceAccountName": "x-launcher"}}},
            },
            "spec.template.spec: runs as 'x-launcher', a kubeflow.org/v1 launcher's account",
        ),
    ],
    ids=[
        "unknown container field",
        "service name",
        "image",
        "request above limit",
        "int32 overflow",
        "a pod as a launcher's account",
        "a launcher Job as another's account",
    ],
)
def test_the_oracle_is_not_vacuous(obj: dict[str, object], expected: str) -> None:
    assert expected in problems(obj)


def test_the_oracle_lets_a_launcher_job_run_as_its_own_account() -> None:
    job = {
        "kind": "Job",
        "metadata": {"name": "pi-launcher", "namespace": "ns"},
        "spec": {"template": {"spec": {"serviceAccountName": "pi-launcher"}}},
    }
    assert not [problem for problem in problems(job) if "account" in problem]


def _pod(case: PodRuleCase) -> dict[str, object]:
    spec = case.applied({"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]})
    return {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


@pytest.mark.parametrize("case", REFUSED, ids=lambda case: case.name)
def test_the_oracle_flags_every_broken_pod_rule(case: PodRuleCase) -> None:
    assert problems(_pod(case))


@pytest.mark.parametrize("case", ACCEPTED, ids=lambda case: case.name)
def test_the_oracle_passes_every_valid_pod_rule(case: PodRuleCase) -> None:
    assert problems(_pod(case)) == []


def test_the_oracle_names_the_jobs_unknown_fields() -> None:
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": {
            "slotPerWorker": 1,
            "runPolicy": {"schedulingPolicy": {"minAvailable": 1, "queu": "q"}},
            "mpiReplicaSpecs": {
                "Worker": {"replicas": 1, "template": {"metadata": {"label": {}}, "spec": {}}}
            },
        },
    }
    assert unknown_mpijob_fields(job) == [
        "spec.slotPerWorker: unknown field",
        "spec.runPolicy.schedulingPolicy.queu: unknown field",
        "spec.mpiReplicaSpecs[Worker].template.metadata.label: unknown field",
    ]
