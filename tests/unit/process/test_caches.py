"""How cached children lead back to their MPIJob, and what a sync plan reads from the caches."""

from __future__ import annotations

import threading
from decimal import Decimal
from typing import Any

import pytest

from gang import select_gang_scheduler
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.operator.caches import (
    asks_for_domain,
    build_caches,
    domain_waiting_jobs,
    enqueue_gang_input_users,
    owning_mpijob_key,
)
from mpi_operator.operator.capacity import BOUND_PODS_SELECTOR, NodeLoadCache, slim_node, slim_pod
from mpi_operator.runtime.client import Client
from mpi_operator.runtime.kubeconfig import Configuration
from mpi_operator.testing.wrappers import MPIJobWrapper
from tests.unit.runtime.scripted_server import FakeApiServer, Reply

COSCHEDULING = "scheduler-plugins-scheduler"


def offline_client() -> Client:
    return Client(Configuration(host="https://127.0.0.1:1"))


def owned(kind: str, name: str, owner_kind: str, owner: str, **extra: Any) -> dict[str, Any]:
    api_version = "kubeflow.org/v2beta1" if owner_kind == "MPIJob" else "batch/v1"
    meta = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "resourceVersion": "1",
        "ownerReferences": [
            {"apiVersion": api_version, "kind": owner_kind, "name": owner, "controller": True}
        ],
        **extra,
    }
    return {"kind": kind, "metadata": meta}


def test_children_lead_to_their_mpijob_and_launcher_pods_through_their_job() -> None:
    caches = build_caches(offline_client(), None, None)
    caches.children["jobs"].store.upsert(owned("Job", "pi-launcher", "MPIJob", "pi"))
    assert owning_mpijob_key(caches, owned("Pod", "pi-worker-0", "MPIJob", "pi")) == "ns/pi"
    assert owning_mpijob_key(caches, owned("Pod", "pi-launcher-x", "Job", "pi-launcher")) == (
        "ns/pi"
    )
    assert owning_mpijob_key(caches, owned("Pod", "other", "Job", "unknown")) is None
    unowned = {"kind": "Pod", "metadata": {"name": "x", "namespace": "ns"}}
    assert owning_mpijob_key(caches, unowned) is None


def test_the_view_finds_a_jobs_workers_and_its_launchers_pods() -> None:
    caches = build_caches(offline_client(), None, None)
    pods = caches.children["pods"].store
    job = MPIJobWrapper("pi").workers(2).job()
    for index in range(2):
        worker = owned("Pod", f"pi-worker-{index}", "MPIJob", "pi")
        worker["metadata"]["labels"] = {
            "training.kubeflow.org/job-name": "pi",
            "training.kubeflow.org/job-role": "worker",
        }
        pods.upsert(worker)
    launcher_pod = owned("Pod", "pi-launcher-abc", "Job", "pi-launcher")
    launcher_pod["metadata"]["ownerReferences"][0]["uid"] = "uid-launcher"
    launcher_pod["metadata"]["labels"] = {
        "training.kubeflow.org/job-name": "pi",
        "training.kubeflow.org/job-role": "launcher",
    }
    pods.upsert(launcher_pod)
    view = caches.view()
    assert sorted(p["metadata"]["name"] for p in view.worker_pods(job)) == [
        "pi-worker-0",
        "pi-worker-1",
    ]
    launcher = {"metadata": {"name": "pi-launcher", "uid": "uid-launcher"}}
    assert [p["metadata"]["name"] for p in view.launcher_pods(launcher)] == ["pi-launcher-abc"]
    assert view.get("services", "ns", "pi") is None
    assert view.get("unknown", "ns", "pi") is None


def test_pod_groups_and_priority_classes_are_cached_only_with_gang_scheduling() -> None:
    plain = build_caches(offline_client(), "ns", None)
    assert "podgroups" not in plain.children and plain.priority_classes is None
    volcano = build_caches(offline_client(), "ns", select_gang_scheduler("volcano"))
    assert "podgroups" in volcano.children and volcano.priority_classes is not None


