"""The operator's informers, and the read-only view of them that sync plans read.

Every read of a reconcile goes through these caches. Only what the operator needs is cached:
children are listed and watched with the operator's label selector, so Services, ConfigMaps,
Secrets, Jobs and Pods of everything else in the cluster never reach memory, and managed fields
are dropped from every object.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from gang import (
    ClusterResource,
    GangKind,
    GangResource,
    GangScheduler,
    WithClusterInputs,
    capacity_nudge_of,
    cluster_inputs_of,
    cluster_layout_of,
    gang_resources_of,
)
from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.controller.domain_room import NodeLoad
from mpi_operator.desired.kinds import CHILD_KINDS, JOB, POD
from mpi_operator.operator.capacity import (
    WAITING,
    NodeLoadCache,
    capacity_informers,
    index_waiting,
)
from mpi_operator.operator.layout import LayoutCache, layout_informer
from mpi_operator.operator.mpijobs import MPIJOBS
from mpi_operator.runtime.client import NODES, PODS, PRIORITY_CLASSES, Client, Resource
from mpi_operator.runtime.informer import Informer
from mpi_operator.runtime.objects import Object, controller_ref, make_key, object_key
from mpi_operator.runtime.reflector import chain_transforms, strip_managed_fields
from mpi_operator.runtime.store import (
    INDEX_CONTROLLER_UID,
    index_by_controller_uid,
    index_by_namespaced_label,
)

if TYPE_CHECKING:
    from mpi_operator.api.models import MPIJob

OPERATOR_SELECTOR: Final = f"{c.LABEL_OPERATOR_NAME}={c.OPERATOR_NAME}"
INDEX_JOB_NAME: Final = "job-name"
# Gang objects by the gang inputs (``plural/name``) the strategy reads for them.
INDEX_GANG_INPUT: Final = "gang-input"
# Gang objects of gangs not placed yet, under capacity.WAITING (when the strategy nudges).
INDEX_GANG_WAITING: Final = "gang-waiting"
# MPIJobs whose TopologyFits condition is False, under capacity.WAITING.
INDEX_DOMAIN_WAITING: Final = "domain-waiting"
GLOBAL_DEFAULT_PRIORITY: Final = "globalDefault"


def pod_status_only(pod: Object) -> Object:
    """A pod as the sync reads it: metadata, status and its node. The rest of the spec is the
    bulk of a pod and is never read from the cache (the operator writes pods, it does not
    compare them)."""
    node_name = (pod.pop("spec", None) or {}).get("nodeName")
    if node_name:
        pod["spec"] = {"nodeName": node_name}
    pod["metadata"].pop("annotations", None)
    return pod


def resource_of(kind: GangKind) -> Resource:
    """Where a strategy's kind lives in the API: a gang object's namespaced, an input not."""
    return Resource(
        kind.group, kind.version, kind.plural, isinstance(kind, GangResource), kind.kind
    )


def child_resources() -> list[Resource]:
    """The kinds of a job's children (``desired.kinds``), each where it lives in the API."""
    return [Resource(k.group, k.version, k.plural, True, k.kind) for k in CHILD_KINDS]


def gang_resources(gang: GangScheduler | None) -> list[Resource]:
    """The namespaced kinds of the strategy's own gang objects (none without any)."""
    return [resource_of(r) for r in gang_resources_of(gang)]


@dataclass(frozen=True)
class Caches:
    """The informers of one operator; ``children`` maps a resource plural to its informer."""

    mpijobs: Informer
    children: dict[str, Informer]
    priority_classes: Informer | None
    # Cluster-scoped objects the gang strategy judges gangs by (Volcano's queues), by plural.
    gang_inputs: dict[str, Informer] = field(default_factory=dict)
    # Nodes and bound pods, when the strategy nudges its scheduler as capacity appears: event
    # sources only, started and stopped with the rest but not waited for (RBAC may refuse them).
    capacity: dict[str, Informer] = field(default_factory=dict)
    # When every namespace is watched: the nodes (labels, allocatable, taints) and the pods
    # bound to them, for the hostfile's topology order and each domain's room. The same
    # informers as the capacity watch's when there is one; not waited for either.
    nodes: Informer | None = None
    bound_pods: Informer | None = None
    # The nodes' loads from those two, when both are cached.
    loads: NodeLoadCache | None = None
    # The strategy's layout kinds (Volcano's HyperNodes) with the nodes' labels: optional, not
    # waited for either.
    layout: LayoutCache = field(default_factory=lambda: LayoutCache(None, {}))

    @property
    def all(self) -> list[Informer]:
        informers = [self.mpijobs, *self.children.values(), *self.gang_inputs.values()]
        return informers + ([self.priority_classes] if self.priority_classes else [])

    @property
    def started(self) -> list[Informer]:
        """What the operator starts at once: ``all`` (waited for), the capacity watch, the
        nodes and the layout."""
        return [i for i in self.owned if i is not self.on_demand]

    @property
    def on_demand(self) -> Informer | None:
        """The bound pods, when only the room count reads them: started by the first count."""
        shared = any(informer is self.bound_pods for informer in self.capacity.values())
        return None if shared else self.bound_pods

    @property
    def owned(self) -> list[Informer]:
        """What the operator stops: what it started and what may have started on demand."""
        cluster = [i for i in (self.nodes, self.bound_pods) if i is not None]
        shared = [*self.capacity.values(), *cluster]
        unique = list({id(informer): informer for informer in shared}.values())
        return [*self.all, *unique, *self.layout.informers]

    def view(self) -> CacheView:
        return CacheView(self)

    def facts(self, static: ClusterFacts) -> ClusterFacts:
        """``static`` (the flags' facts) with the PriorityClass cache's (empty when gang
        scheduling is off) and the layout, when known."""
        classes: dict[str, int] = {}
        default = 0
        if self.priority_classes is not None:
            for obj in self.priority_classes.store.list():
                name, value = obj["metadata"]["name"], int(obj.get("value") or 0)
                classes[name] = value
                if obj.get(GLOBAL_DEFAULT_PRIORITY):
                    default = value
        return dataclasses.replace(
            static,
            priority_classes=classes,
            default_priority=default,
            layout=self.layout.current(),
        )


