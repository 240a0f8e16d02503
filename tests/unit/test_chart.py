"""The Helm chart, rendered by a real helm built from its pinned Go module
(hack/cluster/build-helm.sh): lint, golden renders, values the schema refuses, and no drift from
the kustomize install in deploy/ (RBAC rules, Deployment args and pod, CRD)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from golden import assert_matches_golden
from test_deploy import (
    DELIVERY_ENV,
    LEADER_ELECTION,
    NAMESPACED,
    base_objects,
    flatten,
    kustomize,
)

from mpi_operator import __version__
from mpi_operator.operator.options import Options, add_operator_flags, options_from
from tests.tools import (
    gang_component_for,
    gang_component_rules,
    gang_scheduling_values,
    helm_binary,
)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "mpi-operator"
CRD = ROOT / "crds" / "kubeflow.org_mpijobs.yaml"

Doc = dict[str, Any]


@pytest.fixture(scope="module")
def helm() -> str:
    return helm_binary()


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [helm, *args], capture_output=True, text=True, check=False, timeout=120, cwd=ROOT
    )


def template(helm: str, *sets: str, namespace: str = "mpi-operator") -> str:
    args = ["template", "mpi", str(CHART), "--namespace", namespace, "--include-crds"]
    for value in sets:
        args += ["--set", value]
    done = run_helm(helm, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def objects(text: str) -> dict[tuple[str, str, str], Doc]:
    found: dict[tuple[str, str, str], Doc] = {}
    for doc in yaml.safe_load_all(text):
        if doc is None:
            continue
        key = (doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"])
        assert key not in found, f"{key} rendered twice"
        found[key] = doc
    return found


def operator_container(deployment: Doc) -> Doc:
    """The operator's container of a Deployment."""
    found: Doc = deployment["spec"]["template"]["spec"]["containers"][0]
    return found


def operator_options(args: list[str]) -> Options:
    parser = argparse.ArgumentParser()
    add_operator_flags(parser)
    return options_from(parser.parse_args(args))


def expanded_args(container: Doc) -> list[str]:
    """The container's arguments with ``$(NAME)`` of its plain ``env`` values expanded, as the
    kubelet expands them."""
    values = {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}
    args: list[str] = container["args"]
    return [re.sub(r"\$\((\w+)\)", lambda m: values.get(m[1], m[0]), arg) for arg in args]


# Values of the operator's tuning flags, used by more than one test.
TUNED_FLAGS = (
    "operator.threadiness=8",
    "operator.kubeApiQps=50",
    "operator.kubeApiBurst=100",
    "operator.controllerQueueRateLimit=20",
    "operator.controllerQueueBurst=200",
    "operator.clusterDomain=cluster.local",
)


# -- the chart as shipped --------------------------------------------------------------------


def test_the_charts_crd_is_the_generated_one() -> None:
    assert (CHART / "crds" / CRD.name).read_text() == CRD.read_text(), (
        "charts/mpi-operator/crds is stale: run make generate"
    )


def test_lint_is_clean(helm: str) -> None:
    done = run_helm(helm, "lint", "--strict", str(CHART))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


