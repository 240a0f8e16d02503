"""The sync plans the plan tests build, for the tests that hold the install's RBAC to them.

A representative set of the plan tests runs again with ``plan_sync`` recorded: together
their syncs write each kind of child with each verb a sync sends it (``desired.kinds``), the
job's status, the job itself (its TTL), the gang's objects of each scheduler that has some,
and events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

import pytest

from gang import GangScheduler
from mpi_operator.controller.plan import Plan, SyncContext, plan_sync
from tests.unit.controller import test_plan, test_plan_failures, test_plan_kubectl_exec

_COSCHEDULING = test_plan.COSCHEDULING
# Each test with the arguments of one of its cases.
PLAN_TESTS: tuple[tuple[Callable[..., None], dict[str, Any]], ...] = (
    (test_plan.test_all_resources_are_created_in_order, {"implementation": "OpenMPI"}),
    (test_plan.test_pod_group_is_created_before_any_worker, {"gang": "volcano"}),
    (test_plan.test_pod_group_is_created_before_any_worker, {"gang": _COSCHEDULING}),
    (test_plan.test_pod_group_is_created_before_any_worker, {"gang": test_plan.NATIVE}),
    (
        test_plan.test_suspending_deletes_the_pod_group_and_resuming_creates_it_again,
        {"gang": test_plan.NATIVE},
    ),
    (test_plan.test_a_native_gang_change_updates_its_min_count_in_place, {}),
    (test_plan.test_a_service_selecting_other_pods_is_given_the_jobs_selector_back, {}),
    (test_plan.test_a_secret_without_the_key_pair_gets_a_new_one, {}),
    (test_plan.test_a_job_from_submission_to_running_costs_two_syncs_of_writes, {}),
    (test_plan.test_suspending_a_running_job_deletes_workers_and_pod_group, {}),
    (
        test_plan.test_resuming_recreates_pod_group_and_workers_and_clears_launcher_start_time,
        {},
    ),
    (test_plan.test_gang_policy_change_updates_the_pod_group_in_place, {}),
    (
        test_plan.test_a_nudge_stamps_only_a_waiting_gang_whose_scheduler_needs_it,
        {
            "gang": _COSCHEDULING,
            "status": {"phase": "Scheduling"},
            "nudge": True,
            "expected": ["patch podgroups test"],
        },
    ),
    (
        test_plan_kubectl_exec.test_a_first_sync_writes_the_config_the_workers_the_exec_access_launcher_and_status,
        {},
    ),
    (test_plan_kubectl_exec.test_scaling_up_names_a_new_worker_only_after_its_create, {}),
    (
        test_plan_kubectl_exec.test_a_binding_given_other_subjects_binds_only_the_launchers_account_again,
        {},
    ),
    (
        test_plan_kubectl_exec.test_a_finished_job_loses_its_exec_access_whatever_the_clean_pod_policy,
        {"policy": "None"},
    ),
    (
        test_plan_failures.test_a_failed_worker_is_deleted_by_uid_counted_and_created_again,
        {"log_tail": True},
    ),
    (
        test_plan_failures.test_a_finished_v1_job_is_deleted_once_its_ttl_has_passed_since_completion,
        {"now": "2026-01-02T00:00:00Z", "deleted": True, "requeue_after": None},
    ),
    (test_plan_failures.test_a_finished_v2beta1_job_stays_and_its_launcher_job_gets_the_ttl, {}),
    *(
        (test_plan_failures.test_a_replaced_worker_rejoins_its_gang, {"gang": gang})
        for gang in ("volcano", _COSCHEDULING, "koord-scheduler")
    ),
)
_MODULES: tuple[ModuleType, ...] = (test_plan, test_plan_kubectl_exec, test_plan_failures)


@dataclass(frozen=True)
class PlannedSync:
    gang: GangScheduler | None
    plan: Plan


@cache
def plans_of_the_plan_tests() -> tuple[PlannedSync, ...]:
    """Every plan the tests of ``PLAN_TESTS`` build, with the gang scheduler it was built for."""
    planned: list[PlannedSync] = []

    def recorded(obj: dict[str, Any] | None, view: Any, ctx: SyncContext) -> Plan:
        plan = plan_sync(obj, view, ctx)
        planned.append(PlannedSync(ctx.gang, plan))
        return plan

    with pytest.MonkeyPatch.context() as patch:
        for module in _MODULES:
            patch.setattr(module, "plan_sync", recorded)
        for test, arguments in PLAN_TESTS:
            test(**arguments)
    return tuple(planned)
