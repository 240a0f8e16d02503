"""The deploy manifests: least-privilege RBAC, a hardened pod, probes that match the operator's
ports and flags, and a single-file install that is not stale."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from gang import (
    GangScheduler,
    capacity_nudge_of,
    cluster_inputs_of,
    cluster_layout_of,
    every_strategy,
    gang_resources_of,
    select_gang_scheduler,
)
from mpi_operator import __version__
from mpi_operator.api import constants as c
from mpi_operator.controller.plan import Action
from mpi_operator.desired.kinds import CHILD_KINDS, CHILD_KINDS_BY_PLURAL, ROLE
from mpi_operator.operator.caches import child_resources
from mpi_operator.operator.leading import resources_for
from mpi_operator.operator.mpijobs import MPIJOBS
from mpi_operator.operator.options import Options, add_operator_flags, options_from
from mpi_operator.runtime.client import Resource
from tests.tools import (
    gang_component_flag,
    gang_component_for,
    gang_component_rules,
    gang_components,
    gang_scheduling_values,
)
from tests.tools import rule_permissions as flatten
from tests.unit.plan_writes import PlannedSync, plans_of_the_plan_tests

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "base"
# The Deployment's variable naming the launchers' kubectl-delivery image.
DELIVERY_ENV = "KUBECTL_DELIVERY_IMAGE"
STANDALONE = ROOT / "deploy" / "overlays" / "standalone"
NAMESPACED = ROOT / "deploy" / "overlays" / "namespaced"
LEADER_ELECTION = "mpi-operator-leader-election"
RENDERED = ROOT / "deploy" / "mpi-operator.yaml"
CRD = ROOT / "crds" / "kubeflow.org_mpijobs.yaml"

Doc = dict[str, Any]

# (API group, resource or resource/subresource, verb), as RBAC grants it.
Permission = tuple[str, str, str]
# Leader election: one Lease in --lock-namespace, granted there only (a Role).
LEASE_PERMISSIONS = {
    ("coordination.k8s.io", "leases", verb) for verb in ("get", "create", "update")
}
# What each gang strategy declares it needs, derived from the strategies themselves (so a new
# one is covered without an edit here): its own objects are cached, created, read after
# AlreadyExists, updated and deleted, and patched when it takes a capacity nudge, which also
# watches nodes; the cluster objects its verdict or its objects read are watched; and
# PriorityClasses are watched whenever a gang scheduler is configured (the operator's caches,
# for minResources).
GANG_OBJECT_VERBS = {"get", "list", "watch", "create", "update", "delete"}
WATCH = {"list", "watch"}
PRIORITY_CLASSES = {("scheduling.k8s.io", "priorityclasses", verb) for verb in WATCH}


def gang_permissions(strategy: GangScheduler | None) -> set[Permission]:
    """What the operator needs for ``strategy`` beyond the base's rules; nothing without one."""
    if strategy is None:
        return set()
    needed = set(PRIORITY_CLASSES)
    nudges = capacity_nudge_of(strategy) is not None
    verbs = GANG_OBJECT_VERBS | ({"patch"} if nudges else set())
    for resource in gang_resources_of(strategy):
        needed |= {(resource.group, resource.plural, verb) for verb in verbs}
    inputs = cluster_inputs_of(strategy)
    for watched in inputs.watched_resources if inputs is not None else ():
        needed |= {(watched.group, watched.plural, verb) for verb in WATCH}
    layout = cluster_layout_of(strategy)
    for kind in layout.layout_resources if layout is not None else ():
        needed |= {(kind.group, kind.plural, verb) for verb in WATCH}
    if nudges:
        needed |= {("", "nodes", verb) for verb in WATCH}
    return needed


def every_gang_permission() -> set[Permission]:
    return set().union(*(gang_permissions(strategy) for strategy in every_strategy()))


# The event recorder creates an event, then patches its count when it happens again.
EVENT_PERMISSIONS = {("", "events", verb) for verb in ("create", "patch")}