@pytest.mark.parametrize(
    ("name", "sets"),
    [
        ("default", ()),
        (
            "namespace-scope",
            ("rbac.scope=namespace", "operator.namespace=team-a", "rbac.userRoles=false"),
        ),
        (
            "namespace-scope-gang",
            (
                "rbac.scope=namespace",
                "operator.namespace=team-a",
                "rbac.userRoles=false",
                "operator.gangScheduling=scheduler-plugins-scheduler",
            ),
        ),
        (
            "every-value",
            (
                "replicaCount=2",
                "image.repository=registry.example/mpi-operator",
                "image.digest=sha256:" + "a" * 64,
                "operator.gangScheduling=volcano",
                *TUNED_FLAGS,
                "operator.logLevel=4",
                "operator.logFormat=json",
                "operator.extraArgs={--health-port=9090}",
                "operator.healthPort=9090",
                "nodeSelector.kubernetes\\.io/os=linux",
                "tolerations[0].key=dedicated,tolerations[0].operator=Exists",
                "priorityClassName=system-cluster-critical",
                "metrics.serviceMonitor.enabled=true",
                "metrics.podMonitor.enabled=true",
                "metrics.podMonitor.labels.release=prometheus",
            ),
        ),
    ],
)
def test_template_matches_its_golden_file(helm: str, name: str, sets: tuple[str, ...]) -> None:
    rendered = template(helm, *sets)
    # The CRD is pinned by test_the_charts_crd_is_the_generated_one; keep goldens readable.
    documents = rendered.split("\n---\n")
    kept = [d for d in documents if "kind: CustomResourceDefinition" not in d]
    assert len(kept) == len(documents) - 1
    assert_matches_golden(f"chart/{name}.yaml", "\n---\n".join(kept))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("operator.threadiness=0", "at '/operator/threadiness': minimum: got 0, want 1"),
        ("operator.threadines=3", "additional properties 'threadines' not allowed"),
        ("rbac.scope=everywhere", "at '/rbac/scope': value must be one of 'cluster', 'namespace'"),
        ("operator.monitoringPort=70000", "at '/operator/monitoringPort': maximum"),
        ("operator.leaderElect=maybe", "at '/operator/leaderElect': got string, want boolean"),
        ("operator.failureLogTail=no", "at '/operator/failureLogTail': got string, want boolean"),
        ("operator.logFormat=xml", "at '/operator/logFormat': value must be one of"),
        ("image.pullPolicy=Sometimes", "at '/image/pullPolicy': value must be one of"),
        ("operator.controllerQueueRateLimit=0", "at '/operator/controllerQueueRateLimit'"),
        ("operator.namespace=Not_A_Namespace", "at '/operator/namespace'"),
        (
            "replicaCount=2,operator.leaderElect=false",
            "replicaCount > 1 needs operator.leaderElect=true",
        ),
    ],
)
def test_bad_values_are_refused_with_a_clear_message(helm: str, value: str, message: str) -> None:
    done = run_helm(helm, "template", "mpi", str(CHART), "--set", value)
    assert done.returncode != 0, done.stdout
    assert message in done.stderr, done.stderr


# -- no drift from deploy/ -------------------------------------------------------------------


@pytest.fixture(scope="module")
def base() -> dict[tuple[str, str], Doc]:
    return base_objects()


@pytest.fixture(scope="module")
def chart(helm: str) -> dict[tuple[str, str, str], Doc]:
    return objects(template(helm))


def test_the_chart_installs_the_same_crd(chart: dict[tuple[str, str, str], Doc]) -> None:
    crd = yaml.safe_load(CRD.read_text())
    assert chart[("CustomResourceDefinition", "", "mpijobs.kubeflow.org")] == crd


# --gang-scheduling values: off, each component's, and another coscheduling scheduler's name.
GANG_SCHEDULERS = (*gang_scheduling_values(), "my-scheduler")


# What only an operator of every namespace reads (the scheduler's node groups, beside every
# node's labels): the chart grants it to no operator of one namespace.
READ_ACROSS_NAMESPACES_ONLY = {
    ("topology.volcano.sh", "hypernodes", "list"),
    ("topology.volcano.sh", "hypernodes", "watch"),
    ("scheduling.koordinator.sh", "clusternetworktopologies", "list"),
    ("scheduling.koordinator.sh", "clusternetworktopologies", "watch"),
}


def gang_rules(gang_scheduling: str) -> set[tuple[str, str, str]]:
    """What the kustomize install adds for a scheduler: its component's rules."""
    component = gang_component_for(gang_scheduling)
    return flatten(gang_component_rules(component)) if component is not None else set()


