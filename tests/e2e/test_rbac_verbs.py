"""Every verb the shipped roles grant is one the operator asks for.

The local clusters' API servers log, at Metadata level, every request of a ServiceAccount in
``AUDITED_NAMESPACE`` (clusters.py). On the default, Volcano and coscheduling clusters the
operator runs as the shipped ServiceAccount there, bound to the shipped roles (the ClusterRole,
the Lease Role in its lock namespace, the flavour's gang component), and is
driven through the paths that need the grants: it adopts children an earlier version left
without its label (create meets AlreadyExists, get, update), runs, suspends, resumes and
suspends a job again (pods deleted, the launcher Job suspended and resumed, its start time
cleared, a repeated event patched), deletes a finished job whose TTL has passed, keeps its
leader Lease, grants a kubeflow.org/v1 job's launcher exec access and revokes it, and
under gang scheduling adopts,
nudges and deletes a waiting gang's PodGroup while watching PriorityClasses, Volcano queues or
nodes. The audit log then says what it asked for and whether anything was refused; across
the flavours every granted permission must have been asked for, but those the API server
checks on the operator's behalf (``NOT_REQUESTED``). docs/reliability.md has the table.

On kind and existing clusters no audit log can be read, and the tests are skipped.
"""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from gang import capacity_nudge_of, select_gang_scheduler
from hack.cluster import RECIPES
from mpi_operator.api import constants as c
from mpi_operator.api.constants import MPIJOB_RESOURCE
from mpi_operator.sdk import render

from .clusters import (
    AUDITED_NAMESPACE,
    COSCHEDULING,
    SIM,
    VOLCANO,
    ClusterProvider,
    E2ECluster,
    wait_until,
)
from .operator import (
    OperatorProcess,
    create_mpijob,
    ensure_namespace,
    get_pod_group,
    patch_mpijob,
    pods_of,
    sim_job,
    wait_for_condition,
)
from .rbac import (
    AuditedRequests,
    Permission,
    audit_log_size,
    audited_requests,
    bound_service_account,
    granted_permissions,
    load_manifest,
    typed,
)

pytestmark = pytest.mark.e2e

FLAVOURS = ("default", "volcano", "scheduler-plugins")
# Granted for a check the API server makes while serving one of the operator's own requests,
# never asked for by the operator. Each entry says which check; docs/reliability.md too.
NOT_REQUESTED: dict[Permission, str] = {
    ("kubeflow.org", "mpijobs/finalizers", "update"): (
        "children are created with an ownerReference to their MPIJob that sets "
        "blockOwnerDeletion; the OwnerReferencesPermissionEnforcement admission plugin lets "
        "only who may update the owner's finalizers set it"
    ),
    ("", "pods/exec", "create"): (
        "the API server's escalation check when the operator creates a KubectlExec "
        "launcher's Role: only who holds a permission may grant it"
    ),
}
# Granted, and asked for only by an operator watching every namespace, which this test cannot
# run on clusters other tests share (it would reconcile their jobs): the operator here watches
# one namespace. test_topology.py's Volcano cases run one under the shipped role, and its
# PodGroup names the HyperNode tier only when the HyperNodes were read.
ACROSS_NAMESPACES_ONLY: dict[Permission, str] = {
    ("topology.volcano.sh", "hypernodes", "list"): (
        "Volcano's HyperNodes name the tier of a job's domain only beside every node's labels"
    ),
    ("topology.volcano.sh", "hypernodes", "watch"): (
        "Volcano's HyperNodes name the tier of a job's domain only beside every node's labels"
    ),
}
# What the operator stamps on a waiting coscheduling gang's PodGroup when capacity appears.
CAPACITY_ANNOTATION = "training.kubeflow.org/capacity-changed-at"
SUSPENDED_EVENT = "MPIJobSuspended"


@pytest.fixture(scope="module")
def audited(
    cluster_provider: ClusterProvider, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], AuditedRequests]:
    """``audited(flavour)``: the operator's requests on that flavour's cluster, driven once
    per module whichever test asks first."""
    if cluster_provider.provider != "local":
        pytest.skip(
            f"the {cluster_provider.provider} provider's API server keeps no audit log these "
            "tests can read; the local provider's clusters do"
        )
    runs: dict[str, AuditedRequests] = {}
    failed: dict[str, str] = {}

    def audited(flavour: str) -> AuditedRequests:
        if flavour in failed:
            pytest.fail(f"driving the operator on {flavour} failed earlier: {failed[flavour]}")
        if flavour not in runs:
            cluster = cluster_provider.get(flavour)
            try:
                runs[flavour] = drive(cluster, tmp_path_factory.mktemp(f"audited-{flavour}"))
            except BaseException as error:
                failed[flavour] = str(error).splitlines()[0] if str(error) else repr(error)
                raise
        return runs[flavour]

    return audited