def write_permissions(action: Action, resources: Mapping[str, Resource]) -> set[Permission]:
    """What the API server checks for one write of a sync plan, the writer's own follow-ups
    included, in the API group the writer sends it to (``resources``, by plural)."""
    plural = action.resource.partition("/")[0]
    group = resources[plural].group
    verb = "update" if action.verb == "update_status" else action.verb
    needed: set[Permission] = {(group, action.resource, verb)}
    body = action.body or {}
    if action.verb == "create":
        # A create that meets AlreadyExists reads the object live and adopts one of ours that
        # lacks the operator's label with an update.
        needed |= {(group, plural, "get"), (group, plural, "update")}
        references = (body.get("metadata") or {}).get("ownerReferences") or []
        if any(reference.get("blockOwnerDeletion") for reference in references):
            # Only who may update the owner's finalizers may block its deletion.
            needed.add((c.GROUP, f"{c.PLURAL}/finalizers", "update"))
    if plural == ROLE.plural and action.verb in ("create", "update"):
        # RBAC lets no one grant what they do not hold.
        needed |= flatten(body["rules"])
    return needed


def plan_permissions(planned: Iterable[PlannedSync], gang: GangScheduler | None) -> set[Permission]:
    """What the writes and events of ``planned`` need, for the kinds the operator writes with
    ``gang``: the children, the MPIJobs and that strategy's gang objects."""
    resources = resources_for(gang)
    needed: set[Permission] = set()
    for sync in planned:
        for action in sync.plan.actions:
            if action.resource.partition("/")[0] in resources:
                needed |= write_permissions(action, resources)
        if sync.plan.events:
            needed |= EVENT_PERMISSIONS
    return needed


def core_permissions() -> set[Permission]:
    """What the operator needs without gang scheduling, the Lease aside: what the plan tests'
    syncs write (their gang objects aside) and record, and a watch of every cached kind (the
    MPIJobs' list also tells the operator the CRD is installed)."""
    watched = {(r.group, r.plural, verb) for r in (*child_resources(), MPIJOBS) for verb in WATCH}
    # The nodes' labels, for the hostfile's topology order.
    nodes = {("", "nodes", verb) for verb in WATCH}
    return plan_permissions(plans_of_the_plan_tests(), None) | watched | nodes


def base_cluster_role_permissions() -> set[Permission]:
    return flatten(load(BASE / "cluster-role.yaml")[0]["rules"])


UPSTREAM_LABELS = {
    "app": "mpi-operator",
    "app.kubernetes.io/component": "mpijob",
    "app.kubernetes.io/name": "mpi-operator",
    "kustomize.component": "mpi-operator",
}


def load(path: Path) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def by_kind_and_name(docs: list[Doc]) -> dict[tuple[str, str], Doc]:
    found: dict[tuple[str, str], Doc] = {}
    for doc in docs:
        key = (doc["kind"], doc["metadata"]["name"])
        assert key not in found, f"{key} defined twice"
        found[key] = doc
    return found


def base_objects() -> dict[tuple[str, str], Doc]:
    kustomization = load(BASE / "kustomization.yaml")[0]
    docs: list[Doc] = []
    for entry in kustomization["resources"]:
        path = (BASE / entry).resolve()
        if path.is_dir():
            nested = load(path / "kustomization.yaml")[0]
            for name in nested["resources"]:
                docs.extend(load(path / name))
        else:
            docs.extend(load(path))
    return by_kind_and_name(docs)


@pytest.fixture(scope="module")
def objects() -> dict[tuple[str, str], Doc]:
    return base_objects()


@pytest.fixture(scope="module")
def operator_role(objects: dict[tuple[str, str], Doc]) -> Doc:
    return objects[("ClusterRole", "mpi-operator")]


@pytest.fixture(scope="module")
def deployment(objects: dict[tuple[str, str], Doc]) -> Doc:
    return objects[("Deployment", "mpi-operator")]


@pytest.fixture(scope="module")
def container(deployment: Doc) -> Doc:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["mpi-operator"]
    result: Doc = containers[0]
    return result


# -- RBAC -------------------------------------------------------------------------------------


