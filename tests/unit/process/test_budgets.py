"""Which API groups get a request budget of their own, as upstream's clientsets do."""

from __future__ import annotations

import pytest

from gang import select_gang_scheduler
from mpi_operator.operator.main import own_budget_groups


@pytest.mark.parametrize(
    ("gang", "groups"),
    [
        ("", ("kubeflow.org",)),
        ("volcano", ("kubeflow.org", "scheduling.volcano.sh")),
        ("scheduler-plugins-scheduler", ("kubeflow.org", "scheduling.x-k8s.io")),
    ],
)
def test_mpijobs_and_the_gang_schedulers_group_each_get_a_budget(
    gang: str, groups: tuple[str, ...]
) -> None:
    assert own_budget_groups(select_gang_scheduler(gang or None)) == groups