@pytest.mark.parametrize("flavour", ["default", VOLCANO, COSCHEDULING])
def test_the_operator_asks_only_for_what_the_role_grants(
    flavour: str, audited: Callable[[str], AuditedRequests]
) -> None:
    requests = audited(flavour)
    assert requests.allowed, "the audit log holds no request of the operator's"
    assert not requests.refused, f"refused: {sorted(requests.refused)}"
    assert not requests.undecided, f"no authorization decision logged: {requests.undecided}"
    # Nothing rests on the roles every ServiceAccount has (discovery, self-reviews).
    beyond = requests.allowed - granted_permissions(RECIPES[flavour].gang_scheduling)
    assert not beyond, f"allowed by some other role: {sorted(beyond)}"


@pytest.mark.volcano
@pytest.mark.coscheduling
def test_every_granted_verb_is_asked_for_by_the_operator(
    audited: Callable[[str], AuditedRequests],
) -> None:
    granted = set().union(
        *(granted_permissions(RECIPES[flavour].gang_scheduling) for flavour in FLAVOURS)
    )
    asked: set[Permission] = set().union(*(audited(flavour).allowed for flavour in FLAVOURS))
    unused = granted - asked - set(NOT_REQUESTED) - set(ACROSS_NAMESPACES_ONLY)
    assert not unused, "granted, and asked for by no code path the test drives: " + ", ".join(
        f"{verb} {group or 'core'}/{resource}" for group, resource, verb in sorted(unused)
    )
    # The exceptions stay exactly the API server's own checks: one the operator asks for
    # after all, or one the role no longer grants, leaves the list.
    assert set(NOT_REQUESTED) <= granted
    assert set(ACROSS_NAMESPACES_ONLY) <= granted
    assert not set(NOT_REQUESTED) & asked, sorted(set(NOT_REQUESTED) & asked)


# --- driving the operator -------------------------------------------------------------------


def drive(cluster: E2ECluster, workdir: Path) -> AuditedRequests:
    """Run the operator as the audited ServiceAccount through the flavour's scenario; what it
    asked for meanwhile, from the audit log."""
    assert cluster.audit_log is not None, f"{cluster.name} was started without an audit log"
    ensure_namespace(cluster, AUDITED_NAMESPACE)
    account = load_manifest("service-account.yaml")["metadata"]["name"]
    namespace = cluster.create_namespace(f"rbac-verbs-{uuid.uuid4().hex[:6]}")
    try:
        with bound_service_account(
            cluster.kubeconfig,
            cluster.api,
            AUDITED_NAMESPACE,
            workdir,
            gang_scheduling=RECIPES[cluster.flavour].gang_scheduling,
            # A fresh namespace has no Lease yet, whatever ran on the cluster before: the
            # operator creates one, as on a new install.
            lock_namespace=namespace,
        ) as kubeconfig:
            operator = OperatorProcess(
                cluster,
                workdir,
                name=f"audited-{cluster.flavour}",
                kubeconfig=kubeconfig,
                lock_namespace=namespace,
                # Other tests' jobs on the shared cluster are not this operator's business.
                extra_args=[f"--namespace={namespace}"],
            )
            offset = audit_log_size(cluster.audit_log)
            try:
                if operator.gang_scheduling:
                    adopt_nudge_and_delete_a_waiting_gang(cluster, namespace, operator)
                else:
                    adopt_run_suspend_resume_and_suspend_again(cluster, namespace, operator)
                # A clean stop hands the Lease back; a request is logged once answered.
                assert operator.stop() == 0, operator.log_tail()
            finally:
                operator.stop()
        return audited_requests(
            cluster.audit_log, offset, f"system:serviceaccount:{AUDITED_NAMESPACE}:{account}"
        )
    finally:
        cluster.delete_namespace(namespace)