def test_base_has_upstreams_objects_and_no_namespace(objects: dict[tuple[str, str], Doc]) -> None:
    assert set(objects) == {
        ("CustomResourceDefinition", "mpijobs.kubeflow.org"),
        ("ServiceAccount", "mpi-operator"),
        ("ClusterRole", "mpi-operator"),
        ("ClusterRoleBinding", "mpi-operator"),
        ("Role", LEADER_ELECTION),
        ("RoleBinding", LEADER_ELECTION),
        ("ClusterRole", "kubeflow-mpijobs-admin"),
        ("ClusterRole", "kubeflow-mpijobs-edit"),
        ("ClusterRole", "kubeflow-mpijobs-view"),
        ("Deployment", "mpi-operator"),
    }
    assert not [key for key, doc in objects.items() if "namespace" in doc["metadata"]]


def test_the_plan_tests_write_each_child_kind_with_each_verb_it_lists() -> None:
    # What the RBAC tests below judge the install by covers every write of desired.kinds.
    written = {
        (action.resource.partition("/")[0], action.verb)
        for sync in plans_of_the_plan_tests()
        for action in sync.plan.actions
        if action.resource.partition("/")[0] in CHILD_KINDS_BY_PLURAL
    }
    assert written == {(kind.plural, verb) for kind in CHILD_KINDS for verb in kind.writes}


def test_cluster_role_grants_exactly_what_the_plans_and_caches_need(operator_role: Doc) -> None:
    granted = flatten(operator_role["rules"])
    expected = core_permissions()
    assert granted == expected, (
        f"granted but not needed: {sorted(granted - expected)}; "
        f"needed but not granted: {sorted(expected - granted)}"
    )


def test_the_lease_is_granted_by_a_role_of_its_own(objects: dict[tuple[str, str], Doc]) -> None:
    # A Role, placed by the overlay's namespace in the install namespace, which the Deployment
    # makes the lock namespace: no Lease right anywhere else.
    role = objects[("Role", LEADER_ELECTION)]
    assert flatten(role["rules"]) == LEASE_PERMISSIONS
    binding = objects[("RoleBinding", LEADER_ELECTION)]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": LEADER_ELECTION,
    }
    assert [(s["kind"], s["name"]) for s in binding["subjects"]] == [
        ("ServiceAccount", "mpi-operator")
    ]
    cluster_wide = flatten(objects[("ClusterRole", "mpi-operator")]["rules"])
    assert not [grant for grant in cluster_wide if grant[1] == "leases"]


def test_each_gang_component_grants_exactly_its_schedulers_needs() -> None:
    covered = set()
    for component in gang_components():
        strategy = select_gang_scheduler(gang_component_flag(component))
        assert strategy is not None, component
        granted = flatten(gang_component_rules(component))
        expected = gang_permissions(strategy)
        assert granted == expected, (
            f"{component.name}: granted but not needed: {sorted(granted - expected)}; "
            f"needed but not granted: {sorted(expected - granted)}"
        )
        covered.add(type(strategy))
        kustomization = load(component / "kustomization.yaml")[0]
        assert kustomization["kind"] == "Component"
        assert {(p["target"]["kind"], p["target"]["name"]) for p in kustomization["patches"]} == {
            ("ClusterRole", "mpi-operator"),
            ("Deployment", "mpi-operator"),
        }
    # Every strategy --gang-scheduling can select has its component.
    assert covered == {type(strategy) for strategy in every_strategy()}
    assert gang_component_for("scheduler-plugins-scheduler") == gang_component_for("other-name")


def test_cluster_role_has_no_wildcards_or_name_limits(operator_role: Doc) -> None:
    rules = [
        *operator_role["rules"],
        *(rule for component in gang_components() for rule in gang_component_rules(component)),
    ]
    for rule in rules:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], rule
            assert len(set(rule[field])) == len(rule[field]), f"duplicate in {rule}"


