"""A kubeflow.org/v1 launcher's exec access on a real API server, at every step of a job's
life: its account may exec into the job's own worker pods and into nothing else (not a
pod of someone else that holds a worker's name, not every pod because a Role lists no
names), and into nothing once the job ends. Every answer is the API server's own, through
SubjectAccessReview, sampled all along each test by a watcher beside the checks at each step.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client as k8s

from .clusters import E2ECluster, wait_until
from .operator import (
    OperatorProcess,
    event_reasons,
    finish_launcher,
    patch_mpijob,
    settle,
    wait_for_condition,
)
from .test_v1 import BOTH, NEITHER, V1, await_rights, create, exec_rights, held_v1_job

pytestmark = pytest.mark.e2e

JOB = "grants"
LAUNCHER = f"{JOB}-launcher"


def worker(index: int) -> str:
    return f"{JOB}-worker-{index}"


def foreign_pod(cluster: E2ECluster, namespace: str, name: str) -> None:
    """A pod of someone else's (a StatefulSet's, say) that happens to hold a worker's name."""
    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name, labels={"app": "someone-else"}),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="c", image="busybox")]),
    )
    cluster.core.create_namespaced_pod(namespace, pod)


class GrantWatch:
    """Samples, every 0.2 s until stopped, whether the launcher's account may exec into any of
    ``forbidden``, and whether any Role of the namespace has a rule without names; each
    finding is kept for the test to assert on at the end."""

    def __init__(self, cluster: E2ECluster, namespace: str, forbidden: list[str]) -> None:
        self.cluster, self.namespace, self.forbidden = cluster, namespace, forbidden
        self.findings: list[str] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rbac = k8s.RbacAuthorizationV1Api(self.cluster.api)
        while not self._stop.wait(0.2):
            for pod in self.forbidden:
                rights = exec_rights(self.cluster, self.namespace, LAUNCHER, pod)
                if rights != NEITHER:
                    self.findings.append(f"{LAUNCHER} on {pod}: {rights}")
            for role in rbac.list_namespaced_role(self.namespace).items:
                for rule in role.rules or []:
                    if not rule.resource_names:
                        self.findings.append(f"Role {role.metadata.name} has a rule without names")
            self.samples += 1

    @contextmanager
    def running(self) -> Iterator[GrantWatch]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=30)
        assert self.samples > 0, "the watcher never sampled"
        assert self.findings == []


def held_job(**changes: Any) -> dict[str, Any]:
    job = held_v1_job(JOB)
    spec = job["spec"]
    if changes.get("workers") == 0:
        del spec["mpiReplicaSpecs"]["Worker"]
    elif "workers" in changes:
        spec["mpiReplicaSpecs"]["Worker"]["replicas"] = changes["workers"]
    if changes.get("launcher_as_worker"):
        spec["runLauncherAsWorker"] = True
    return job


def roles(cluster: E2ECluster, namespace: str) -> list[str]:
    items = k8s.RbacAuthorizationV1Api(cluster.api).list_namespaced_role(namespace).items
    return [role.metadata.name for role in items]


def finish(cluster: E2ECluster, namespace: str, operator: OperatorProcess) -> None:
    finish_launcher(cluster, namespace, JOB)
    wait_for_condition(cluster, namespace, JOB, "Succeeded", operator=operator)


@pytest.mark.parametrize("workers", [0, 1], ids=["no-workers", "one-worker"])
def test_a_launcher_running_as_a_worker_may_exec_into_its_workers_only(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess, workers: int
) -> None:
    foreign_pod(cluster, namespace, "bystander")
    # A name the job would give a worker it does not have.
    unowned = ["bystander", worker(workers)]
    with GrantWatch(cluster, namespace, unowned).running():
        create(cluster, V1, namespace, held_job(workers=workers, launcher_as_worker=True))
        wait_for_condition(cluster, namespace, JOB, "Running", operator=operator)
        for index in range(workers):
            await_rights(cluster, namespace, LAUNCHER, worker(index), BOTH)
        if not workers:
            settle()
            assert LAUNCHER not in roles(cluster, namespace)
        finish(cluster, namespace, operator)
        for index in range(workers):
            await_rights(cluster, namespace, LAUNCHER, worker(index), NEITHER)


def test_removing_the_workers_of_a_running_job_revokes_the_grant(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    foreign_pod(cluster, namespace, "bystander")
    with GrantWatch(cluster, namespace, ["bystander"]).running():
        create(cluster, V1, namespace, held_job())
        wait_for_condition(cluster, namespace, JOB, "Running", operator=operator)
        await_rights(cluster, namespace, LAUNCHER, worker(1), BOTH)
        patch_mpijob(cluster, namespace, JOB, {"spec": {"mpiReplicaSpecs": {"Worker": None}}})
        for index in range(2):
            await_rights(cluster, namespace, LAUNCHER, worker(index), NEITHER)
        wait_until(lambda: LAUNCHER not in roles(cluster, namespace), 30, message="Role left")


def test_scaling_up_onto_a_foreign_pods_name_never_grants_it(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    foreign_pod(cluster, namespace, worker(2))
    with GrantWatch(cluster, namespace, [worker(2)]).running():
        create(cluster, V1, namespace, held_job())
        wait_for_condition(cluster, namespace, JOB, "Running", operator=operator)
        await_rights(cluster, namespace, LAUNCHER, worker(1), BOTH)
        patch_mpijob(
            cluster, namespace, JOB, {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 3}}}}
        )
        wait_until(
            lambda: "ErrResourceExists" in event_reasons(cluster, namespace, JOB),
            60,
            message="no ErrResourceExists event",
        )
        settle()
        # The job's own workers stay reachable; the foreign pod never was.
        for index in range(2):
            assert exec_rights(cluster, namespace, LAUNCHER, worker(index)) == BOTH
        finish(cluster, namespace, operator)
        for index in range(2):
            await_rights(cluster, namespace, LAUNCHER, worker(index), NEITHER)


def test_a_foreign_pod_already_holding_a_worker_name_is_never_granted(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    foreign_pod(cluster, namespace, worker(1))
    watch = GrantWatch(cluster, namespace, [worker(1)])
    with watch.running():
        create(cluster, V1, namespace, held_job())
        wait_until(
            lambda: "ErrResourceExists" in event_reasons(cluster, namespace, JOB),
            60,
            message="no ErrResourceExists event",
        )
        settle()
        # Stuck on the name: nothing is granted, not even on the worker it did create.
        assert exec_rights(cluster, namespace, LAUNCHER, worker(0)) == NEITHER
        assert LAUNCHER not in roles(cluster, namespace)
    # Once the name is free the job takes it, and its launcher reaches both of its workers.
    cluster.core.delete_namespaced_pod(worker(1), namespace, grace_period_seconds=0)
    wait_for_condition(cluster, namespace, JOB, "Running", timeout=120, operator=operator)
    for index in range(2):
        await_rights(cluster, namespace, LAUNCHER, worker(index), BOTH)
    finish(cluster, namespace, operator)
    for index in range(2):
        await_rights(cluster, namespace, LAUNCHER, worker(index), NEITHER)