def build_caches(
    client: Client,
    namespace: str | None,
    gang: GangScheduler | None,
    *,
    gang_kinds_served: bool = True,
    layout_served: Sequence[ClusterResource] = (),
) -> Caches:
    """Informers for one watch scope (``namespace`` None or empty: all namespaces). Without
    ``gang_kinds_served`` (a CRD of the strategy's is not installed) none of the strategy's
    kinds is cached, nor what only serves them (the capacity watch): no gang object is
    created then, and an informer of a kind not served would never sync. Of the strategy's
    layout kinds only those ``layout_served`` are cached, and only over all namespaces."""
    scope = namespace or None

    def child(resource: Resource, **extra: Any) -> Informer:
        return Informer.for_resource(
            client, resource, namespace=scope, label_selector=OPERATOR_SELECTOR, **extra
        )

    # Pods are most of what is cached: kept as the sync reads them, indexed as it finds them.
    extras: dict[str, dict[str, Any]] = {
        POD.plural: {
            "transform": chain_transforms(strip_managed_fields, pod_status_only),
            "indexers": {
                INDEX_JOB_NAME: index_by_namespaced_label(c.LABEL_JOB_NAME),
                INDEX_CONTROLLER_UID: index_by_controller_uid,
            },
        }
    }
    children = {r.plural: child(r, **extras.get(r.plural, {})) for r in child_resources()}
    priority_classes = None
    gang_inputs: dict[str, Informer] = {}
    served_gang = gang if gang_kinds_served else None
    nudger, inputs = capacity_nudge_of(served_gang), cluster_inputs_of(served_gang)
    for resource in gang_resources(served_gang):
        indexers: dict[str, Callable[[Object], list[str]]] = {}
        if inputs is not None:
            indexers[INDEX_GANG_INPUT] = _index_by_gang_input(inputs)
        if nudger is not None:
            indexers[INDEX_GANG_WAITING] = index_waiting(nudger)
        children[resource.plural] = child(resource, indexers=indexers)
    if gang is not None:
        priority_classes = Informer.for_resource(client, PRIORITY_CLASSES)
    if inputs is not None:
        for watched in inputs.watched_resources:
            gang_inputs[watched.plural] = Informer.for_resource(client, resource_of(watched))
    # Nodes are cluster-scoped: an operator watching one namespace holds Roles there only, and
    # its pods are not all that holds the nodes' resources.
    every_namespace = scope is None
    cluster = capacity_informers(client, scope) if every_namespace or nudger is not None else {}
    capacity = cluster if nudger is not None else {}
    nodes = cluster.get(NODES.plural) if every_namespace else None
    bound_pods = cluster.get(PODS.plural) if every_namespace else None
    mpijobs = Informer.for_resource(
        client, MPIJOBS, namespace=scope, indexers={INDEX_DOMAIN_WAITING: _index_domain_waiting}
    )
    layout_kinds = {
        kind.plural: layout_informer(client, resource_of(kind))
        for kind in layout_served
        if nodes is not None and cluster_layout_of(served_gang) is not None
    }
    layout = LayoutCache(nodes, layout_kinds)
    loads = None
    if nodes is not None and bound_pods is not None:
        # Every pod of the cluster on a node: watched from the start only when the nudge reads
        # it too, otherwise from the first job whose topology domain needs counting.
        loads = NodeLoadCache(nodes, bound_pods, on_demand=nudger is None)
    return Caches(
        mpijobs,
        children,
        priority_classes,
        gang_inputs,
        capacity,
        nodes,
        bound_pods,
        loads,
        layout,
    )