def test_without_its_kinds_served_the_gang_is_not_cached_and_the_rest_is() -> None:
    nudging = select_gang_scheduler("sp-scheduler")
    caches = build_caches(offline_client(), "ns", nudging, gang_kinds_served=False)
    assert "podgroups" not in caches.children and caches.capacity == {}
    assert {"pods", "jobs", "configmaps"} <= set(caches.children)
    volcano = build_caches(
        offline_client(), "ns", select_gang_scheduler("volcano"), gang_kinds_served=False
    )
    assert "podgroups" not in volcano.children and volcano.gang_inputs == {}


def test_cluster_facts_come_from_the_priority_class_cache() -> None:
    caches = build_caches(offline_client(), None, select_gang_scheduler("volcano"))
    assert caches.priority_classes is not None
    store = caches.priority_classes.store
    store.upsert({"metadata": {"name": "high", "resourceVersion": "1"}, "value": 1000})
    store.upsert(
        {"metadata": {"name": "std", "resourceVersion": "1"}, "value": 10, "globalDefault": True}
    )
    facts = caches.facts(ClusterFacts(cluster_domain="example.org"))
    assert facts.cluster_domain == "example.org"
    assert dict(facts.priority_classes) == {"high": 1000, "std": 10}
    assert facts.default_priority == 10


def test_cached_pods_keep_metadata_status_and_node_but_not_the_rest_of_the_spec() -> None:
    from mpi_operator.operator.caches import pod_status_only

    pod = owned("Pod", "pi-worker-0", "MPIJob", "pi", annotations={"big": "x" * 1000})
    pod["spec"] = {"containers": [{"name": "main", "env": [{"name": "A", "value": "1"}]}]}
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    cached = pod_status_only(pod)
    assert "spec" not in cached and "annotations" not in cached["metadata"]
    assert cached["status"]["phase"] == "Running"
    assert cached["metadata"]["ownerReferences"][0]["name"] == "pi"
    placed = owned("Pod", "pi-worker-1", "MPIJob", "pi")
    placed["spec"] = {"nodeName": "node-a1", "containers": [{"name": "main"}]}
    assert pod_status_only(placed)["spec"] == {"nodeName": "node-a1"}


def test_node_labels_are_cached_only_when_every_namespace_is_watched() -> None:
    assert build_caches(offline_client(), "ns", None).nodes is None
    caches = build_caches(offline_client(), None, None)
    assert caches.nodes is not None and caches.nodes in caches.started
    assert caches.view().node_labels("node-a1") is None
    caches.nodes.store.upsert(
        slim_node(
            {
                "metadata": {"name": "node-a1", "labels": {"rack": "a"}, "resourceVersion": "1"},
                "status": {"allocatable": {"cpu": "8"}},
            }
        )
    )
    assert caches.view().node_labels("node-a1") == {"rack": "a"}


def test_one_copy_of_the_nodes_and_bound_pods_serves_the_room_and_the_nudge() -> None:
    caches = build_caches(offline_client(), None, select_gang_scheduler(COSCHEDULING))
    assert caches.nodes is caches.capacity["nodes"]
    assert caches.bound_pods is caches.capacity["pods"]
    assert len(caches.started) == len({id(informer) for informer in caches.started})
    namespaced = build_caches(offline_client(), "ns", select_gang_scheduler(COSCHEDULING))
    assert namespaced.capacity and namespaced.bound_pods is None
    assert namespaced.view().node_loads() is None


def test_node_loads_are_known_once_listed_and_hold_the_bound_pods() -> None:
    caches = build_caches(offline_client(), None, None)
    nodes, pods = caches.nodes, caches.bound_pods
    assert nodes is not None and pods is not None and not caches.capacity
    # Not on demand: nothing starts the informers, whose stores the test fills.
    assert NodeLoadCache(nodes, pods).current() is None
    nodes.store.replace([slim_node(labelled_node("n1", "a"))], "1")
    assert NodeLoadCache(nodes, pods).current() is None
    bound = {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "1"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}],
        },
    }
    pods.store.replace([slim_pod(bound)], "1")
    # A handler added now is told of every cached pod, as the informer's first list would.
    loads = NodeLoadCache(nodes, pods).current()
    assert loads is not None
    assert [(load.node["metadata"]["name"], load.used) for load in loads] == [
        ("n1", {"cpu": Decimal(2), "pods": Decimal(1)})
    ]