@pytest.mark.parametrize("gang_scheduling", GANG_SCHEDULERS)
def test_the_chart_grants_what_the_kustomize_install_grants(
    helm: str, base: dict[tuple[str, str], Doc], gang_scheduling: str
) -> None:
    chart = objects(template(helm, f"operator.gangScheduling={gang_scheduling}"))
    operator_role = flatten(chart[("ClusterRole", "", "mpi-operator")]["rules"])
    expected = flatten(base[("ClusterRole", "mpi-operator")]["rules"]) | gang_rules(gang_scheduling)
    assert operator_role == expected, (
        f"only the chart's: {sorted(operator_role - expected)}; "
        f"only kustomize's: {sorted(expected - operator_role)}"
    )
    # The Lease: a Role of its own in the release namespace, the pod's.
    lease_role = chart[("Role", "mpi-operator", LEADER_ELECTION)]
    assert flatten(lease_role["rules"]) == flatten(base[("Role", LEADER_ELECTION)]["rules"])
    lease_binding = chart[("RoleBinding", "mpi-operator", LEADER_ELECTION)]
    assert lease_binding["roleRef"] == base[("RoleBinding", LEADER_ELECTION)]["roleRef"]
    assert lease_binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "mpi-operator", "namespace": "mpi-operator"}
    ]
    container = operator_container(chart[("Deployment", "mpi-operator", "mpi-operator")])
    assert operator_options(container["args"]).gang_scheduling == gang_scheduling


def test_the_chart_ships_the_kustomize_user_roles(
    chart: dict[tuple[str, str, str], Doc], base: dict[tuple[str, str], Doc]
) -> None:
    for name in ("kubeflow-mpijobs-edit", "kubeflow-mpijobs-view"):
        rendered = chart[("ClusterRole", "", name)]
        assert flatten(rendered["rules"]) == flatten(base[("ClusterRole", name)]["rules"]), name
    for name in ("kubeflow-mpijobs-admin", "kubeflow-mpijobs-edit", "kubeflow-mpijobs-view"):
        source = base[("ClusterRole", name)]
        rendered = chart[("ClusterRole", "", name)]
        assert rendered.get("aggregationRule") == source.get("aggregationRule"), name
        assert rendered["metadata"]["labels"].items() >= source["metadata"]["labels"].items()
    binding = chart[("ClusterRoleBinding", "", "mpi-operator")]
    assert binding["roleRef"] == base[("ClusterRoleBinding", "mpi-operator")]["roleRef"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "mpi-operator", "namespace": "mpi-operator"}
    ]