@pytest.mark.parametrize("gang_scheduling", gang_scheduling_values())
def test_every_write_of_a_sync_plan_is_granted(gang_scheduling: str) -> None:
    # The plan tests' syncs with this scheduler (or none), their gang objects' writes included,
    # against what the install grants with it: the base and the scheduler's component.
    strategy = select_gang_scheduler(gang_scheduling)
    planned = [s for s in plans_of_the_plan_tests() if type(s.gang) is type(strategy)]
    assert planned, f"no plan test syncs with --gang-scheduling={gang_scheduling}"
    component = gang_component_for(gang_scheduling)
    granted = base_cluster_role_permissions()
    if component is not None:
        granted |= flatten(gang_component_rules(component))
    needed = plan_permissions(planned, strategy)
    assert needed <= granted, f"not granted: {sorted(needed - granted)}"
    gang_writes = {
        (action.resource, action.verb)
        for sync in planned
        for action in sync.plan.actions
        if action.resource in {r.plural for r in gang_resources_of(strategy)}
    }
    assert bool(gang_writes) is bool(gang_resources_of(strategy)), gang_writes


def test_binding_ties_the_role_to_the_service_account(objects: dict[tuple[str, str], Doc]) -> None:
    binding = objects[("ClusterRoleBinding", "mpi-operator")]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "mpi-operator",
    }
    assert [(s["kind"], s["name"]) for s in binding["subjects"]] == [
        ("ServiceAccount", "mpi-operator")
    ]


def test_user_roles_aggregate_as_upstreams(objects: dict[tuple[str, str], Doc]) -> None:
    prefix = "rbac.authorization.kubeflow.org/"
    admin = objects[("ClusterRole", "kubeflow-mpijobs-admin")]
    edit = objects[("ClusterRole", "kubeflow-mpijobs-edit")]
    view = objects[("ClusterRole", "kubeflow-mpijobs-view")]
    assert admin["metadata"]["labels"] == {f"{prefix}aggregate-to-kubeflow-admin": "true"}
    assert admin["aggregationRule"]["clusterRoleSelectors"] == [
        {"matchLabels": {f"{prefix}aggregate-to-kubeflow-mpijobs-admin": "true"}}
    ]
    # Left to the aggregation controller: server-side apply would conflict with it otherwise.
    assert "rules" not in admin
    assert edit["metadata"]["labels"] == {
        f"{prefix}aggregate-to-kubeflow-edit": "true",
        f"{prefix}aggregate-to-kubeflow-mpijobs-admin": "true",
    }
    resources = ("mpijobs", "mpijobs/status")
    edit_verbs = ("get", "list", "watch", "create", "delete", "deletecollection", "patch", "update")
    assert flatten(edit["rules"]) == {("kubeflow.org", r, v) for r in resources for v in edit_verbs}
    assert view["metadata"]["labels"] == {f"{prefix}aggregate-to-kubeflow-view": "true"}
    assert flatten(view["rules"]) == {
        ("kubeflow.org", r, v) for r in resources for v in ("get", "list", "watch")
    }


# -- the Deployment ---------------------------------------------------------------------------