def test_jobs_waiting_for_a_domain_are_found_by_their_condition() -> None:
    caches = build_caches(offline_client(), None, None)
    waiting = MPIJobWrapper("waits").obj()
    waiting["status"] = {"conditions": [{"type": "TopologyFits", "status": "False"}]}
    fits = MPIJobWrapper("fits").obj()
    fits["status"] = {"conditions": [{"type": "TopologyFits", "status": "True"}]}
    for job in (waiting, fits):
        job["metadata"]["resourceVersion"] = "1"
        caches.mpijobs.store.upsert(job)
    assert domain_waiting_jobs(caches) == ["ns/waits"]


def test_volcano_queues_are_cached_and_read_through_the_view() -> None:
    caches = build_caches(offline_client(), "ns", select_gang_scheduler("volcano"))
    assert list(caches.gang_inputs) == ["queues"]
    caches.gang_inputs["queues"].store.upsert(
        {"metadata": {"name": "default", "resourceVersion": "1"}, "status": {"state": "Open"}}
    )
    assert caches.view().get("queues", "", "default") is not None
    coscheduling = build_caches(offline_client(), "ns", select_gang_scheduler("sp-scheduler"))
    assert coscheduling.gang_inputs == {}


def pod_group_of(job: str, queue: str | None) -> dict[str, Any]:
    pod_group = owned("PodGroup", job, "MPIJob", job)
    pod_group["spec"] = {"minMember": 2, **({"queue": queue} if queue is not None else {})}
    return pod_group


def test_a_changed_volcano_queue_enqueues_only_the_jobs_whose_pod_groups_wait_in_it() -> None:
    gang = select_gang_scheduler("volcano")
    assert gang is not None
    caches = build_caches(offline_client(), None, gang)
    pod_groups = caches.children["podgroups"].store
    for job, queue in [("a", "research"), ("b", None), ("c", "default"), ("d", "other")]:
        pod_groups.upsert(pod_group_of(job, queue))
    enqueued: list[str] = []
    changed = enqueue_gang_input_users(caches, gang, "queues", enqueued.append)

    research = {"metadata": {"name": "research", "resourceVersion": "2"}}
    changed(research)
    assert enqueued == ["ns/a"]
    enqueued.clear()
    default = {"metadata": {"name": "default", "resourceVersion": "2"}}
    changed(default, default)  # an update passes (old, new)
    assert sorted(enqueued) == ["ns/b", "ns/c"]
    enqueued.clear()
    changed({"metadata": {"name": "unused", "resourceVersion": "2"}})
    assert enqueued == []

    # A PodGroup moved to another queue is filed under that queue from then on.
    pod_groups.upsert(pod_group_of("a", "other"))
    changed(research)
    assert enqueued == []


def hyper_node(name: str, rack: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {
            "tier": 1,
            "members": [
                {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": rack}}}}
            ],
        },
    }


def labelled_node(name: str, rack: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"rack": rack}, "resourceVersion": "1"}}