@pytest.mark.parametrize("gang_scheduling", GANG_SCHEDULERS)
def test_namespace_scope_grants_the_same_rules_split_by_scope(
    helm: str, base: dict[tuple[str, str], Doc], gang_scheduling: str
) -> None:
    rendered = objects(
        template(
            helm,
            "rbac.scope=namespace",
            "operator.namespace=team-a",
            f"operator.gangScheduling={gang_scheduling}",
        )
    )
    roles = {key: doc for key, doc in rendered.items() if key[0] in ("Role", "ClusterRole")}
    operator_roles = {k: v for k, v in roles.items() if not k[2].startswith("kubeflow-")}
    cluster_role = ("ClusterRole", "", "mpi-operator-mpi-operator")
    lease_role = ("Role", "mpi-operator", LEADER_ELECTION)
    # A ClusterRole only for what a gang scheduler reads cluster-wide; none without one.
    assert set(operator_roles) == {
        ("Role", "team-a", "mpi-operator"),
        lease_role,
        *([cluster_role] if gang_scheduling else []),
    }
    granted = set().union(*(flatten(doc["rules"]) for doc in operator_roles.values()))
    assert granted == (
        flatten(base[("ClusterRole", "mpi-operator")]["rules"])
        | flatten(base[("Role", LEADER_ELECTION)]["rules"])
        | (gang_rules(gang_scheduling) - READ_ACROSS_NAMESPACES_ONLY)
    )
    assert {resource for _, resource, _ in flatten(operator_roles[lease_role]["rules"])} == {
        "leases"
    }
    if gang_scheduling:
        cluster_wide = flatten(operator_roles[cluster_role]["rules"])
        assert {resource for _, resource, _ in cluster_wide} <= {
            "nodes",
            "priorityclasses",
            "queues",
        }
    for namespace, name in (("team-a", "mpi-operator"), ("mpi-operator", LEADER_ELECTION)):
        binding = rendered[("RoleBinding", namespace, name)]
        assert binding["subjects"][0]["namespace"] == "mpi-operator"
    args = rendered[("Deployment", "mpi-operator", "mpi-operator")]["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert operator_options(args).namespace == "team-a"


def test_namespace_scope_is_the_namespaced_overlay(helm: str) -> None:
    """rbac.scope=namespace, released into the overlay's namespace, installs the hardened
    overlay's RBAC and runs the operator with the same flags."""
    built = kustomize(NAMESPACED)
    namespace = built[("Deployment", "mpi-operator")]["metadata"]["namespace"]
    rendered = objects(template(helm, "rbac.scope=namespace", namespace=namespace))
    rbac_kinds = ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
    overlay_rbac = {
        (kind, doc["metadata"].get("namespace", ""), name): doc
        for (kind, name), doc in built.items()
        if kind in rbac_kinds
    }
    chart_rbac = {key: doc for key, doc in rendered.items() if key[0] in rbac_kinds}
    assert set(chart_rbac) == set(overlay_rbac)
    for key, doc in overlay_rbac.items():
        assert flatten(chart_rbac[key].get("rules") or []) == flatten(doc.get("rules") or []), key
        for field in ("roleRef", "subjects", "aggregationRule"):
            assert chart_rbac[key].get(field) == doc.get(field), (key, field)
    # The kubelet expands $(POD_NAMESPACE) to the namespace the pod runs in.
    overlay_args, chart_args = (
        [
            arg.replace("$(POD_NAMESPACE)", namespace)
            for arg in operator_container(deployment)["args"]
        ]
        for deployment in (
            built[("Deployment", "mpi-operator")],
            rendered[("Deployment", namespace, "mpi-operator")],
        )
    )
    assert operator_options(chart_args) == operator_options(overlay_args)


def test_the_chart_runs_the_operator_as_the_kustomize_deployment_does(
    chart: dict[tuple[str, str, str], Doc], base: dict[tuple[str, str], Doc]
) -> None:
    source = base[("Deployment", "mpi-operator")]
    rendered = chart[("Deployment", "mpi-operator", "mpi-operator")]
    assert rendered["spec"]["selector"] == {
        "matchLabels": {**source["spec"]["selector"]["matchLabels"], **UPSTREAM_SELECTOR}
    }
    pod, source_pod = rendered["spec"]["template"]["spec"], source["spec"]["template"]["spec"]
    container, source_container = dict(pod["containers"][0]), dict(source_pod["containers"][0])
    # Every flag spelled out by the chart means what the base's few flags mean.
    assert operator_options(container.pop("args")) == operator_options(source_container.pop("args"))
    assert container.pop("image") == f"mpi-operator:{__version__}"
    source_image = source_container.pop("image")
    # Both give launchers the operator's own image as their kubectl-delivery image.
    assert container["env"][0] == {"name": DELIVERY_ENV, "value": f"mpi-operator:{__version__}"}
    assert source_container["env"][0] == {"name": DELIVERY_ENV, "value": source_image}
    container["env"] = container["env"][1:]
    source_container["env"] = source_container["env"][1:]
    assert container == source_container
    assert {k: v for k, v in pod.items() if k != "containers"} == {
        k: v for k, v in source_pod.items() if k != "containers"
    }
    assert (
        rendered["spec"]["template"]["metadata"]["annotations"]
        == source["spec"]["template"]["metadata"]["annotations"]
    )


UPSTREAM_SELECTOR = {
    "app": "mpi-operator",
    "app.kubernetes.io/component": "mpijob",
    "app.kubernetes.io/name": "mpi-operator",
    "kustomize.component": "mpi-operator",
}


def test_the_values_reach_the_operators_flags(helm: str) -> None:
    rendered = objects(
        template(
            helm,
            "operator.gangScheduling=scheduler-plugins-scheduler",
            *TUNED_FLAGS,
            "operator.leaderElect=false",
            "operator.lockNamespace=locks",
            "operator.logLevel=3",
            "operator.logFormat=json",
            "operator.failureLogTail=false",
            "operator.monitoringPort=9100",
            "operator.healthPort=9101",
        )
    )
    container = operator_container(rendered[("Deployment", "mpi-operator", "mpi-operator")])
    assert operator_options(expanded_args(container)) == Options(
        namespace="",
        threadiness=8,
        monitoring_port=9100,
        gang_scheduling="scheduler-plugins-scheduler",
        lock_namespace="locks",
        kube_api_qps=50.0,
        kube_api_burst=100,
        controller_queue_rate_limit=20.0,
        controller_queue_burst=200,
        cluster_domain="cluster.local",
        health_port=9101,
        leader_elect=False,
        failure_log_tail=False,
        verbosity=3,
        log_format="json",
        # The operator's own image, as the chart runs it.
        mpi_kubectl_delivery_image=f"mpi-operator:{__version__}",
    )
    assert [p["containerPort"] for p in container["ports"]] == [9101, 9100]
    # Without leader election there is no Lease, and no right to one.
    assert not [key for key in rendered if key[2] == LEADER_ELECTION]


def test_the_lease_role_follows_the_lock_namespace(helm: str) -> None:
    rendered = objects(template(helm, "operator.lockNamespace=locks"))
    leases = {key for key in rendered if key[2] == LEADER_ELECTION}
    assert leases == {("Role", "locks", LEADER_ELECTION), ("RoleBinding", "locks", LEADER_ELECTION)}
    binding = rendered[("RoleBinding", "locks", LEADER_ELECTION)]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "mpi-operator", "namespace": "mpi-operator"}
    ]