def plant_unlabelled_children(
    cluster: E2ECluster, namespace: str, job: dict[str, Any], gang: str, kinds: set[str]
) -> list[tuple[str, str]]:
    """Create the job's children of ``kinds`` as the operator would, but without its label,
    as an earlier operator version left them: the operator's creates then meet
    AlreadyExists, and it reads and labels them. Returns (kind, name) of each."""
    creators: dict[str, Callable[[dict[str, Any]], object]] = {
        "Service": lambda o: cluster.core.create_namespaced_service(
            namespace, typed(k8s.V1Service, o)
        ),
        "ConfigMap": lambda o: cluster.core.create_namespaced_config_map(
            namespace, typed(k8s.V1ConfigMap, o)
        ),
        "Secret": lambda o: cluster.core.create_namespaced_secret(
            namespace, typed(k8s.V1Secret, o)
        ),
        "Pod": lambda o: cluster.core.create_namespaced_pod(namespace, typed(k8s.V1Pod, o)),
        "Job": lambda o: cluster.batch.create_namespaced_job(namespace, typed(k8s.V1Job, o)),
        "PodGroup": lambda o: cluster.custom.create_namespaced_custom_object(
            o["apiVersion"].split("/")[0], o["apiVersion"].split("/")[1], namespace, "podgroups", o
        ),
        "ServiceAccount": lambda o: cluster.core.create_namespaced_service_account(
            namespace, typed(k8s.V1ServiceAccount, o)
        ),
        "Role": lambda o: cluster.rbac.create_namespaced_role(namespace, typed(k8s.V1Role, o)),
        "RoleBinding": lambda o: cluster.rbac.create_namespaced_role_binding(
            namespace, typed(k8s.V1RoleBinding, o)
        ),
    }
    planted = []
    for child in render(job, gang_scheduling=gang or None):
        if child["kind"] not in kinds:
            continue
        unlabelled = copy.deepcopy(child)
        del unlabelled["metadata"]["labels"][c.LABEL_OPERATOR_NAME]
        creators[child["kind"]](unlabelled)
        planted.append((child["kind"], child["metadata"]["name"]))
    assert {kind for kind, _ in planted} == kinds, planted
    return planted


def labels_of(cluster: E2ECluster, namespace: str, kind: str, name: str) -> dict[str, str]:
    readers: dict[str, Callable[[], Any]] = {
        "Service": lambda: cluster.core.read_namespaced_service(name, namespace),
        "ConfigMap": lambda: cluster.core.read_namespaced_config_map(name, namespace),
        "Secret": lambda: cluster.core.read_namespaced_secret(name, namespace),
        "Pod": lambda: cluster.core.read_namespaced_pod(name, namespace),
        "Job": lambda: cluster.batch.read_namespaced_job(name, namespace),
        "PodGroup": lambda: get_pod_group(cluster, namespace, name),
        "ServiceAccount": lambda: cluster.core.read_namespaced_service_account(name, namespace),
        "Role": lambda: cluster.rbac.read_namespaced_role(name, namespace),
        "RoleBinding": lambda: cluster.rbac.read_namespaced_role_binding(name, namespace),
    }
    found = cluster.to_dict(readers[kind]()) or {}
    return dict((found.get("metadata") or {}).get("labels") or {})


def wait_until_adopted(
    cluster: E2ECluster, namespace: str, planted: list[tuple[str, str]], operator: OperatorProcess
) -> None:
    def unlabelled() -> list[tuple[str, str]]:
        return [
            (kind, name)
            for kind, name in planted
            if labels_of(cluster, namespace, kind, name).get(c.LABEL_OPERATOR_NAME)
            != c.OPERATOR_NAME
        ]

    wait_until(
        lambda: not unlabelled(),
        60,
        message=lambda: f"the operator to label {unlabelled()}:\n{operator.log_tail()}",
    )


def suspend(cluster: E2ECluster, namespace: str, name: str, suspended: bool) -> None:
    patch_mpijob(cluster, namespace, name, {"spec": {"runPolicy": {"suspend": suspended}}})


def live_pods(cluster: E2ECluster, namespace: str, job: str, role: str) -> list[Any]:
    return [p for p in pods_of(cluster, namespace, job, role) if not p.metadata.deletion_timestamp]