def test_the_layout_is_unknown_until_hyper_nodes_and_nodes_are_listed_then_read_from_them() -> None:
    from gang.volcano import HYPER_NODE_RESOURCE

    volcano = select_gang_scheduler("volcano")
    caches = build_caches(offline_client(), None, volcano, layout_served=(HYPER_NODE_RESOURCE,))
    assert caches.nodes is not None
    (hyper_nodes,) = caches.layout.informers
    assert hyper_nodes in caches.started and hyper_nodes not in caches.all
    assert caches.facts(ClusterFacts()).layout is None
    caches.nodes.store.replace([labelled_node("n1", "a")], "1")
    assert caches.facts(ClusterFacts()).layout is None
    hyper_nodes.store.replace([hyper_node("rack-a", "a")], "1")
    layout = caches.facts(ClusterFacts()).layout
    assert layout is not None
    assert layout.node_labels == {"n1": {"rack": "a"}}
    assert [hn["metadata"]["name"] for hn in layout.objects["hypernodes"]] == ["rack-a"]
    # The same object until a change that matters: comparing facts costs nothing.
    assert caches.facts(ClusterFacts()).layout is layout
    heartbeat = {**labelled_node("n1", "a"), "status": {"phase": "Ready"}}
    caches.nodes._fan_out.on_update(labelled_node("n1", "a"), heartbeat)
    assert caches.facts(ClusterFacts()).layout is layout
    caches.nodes.store.upsert(labelled_node("n1", "b"))
    caches.nodes._fan_out.on_update(labelled_node("n1", "a"), labelled_node("n1", "b"))
    relabelled = caches.facts(ClusterFacts()).layout
    assert relabelled is not None and relabelled.node_labels == {"n1": {"rack": "b"}}
    hyper_nodes.stop()
    assert caches.facts(ClusterFacts()).layout is None


def test_hyper_nodes_are_not_cached_when_not_served_or_for_one_namespace() -> None:
    from gang.volcano import HYPER_NODE_RESOURCE

    volcano = select_gang_scheduler("volcano")
    assert build_caches(offline_client(), None, volcano).layout.informers == []
    namespaced = build_caches(offline_client(), "ns", volcano, layout_served=(HYPER_NODE_RESOURCE,))
    assert namespaced.layout.informers == []
    assert namespaced.facts(ClusterFacts()).layout is None


def test_without_a_nudge_the_bound_pods_are_watched_from_the_first_count_of_a_domain(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    bound = {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "1"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}],
        },
    }
    server.replies.append(Reply(body={"items": [bound], "metadata": {"resourceVersion": "1"}}))
    caches = build_caches(client, None, None)
    pods = caches.bound_pods
    assert caches.nodes is not None and pods is not None and caches.loads is not None
    assert caches.on_demand is pods and pods not in caches.started and pods in caches.owned
    listed = threading.Event()
    caches.loads.on_listed(listed.set)
    caches.nodes.store.replace([slim_node(labelled_node("n1", "a"))], "1")
    try:
        assert server.seen == []
        # The first count starts the watch (and answers only if the list came back that fast);
        # the listing says when to count again.
        caches.view().node_loads()
        assert listed.wait(10)
        loads = caches.view().node_loads()
        assert loads is not None
        assert [(load.node["metadata"]["name"], load.used) for load in loads] == [
            ("n1", {"cpu": Decimal(3), "pods": Decimal(1)})
        ]
        [first, *_] = server.seen
        assert first.path == "/api/v1/pods"
        assert ("fieldSelector", BOUND_PODS_SELECTOR) in first.query
    finally:
        for informer in caches.owned:
            informer.stop()


def test_with_a_nudge_the_bound_pods_are_watched_from_the_start() -> None:
    caches = build_caches(offline_client(), None, select_gang_scheduler(COSCHEDULING))
    assert caches.on_demand is None and caches.bound_pods in caches.started


@pytest.mark.parametrize(
    ("job", "asks"),
    [
        (MPIJobWrapper("plain").obj(), False),
        (MPIJobWrapper("knob").scheduling_policy(topology={"key": "rack"}).obj(), True),
        (
            MPIJobWrapper("kueue")
            .template_annotation("Worker", "kueue.x-k8s.io/podset-required-topology", "rack")
            .obj(),
            True,
        ),
        (
            MPIJobWrapper("kueue-preferred")
            .template_annotation("Worker", "kueue.x-k8s.io/podset-preferred-topology", "rack")
            .obj(),
            False,
        ),
        ({"spec": {"runPolicy": "junk", "mpiReplicaSpecs": {"Worker": []}}}, False),
    ],
)
def test_jobs_asking_for_a_domain_are_told_apart_from_their_stored_form(
    job: dict[str, Any], asks: bool
) -> None:
    assert asks_for_domain(job) is asks