def test_pod_is_hardened(deployment: Doc, container: Doc) -> None:
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "mpi-operator"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod.get("hostNetwork") is not True and pod.get("hostPID") is not True
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["runAsNonRoot"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security.get("privileged") is not True
    # The only writable mount is an emptyDir.
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    for mount in container.get("volumeMounts") or []:
        assert "emptyDir" in volumes[mount["name"]], mount


def test_pod_runs_as_the_images_user(deployment: Doc) -> None:
    users = re.findall(r"^USER\s+(\d+):(\d+)\s*$", (ROOT / "Dockerfile").read_text(), re.M)
    assert users == [("65532", "65532")]
    context = deployment["spec"]["template"]["spec"]["securityContext"]
    assert (str(context["runAsUser"]), str(context["runAsGroup"])) == users[0]


def test_resources_are_requested(container: Doc) -> None:
    requests = container["resources"]["requests"]
    assert set(requests) >= {"cpu", "memory"}
    assert "memory" in container["resources"]["limits"]


def test_probes_hit_the_operators_health_server(container: Doc) -> None:
    options = parsed_options(container)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    probes = {kind: container[kind]["httpGet"] for kind in ("livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"]["path"] == "/healthz"
    assert probes["readinessProbe"]["path"] == "/readyz"
    for probe in probes.values():
        port = probe["port"]
        assert ports.get(port, port) == options.health_port == 8080
    assert ports["metrics"] == options.monitoring_port
    assert options.monitoring_port not in (0, options.health_port)


def test_args_are_the_operators_flags(container: Doc, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBEFLOW_NAMESPACE", raising=False)
    options = parsed_options(container)
    # Kubernetes expands $(VAR) from the container's env: the Lease lives where the pod runs.
    assert options.lock_namespace == "$(POD_NAMESPACE)"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["POD_SERVICE_ACCOUNT"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "spec.serviceAccountName"}
    }
    assert options.leader_elect is True
    assert options.namespace == ""  # every namespace, as upstream's install


def parsed_options(container: Doc) -> Options:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_operator_flags(parser)
    return options_from(parser.parse_args(container.get("args") or []))


def test_labels_and_selector_match_upstream(deployment: Doc) -> None:
    # Deployment selectors are immutable: replacing an upstream install in place needs the
    # same labels.
    kustomization = load(BASE / "kustomization.yaml")[0]
    assert kustomization["labels"] == [{"includeSelectors": True, "pairs": UPSTREAM_LABELS}]
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["sidecar.istio.io/inject"] == "false"


# -- overlays and the rendered install --------------------------------------------------------


def test_standalone_overlay(container: Doc) -> None:
    kustomization = load(STANDALONE / "kustomization.yaml")[0]
    assert kustomization["namespace"] == "mpi-operator"
    assert kustomization["resources"] == ["../../base", "namespace.yaml"]
    # The base names the image of this version; an overlay pins no other tag.
    assert "images" not in kustomization
    namespace = load(STANDALONE / "namespace.yaml")[0]
    assert (namespace["kind"], namespace["metadata"]["name"]) == ("Namespace", "mpi-operator")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_rendered_install_matches_its_sources(objects: dict[tuple[str, str], Doc]) -> None:
    assert RENDERED.read_text().startswith("# Generated by hack/render-deploy.sh"), RENDERED
    rendered = by_kind_and_name(load(RENDERED))
    stale = "deploy/mpi-operator.yaml is stale: run hack/render-deploy.sh"
    assert set(rendered) == {*objects, ("Namespace", "mpi-operator")}, stale
    for key, doc in rendered.items():
        if key[0] in ("Namespace", "ServiceAccount", "Deployment"):
            assert doc["metadata"].get("namespace", doc["metadata"]["name"]) == "mpi-operator"
        if key[0] != "Namespace":
            assert doc["metadata"]["labels"].items() >= UPSTREAM_LABELS.items(), key
    crd = load(CRD)[0]
    assert rendered[("CustomResourceDefinition", "mpijobs.kubeflow.org")]["spec"] == crd["spec"], (
        stale
    )
    for key in objects:
        if key[0] in ("ClusterRole", "Role"):
            assert rendered[key].get("rules") == objects[key].get("rules"), stale
    pod = rendered[("Deployment", "mpi-operator")]["spec"]["template"]["spec"]
    source_pod = objects[("Deployment", "mpi-operator")]["spec"]["template"]["spec"]
    container = dict(pod["containers"][0])
    assert container.pop("image") == f"mpi-operator:{__version__}"
    source_container = dict(source_pod["containers"][0])
    source_container.pop("image")
    # kustomize rewrites the kubectl-delivery image with the operator's.
    assert container["env"][0] == {"name": DELIVERY_ENV, "value": f"mpi-operator:{__version__}"}
    assert source_container["env"][0] == {"name": DELIVERY_ENV, "value": "mpi-operator"}
    container["env"] = container["env"][1:]
    source_container["env"] = source_container["env"][1:]
    assert container == source_container, stale
    assert {k: v for k, v in pod.items() if k != "containers"} == {
        k: v for k, v in source_pod.items() if k != "containers"
    }, stale
    subjects = rendered[("ClusterRoleBinding", "mpi-operator")]["subjects"]
    assert [s["namespace"] for s in subjects] == ["mpi-operator"]
    # The Lease's Role lives where the Deployment puts the Lease: its own namespace.
    for kind in ("Role", "RoleBinding"):
        assert rendered[(kind, LEADER_ELECTION)]["metadata"]["namespace"] == "mpi-operator"
    subjects = rendered[("RoleBinding", LEADER_ELECTION)]["subjects"]
    assert [s["namespace"] for s in subjects] == ["mpi-operator"]


def kubectl() -> str | None:
    """The pinned kubectl of the local cluster when built, else any on PATH (as
    hack/render-deploy.sh chooses)."""
    printed = subprocess.run(
        ["bash", str(ROOT / "hack" / "cluster" / "build.sh"), "--print"],
        capture_output=True,
        text=True,
        check=False,
    )
    pinned = Path(printed.stdout.strip()) / "kubectl"
    if printed.returncode == 0 and pinned.is_file():
        return str(pinned)
    return shutil.which("kubectl")


def kustomize(overlay: Path) -> dict[tuple[str, str], Doc]:
    """The overlay as ``kubectl kustomize`` builds it; skips without a kubectl."""
    binary = kubectl()
    if binary is None:
        pytest.skip("no kubectl (make cluster-build, or one on PATH) to run kustomize with")
    built = subprocess.run(
        [binary, "kustomize", str(overlay)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return by_kind_and_name([d for d in yaml.safe_load_all(built.stdout) if d is not None])


def test_rendered_install_is_what_kustomize_builds() -> None:
    fresh = kustomize(STANDALONE)
    assert by_kind_and_name(load(RENDERED)) == fresh, (
        "deploy/mpi-operator.yaml is stale: run hack/render-deploy.sh"
    )


# -- the Kubeflow overlay ---------------------------------------------------------------------

KUBEFLOW = ROOT / "deploy" / "overlays" / "kubeflow"
KUBEFLOW_AGGREGATES = {
    "kubeflow-mpijobs-admin": "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-admin",
    "kubeflow-mpijobs-edit": "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-edit",
    "kubeflow-mpijobs-view": "rbac.authorization.kubeflow.org/aggregate-to-kubeflow-view",
}


def test_kubeflow_overlay_installs_into_kubeflows_namespace(
    objects: dict[tuple[str, str], Doc],
) -> None:
    rendered = kustomize(KUBEFLOW)
    # Kubeflow creates and owns its namespace; the overlay adds no Namespace object.
    assert set(rendered) == set(objects)
    for (kind, name), doc in rendered.items():
        if kind in ("ServiceAccount", "Deployment", "Role", "RoleBinding"):
            assert doc["metadata"]["namespace"] == "kubeflow", (kind, name)
    subjects = rendered[("ClusterRoleBinding", "mpi-operator")]["subjects"]
    assert subjects == [{"kind": "ServiceAccount", "name": "mpi-operator", "namespace": "kubeflow"}]
    for name, label in KUBEFLOW_AGGREGATES.items():
        assert rendered[("ClusterRole", name)]["metadata"]["labels"][label] == "true", name
    assert flatten(rendered[("ClusterRole", "kubeflow-mpijobs-view")]["rules"]) == {
        ("kubeflow.org", resource, verb)
        for resource in ("mpijobs", "mpijobs/status")
        for verb in ("get", "list", "watch")
    }
    container = rendered[("Deployment", "mpi-operator")]["spec"]["template"]["spec"]["containers"][
        0
    ]
    assert container["image"] == f"mpi-operator:{__version__}"
    # The Lease follows the pod into kubeflow; the operator watches every namespace.
    assert "--lock-namespace=$(POD_NAMESPACE)" in container["args"]
    assert not any(arg.startswith("--namespace") for arg in container["args"])


# -- gang scheduling components ---------------------------------------------------------------


def overlay_with(directory: Path, *components: Path, base: Path = STANDALONE) -> Path:
    """An overlay of ``base`` with ``components``, written in ``directory`` (kustomize takes
    relative paths only)."""
    directory.mkdir(parents=True, exist_ok=True)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(base, directory)],
        "components": [os.path.relpath(component, directory) for component in components],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return directory


@pytest.mark.parametrize("component", gang_components(), ids=lambda path: path.name)
def test_a_gang_component_adds_its_rules_and_flag(
    component: Path, tmp_path: Path, objects: dict[tuple[str, str], Doc]
) -> None:
    built = kustomize(overlay_with(tmp_path / "overlay", component))
    plain = by_kind_and_name(load(RENDERED))
    assert set(built) == set(plain)
    role = flatten(built[("ClusterRole", "mpi-operator")]["rules"])
    assert role == base_cluster_role_permissions() | flatten(gang_component_rules(component))
    args = built[("Deployment", "mpi-operator")]["spec"]["template"]["spec"]["containers"][0][
        "args"
    ]
    options = parsed_options({"args": args})
    assert options.gang_scheduling == gang_component_flag(component)
    assert (
        args[:-1]
        == plain[("Deployment", "mpi-operator")]["spec"]["template"]["spec"]["containers"][0][
            "args"
        ]
    )
    # Nothing else changes: the Lease stays a Role, the other objects as rendered.
    for key, doc in built.items():
        if key not in (("ClusterRole", "mpi-operator"), ("Deployment", "mpi-operator")):
            assert doc == plain[key], key


# -- the hardened, namespace-scoped overlay ------------------------------------------------------


def test_namespaced_overlay_grants_nothing_outside_its_namespace(
    objects: dict[tuple[str, str], Doc],
) -> None:
    kustomization = load(NAMESPACED / "kustomization.yaml")[0]
    namespace = kustomization["namespace"]
    built = kustomize(NAMESPACED)
    base_role = objects[("ClusterRole", "mpi-operator")]
    cluster_role = {("ClusterRole", "mpi-operator"), ("ClusterRoleBinding", "mpi-operator")}
    assert set(built) == (set(objects) - cluster_role) | {
        ("Role", "mpi-operator"),
        ("RoleBinding", "mpi-operator"),
    }
    # The operator's role: the base's rules, in the one namespace.
    role = built[("Role", "mpi-operator")]
    assert role["metadata"]["namespace"] == namespace
    assert role["rules"] == base_role["rules"]
    for name in ("mpi-operator", LEADER_ELECTION):
        binding = built[("RoleBinding", name)]
        assert binding["metadata"]["namespace"] == namespace
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": name,
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "mpi-operator", "namespace": namespace}
        ]
    # Cluster-wide: the CRD and the roles for people only; nothing is bound to the operator.
    cluster_wide = {key for key, doc in built.items() if "namespace" not in doc["metadata"]}
    assert cluster_wide == {
        ("CustomResourceDefinition", "mpijobs.kubeflow.org"),
        *((kind, name) for kind, name in objects if name.startswith("kubeflow-mpijobs-")),
    }
    container = built[("Deployment", "mpi-operator")]["spec"]["template"]["spec"]["containers"][0]
    options = parsed_options(container)
    # Both expanded by the kubelet from POD_NAMESPACE: the namespace the pod runs in.
    assert options.namespace == options.lock_namespace == "$(POD_NAMESPACE)"
    assert options.gang_scheduling == ""


def test_the_reliability_table_lists_exactly_the_granted_verbs(operator_role: Doc) -> None:
    # docs/reliability.md says which code path asks for each verb; a verb added to or dropped
    # from the role without its row there fails here.
    text = (ROOT / "docs" / "reliability.md").read_text()
    section = text.split("\n## RBAC: every verb used\n", 1)[1].split("\n## ", 1)[0]
    listed: set[tuple[str, str, str]] = set()
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("API group", "---"):
            continue
        group = "" if cells[0] == "core" else cells[0].strip("`")
        resources = [r.strip().strip("`") for r in cells[1].split(",")]
        verbs = [v.strip() for v in cells[2].split(",")]
        listed.update((group, r, v) for r in resources for v in verbs)
    granted = flatten(operator_role["rules"]) | LEASE_PERMISSIONS | every_gang_permission()
    assert listed == granted, (
        f"in the table, not granted: {sorted(listed - granted)}; "
        f"granted, not in the table: {sorted(granted - listed)}"
    )