def test_the_chart_and_the_kustomize_base_ship_the_same_objects(
    chart: dict[tuple[str, str, str], Doc], base: dict[tuple[str, str], Doc]
) -> None:
    assert {(kind, name) for kind, _, name in chart} == set(base)


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        ((), f"mpi-operator:{__version__}"),
        (
            ("image.repository=registry.example/mpi-operator", "image.digest=sha256:" + "b" * 64),
            "registry.example/mpi-operator@sha256:" + "b" * 64,
        ),
        (
            ("operator.kubectlDeliveryImage=registry.example/kubectl-delivery:v1.34.1",),
            "registry.example/kubectl-delivery:v1.34.1",
        ),
    ],
    ids=["default", "operator-digest", "own-value"],
)
def test_launchers_get_kubectl_from_the_operators_image_unless_told_otherwise(
    helm: str, sets: tuple[str, ...], expected: str
) -> None:
    rendered = objects(template(helm, *sets))
    container = operator_container(rendered[("Deployment", "mpi-operator", "mpi-operator")])
    assert operator_options(expanded_args(container)).mpi_kubectl_delivery_image == expected
    if not any(value.startswith("operator.kubectlDeliveryImage") for value in sets):
        assert expected == container["image"]


# Flags a Deployment has no use for: the in-cluster configuration replaces the first two.
NOT_VALUES = {"--master", "--kubeconfig", "--kubeConfig", "--help"}


def test_every_flag_of_the_operator_is_a_value(helm: str) -> None:
    """Every flag the operator takes (klog's, which change nothing, aside) is spelled out by
    the chart, from a value under `operator.`."""
    parser = argparse.ArgumentParser()
    add_operator_flags(parser)
    flags = {
        option
        for action in parser._actions
        if not action.dest.startswith("klog_")
        for option in action.option_strings
        if option.startswith("--")
    } - NOT_VALUES
    container = operator_container(
        objects(template(helm))[("Deployment", "mpi-operator", "mpi-operator")]
    )
    given = {arg.split("=", 1)[0] for arg in container["args"]}
    assert flags - given == set()
    values = yaml.safe_load((CHART / "values.yaml").read_text())["operator"]
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert set(values) == set(schema["properties"]["operator"]["properties"])