def adopt_run_suspend_resume_and_suspend_again(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    """Without gang scheduling: every child kind adopted, then a job's life through two
    suspensions, the second of which repeats an event (a patch of the first)."""
    name = "life"
    wrapper = sim_job(name, workers=2).clean_pod_policy("Running")
    # Held, the launcher has started when the job is suspended: resuming must clear its
    # start time (jobs/status) before it may change its pod template.
    wrapper.template_annotation(c.LAUNCHER, SIM + "hold", "true")
    job = create_mpijob(cluster, namespace, wrapper.obj())
    planted = plant_unlabelled_children(
        cluster, namespace, job, "", {"Service", "ConfigMap", "Secret", "Pod", "Job"}
    )
    # A KubectlExec (kubeflow.org/v1) job: its launcher's account, Role and binding adopted,
    # and the Role and binding revoked once the job is suspended.
    exec_job = sim_job("exec").v1().template_annotation(c.LAUNCHER, SIM + "hold", "true").obj()
    exec_job["metadata"]["namespace"] = namespace
    group, _, plural = MPIJOB_RESOURCE
    exec_job = cluster.custom.create_namespaced_custom_object(
        group, c.VERSION_V1, namespace, plural, exec_job
    )
    planted += plant_unlabelled_children(
        cluster, namespace, exec_job, "", {"ServiceAccount", "Role", "RoleBinding"}
    )
    operator.start()
    wait_until_adopted(cluster, namespace, planted, operator)
    wait_for_condition(cluster, namespace, name, "Running", operator=operator)

    suspend(cluster, namespace, name, True)
    wait_for_condition(cluster, namespace, name, "Suspended", operator=operator)
    wait_until(
        lambda: not live_pods(cluster, namespace, name, "worker"),
        60,
        message="the suspended job's workers to be deleted",
    )

    suspend(cluster, namespace, name, False)
    wait_for_condition(cluster, namespace, name, "Suspended", "False", operator=operator)
    launcher = f"{name}-launcher"
    wait_until(
        lambda: (
            not cluster.get_job(namespace, launcher)["spec"].get("suspend")
            and len(live_pods(cluster, namespace, name, "worker")) == 2
        ),
        60,
        message=lambda: f"the job to resume:\n{operator.log_tail()}",
    )

    suspend(cluster, namespace, name, True)

    def suspended_events() -> int:
        return sum(
            int(e.get("count") or 1)
            for e in cluster.events_for(namespace, name)
            if e.get("reason") == SUSPENDED_EVENT
        )

    wait_until(
        lambda: suspended_events() >= 2,
        60,
        message=lambda: f"the second {SUSPENDED_EVENT} event: {suspended_events()} so far",
    )
    events = [e for e in cluster.events_for(namespace, name) if e["reason"] == SUSPENDED_EVENT]
    assert len(events) == 1, "a repeated event is one Event object whose count is patched"

    wait_for_condition(cluster, namespace, "exec", "Running", operator=operator)
    suspend(cluster, namespace, "exec", True)
    # Only the job's binding goes: the namespace keeps the operator's own Lease binding (it is
    # the lock namespace).
    exec_bindings = {name for kind, name in planted if kind == "RoleBinding"}
    assert exec_bindings
    wait_until(
        lambda: (
            not exec_bindings
            & {b.metadata.name for b in cluster.rbac.list_namespaced_role_binding(namespace).items}
        ),
        60,
        message=lambda: f"the suspended v1 job's exec access to go:\n{operator.log_tail()}",
    )

    # A finished kubeflow.org/v1 job whose ttlSecondsAfterFinished has passed is deleted.
    brief = sim_job("brief").v1().run_policy(ttlSecondsAfterFinished=1).obj()
    brief["metadata"]["namespace"] = namespace
    cluster.custom.create_namespaced_custom_object(group, c.VERSION_V1, namespace, plural, brief)

    def mpijobs() -> set[str]:
        group, version, plural = MPIJOB_RESOURCE
        listed = cluster.custom.list_namespaced_custom_object(group, version, namespace, plural)
        return {job["metadata"]["name"] for job in listed["items"]}

    wait_until(
        lambda: "brief" not in mpijobs(),
        90,
        message=lambda: f"the finished job to be deleted by its TTL:\n{operator.log_tail()}",
    )


def adopt_nudge_and_delete_a_waiting_gang(
    cluster: E2ECluster, namespace: str, operator: OperatorProcess
) -> None:
    """Under gang scheduling: a gang that fits on no node, its PodGroup adopted; where the
    scheduler needs it, a node added makes the operator stamp the PodGroup; suspending the
    job deletes the PodGroup."""
    name = "gang"
    # More CPU per worker than any node has, the one added below included: the gang waits.
    job = create_mpijob(cluster, namespace, sim_job(name, workers=2).workers(2, cpu="64").obj())
    planted = plant_unlabelled_children(
        cluster, namespace, job, operator.gang_scheduling, {"PodGroup"}
    )
    operator.start()
    wait_until_adopted(cluster, namespace, planted, operator)
    if capacity_nudge_of(select_gang_scheduler(operator.gang_scheduling)) is not None:
        wait_for_condition(cluster, namespace, name, "GangScheduled", "False", operator=operator)
        with added_node(cluster):

            def stamped() -> bool:
                pod_group = get_pod_group(cluster, namespace, name) or {}
                annotations = (pod_group.get("metadata") or {}).get("annotations") or {}
                return CAPACITY_ANNOTATION in annotations

            wait_until(stamped, 60, message=lambda: f"the nudge:\n{operator.log_tail()}")
    suspend(cluster, namespace, name, True)
    wait_until(
        lambda: get_pod_group(cluster, namespace, name) is None,
        60,
        message=lambda: f"the suspended job's PodGroup to be deleted:\n{operator.log_tail()}",
    )


@contextlib.contextmanager
def added_node(cluster: E2ECluster) -> Iterator[str]:
    """A small fake node, removed afterwards: the other tests size their gangs for the
    cluster's own nodes."""
    name = f"rbac-verbs-{uuid.uuid4().hex[:6]}"
    try:
        yield cluster.add_node(name, cpu="1", memory="1Gi")
    finally:
        cluster.delete_node(name)