def asks_for_domain(job: Object) -> bool:
    """Whether a job asks for a topology domain: the knob, or Kueue's required annotation on
    its Worker template (what the room count serves)."""
    spec = _mapping(job.get("spec"))
    policy = _mapping(_mapping(spec.get("runPolicy")).get("schedulingPolicy"))
    if policy.get("topology") is not None:
        return True
    worker = _mapping(_mapping(spec.get("mpiReplicaSpecs")).get(c.WORKER))
    annotations = _mapping(
        _mapping(_mapping(worker.get("template")).get("metadata")).get("annotations")
    )
    return c.KUEUE_REQUIRED_TOPOLOGY in annotations


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _index_domain_waiting(job: Object) -> list[str]:
    conditions = (job.get("status") or {}).get("conditions") or []
    waiting = any(
        isinstance(cond, Mapping)
        and cond.get("type") == c.CONDITION_TOPOLOGY_FITS
        and cond.get("status") == "False"
        for cond in conditions
    )
    return [WAITING] if waiting else []


def domain_waiting_jobs(caches: Caches) -> list[str]:
    """The keys of the jobs waiting for a topology domain with room for them."""
    return [object_key(job) for job in caches.mpijobs.store.by_index(INDEX_DOMAIN_WAITING, WAITING)]


class CacheView:
    """What a sync plan may read: objects from the caches, never copied, never changed."""

    def __init__(self, caches: Caches) -> None:
        self._caches = caches

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        informer = self._caches.children.get(resource) or self._caches.gang_inputs.get(resource)
        if informer is None:
            return None
        return informer.store.get(make_key(namespace, name))

    def worker_pods(self, job: MPIJob) -> Sequence[dict[str, Any]]:
        pods = self._caches.children[POD.plural].store
        return [
            pod
            for pod in pods.by_index(INDEX_JOB_NAME, make_key(job.namespace, job.name))
            if (pod["metadata"].get("labels") or {}).get(c.LABEL_JOB_ROLE) == c.ROLE_WORKER
        ]

    def launcher_pods(self, launcher: dict[str, Any]) -> Sequence[dict[str, Any]]:
        uid = launcher["metadata"].get("uid")
        if not uid:
            return []
        return self._caches.children[POD.plural].store.by_index(INDEX_CONTROLLER_UID, uid)

    def node_labels(self, name: str) -> Mapping[str, str] | None:
        nodes = self._caches.nodes
        node = nodes.store.get(name) if nodes is not None else None
        return node["metadata"]["labels"] if node is not None else None

    def node_loads(self) -> Sequence[NodeLoad] | None:
        """Each node's load; None unless known (every namespace watched, both the nodes and
        the bound pods listed, neither refused)."""
        loads = self._caches.loads
        return loads.current() if loads is not None else None


def owning_mpijob_key(caches: Caches, obj: Object) -> str | None:
    """The key of the MPIJob a child belongs to: its controller, or its Job's for a pod."""
    ref = controller_ref(obj)
    if ref is None:
        return None
    namespace = obj["metadata"].get("namespace", "")
    if ref.get("kind") == c.KIND and str(ref.get("apiVersion", "")).startswith(c.GROUP):
        return make_key(namespace, ref["name"])
    if ref.get("kind") == "Job":
        job = caches.children[JOB.plural].store.get(make_key(namespace, ref["name"]))
        return owning_mpijob_key(caches, job) if job is not None else None
    return None


def enqueue_owner(caches: Caches, enqueue: Callable[[str], None]) -> Callable[[Object], None]:
    def handle(obj: Object) -> None:
        key = owning_mpijob_key(caches, obj)
        if key is not None:
            enqueue(key)

    return handle


def enqueue_gang_input_users(
    caches: Caches, gang: WithClusterInputs, plural: str, enqueue: Callable[[str], None]
) -> Callable[..., None]:
    """For a changed gang input of kind ``plural`` (a Volcano queue, say): enqueue the jobs
    whose gang objects the strategy reads it for, and no other."""
    to_owner = enqueue_owner(caches, enqueue)
    stores = [caches.children[r.plural].store for r in gang.gang_resources]

    def handle(*changed: Object) -> None:
        # An add or delete passes the object, an update (old, new): the name is the same.
        value = _gang_input_value(plural, changed[-1]["metadata"]["name"])
        for store in stores:
            for gang_object in store.by_index(INDEX_GANG_INPUT, value):
                to_owner(gang_object)

    return handle


def enqueue_gang_owners(
    caches: Caches, gang: GangScheduler | None, enqueue: Callable[[str], None]
) -> Callable[..., None]:
    """For any change (add, update, delete): enqueue every job that has a cached gang object."""
    to_owner = enqueue_owner(caches, enqueue)
    stores = [caches.children[r.plural].store for r in gang_resources_of(gang)]

    def handle(*changed: Object) -> None:
        for store in stores:
            for gang_object in store.list():
                to_owner(gang_object)

    return handle


def _gang_input_value(plural: str, name: str) -> str:
    return f"{plural}/{name}"


def _index_by_gang_input(gang: WithClusterInputs) -> Callable[[Object], list[str]]:
    def index(gang_object: Object) -> list[str]:
        return [_gang_input_value(plural, name) for plural, name in gang.inputs_of(gang_object)]

    return index


def waiting_gang_objects(caches: Caches, gang: GangScheduler) -> list[Object]:
    """The cached gang objects of gangs not placed yet."""
    return [
        gang_object
        for resource in gang_resources_of(gang)
        for gang_object in caches.children[resource.plural].store.by_index(
            INDEX_GANG_WAITING, WAITING
        )
    ]
