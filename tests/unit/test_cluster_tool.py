"""The local cluster tool's CRD install waits on what the API server reports."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import hack.cluster as localcluster
from hack.cluster import cli, lifecycle
from hack.cluster.profiles import PROFILES, ControlPlane

CRD = "customresourcedefinition.apiextensions.k8s.io/queues.scheduling.volcano.sh"
# What `kubectl wait --for=condition=Established` printed on a CRD without conditions yet.
ACCESSOR_ERROR = ".status.conditions accessor error: <nil> is of the type <nil>, expected []"


class NewCRDCluster:
    """kubectl against an API server that fills a new CRD's conditions in a moment later."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = [
            {"kind": "CustomResourceDefinition", "metadata": {"name": "queues"}},
            {
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "queues"},
                "status": {"conditions": [{"type": "NamesAccepted", "status": "True"}]},
            },
            {
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "queues"},
                "status": {"conditions": [{"type": "Established", "status": "True"}]},
            },
        ]
        self.gets = 0

    def kubectl(self, *args: str, **_: Any) -> subprocess.CompletedProcess[str]:
        if args[0] == "apply":
            return subprocess.CompletedProcess(args, 0, CRD + "\n", "")
        if args[0] == "wait":
            raise localcluster.ClusterError(f"kubectl {' '.join(args)} failed: {ACCESSOR_ERROR}")
        assert args[:2] == ("get", CRD)
        answer = self.answers[min(self.gets, len(self.answers) - 1)]
        self.gets += 1
        return subprocess.CompletedProcess(args, 0, json.dumps(answer), "")


def test_a_new_crd_without_conditions_yet_is_waited_for_not_an_error() -> None:
    cluster = NewCRDCluster()
    localcluster.apply_crds(cluster, [Path("crds")])
    assert cluster.gets == 3


def test_not_established_reads_lists_and_single_objects() -> None:
    ready = {
        "metadata": {"name": "a"},
        "status": {"conditions": [{"type": "Established", "status": "True"}]},
    }
    fresh = {"metadata": {"name": "b"}, "status": {}}
    assert localcluster.not_established({"kind": "List", "items": [ready, fresh]}) == ["b"]
    assert localcluster.not_established(ready) == []


def kwok_module(tmp_path: Path) -> dict[str, Path]:
    """The module directories kwok_config reads kwok's stock stages from, with those stages."""
    stages = tmp_path / "kwok" / "kustomize" / "stage"
    for rel in (
        "node/fast/node-initialize.yaml",
        "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
        "pod/fast/pod-ready.yaml",
    ):
        (stages / rel).parent.mkdir(parents=True, exist_ok=True)
        (stages / rel).write_text("kind: Stage\n")
    return {"sigs.k8s.io/kwok": tmp_path / "kwok"}


def first_profile_options(tmp_path: Path, audit_policy: Path | None) -> dict[str, Any]:
    """kwokctl's options for a cluster of the first profile, without real nodes."""
    text = localcluster.kwok_config(
        tmp_path / "bin",
        kwok_module(tmp_path),
        ControlPlane(tmp_path / "bin", "v1.34.1"),
        tmp_path / "pki",
        None,
        audit_policy,
    )
    options: dict[str, Any] = next(yaml.safe_load_all(text))["options"]
    return options


def test_an_audit_policy_is_handed_to_kwokctl_only_when_asked_for(tmp_path: Path) -> None:
    policy = tmp_path / "audit-policy.yaml"

    assert first_profile_options(tmp_path, policy)["kubeAuditPolicy"] == str(policy)
    assert "kubeAuditPolicy" not in first_profile_options(tmp_path, None)


def test_up_hands_the_audit_policy_on_and_a_changed_policy_is_a_different_cluster(
    tmp_path: Path, monkeypatch: Any
) -> None:
    policy = tmp_path / "audit-policy.yaml"
    policy.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n")
    asked: dict[str, Any] = {}

    def up(**options: Any) -> Any:
        asked.update(options)
        return localcluster.ClusterInfo("c", "default", "/kubeconfig", [], 0.0)

    monkeypatch.setattr(cli, "up", up)
    assert cli.main(["up", "--name", "c", "--audit-policy", str(policy)]) == 0
    assert asked["audit_policy"] == policy
    # A running cluster is kept only for the same policy text, wherever the file lies.
    digest = localcluster.audit_policy_digest(policy)
    assert digest == localcluster.audit_policy_digest(
        Path(shutil.copy(policy, tmp_path / "copy.yaml"))
    )
    policy.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None}]\n")
    assert localcluster.audit_policy_digest(policy) not in (digest, "")
    assert localcluster.audit_policy_digest(None) == ""


def test_each_scheduler_recipe_names_what_its_pods_ask_for_and_what_the_operator_is_told() -> None:
    facts = {
        name: (recipe.scheduler_name, recipe.gang_scheduling, recipe.crd)
        for name, recipe in localcluster.RECIPES.items()
    }
    assert facts == {
        "default": ("default-scheduler", "", None),
        "volcano": ("volcano", "volcano", "podgroups.scheduling.volcano.sh"),
        "scheduler-plugins": (
            "scheduler-plugins-scheduler",
            "scheduler-plugins-scheduler",
            "podgroups.scheduling.x-k8s.io",
        ),
        "koordinator": (
            "koord-scheduler",
            "koord-scheduler",
            "reservations.scheduling.koordinator.sh",
        ),
        "native": ("default-scheduler", "scheduling.k8s.io/podgroup", None),
    }
    # Only the native one runs the second Kubernetes profile, and it starts no scheduler.
    assert {n: r.kubernetes for n, r in localcluster.RECIPES.items() if r.kubernetes} == {
        "native": "1.37"
    }
    assert localcluster.RECIPES["native"].start is None


def test_a_scheduler_is_named_by_its_recipe_or_by_the_gang_scheduling_only_it_runs() -> None:
    assert localcluster.recipe_named("scheduling.k8s.io/podgroup").name == "native"
    assert localcluster.recipe_named("volcano").name == "volcano"
    assert "scheduling.k8s.io/podgroup" in localcluster.scheduler_choices()
    with pytest.raises(localcluster.ClusterError, match="unknown scheduler 'volcan'"):
        localcluster.recipe_named("volcan")


def test_the_second_profile_runs_its_own_control_plane_with_its_gates_and_api_versions(
    tmp_path: Path,
) -> None:
    profile = PROFILES["1.37"]
    plane = ControlPlane(
        tmp_path / "k8s-1.37", "v1.37.2", profile.feature_gates, profile.runtime_config
    )
    text = localcluster.kwok_config(
        tmp_path / "bin", kwok_module(tmp_path), plane, tmp_path / "pki", None
    )
    options = next(yaml.safe_load_all(text))["options"]
    assert options["kubeVersion"] == "v1.37.2"
    assert {k: v for k, v in options.items() if k.endswith("Binary")} == {
        "kubeApiserverBinary": str(tmp_path / "k8s-1.37" / "kube-apiserver"),
        "kubeControllerManagerBinary": str(tmp_path / "k8s-1.37" / "kube-controller-manager"),
        "kubeSchedulerBinary": str(tmp_path / "k8s-1.37" / "kube-scheduler"),
        "kubectlBinary": str(tmp_path / "bin" / "kubectl"),
        "etcdBinary": str(tmp_path / "bin" / "etcd"),
        "kwokControllerBinary": str(tmp_path / "bin" / "kwok"),
    }
    assert options["kubeFeatureGates"] == (
        "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
    )
    assert options["kubeRuntimeConfig"] == "scheduling.k8s.io/v1beta1=true"
    assert not {"kubeFeatureGates", "kubeRuntimeConfig"} & set(
        first_profile_options(tmp_path, None)
    )


def test_up_refuses_a_scheduler_without_a_recipe_before_building_anything(
    monkeypatch: Any,
) -> None:
    def no_build(**_: Any) -> Path:
        raise AssertionError("bin_dir was asked for")

    monkeypatch.setattr(lifecycle, "bin_dir", no_build)
    with pytest.raises(localcluster.ClusterError, match="choose one of"):
        localcluster.up("yunikorn", name="c")


def test_a_running_cluster_is_kept_only_when_asked_for_with_the_same_options(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MPI_OPERATOR_CACHE", str(tmp_path))
    localcluster.cluster_dir("c").mkdir(parents=True)
    # This test's own process stands for a live cluster process: it is surely alive.
    me = localcluster.Proc("pytest", os.getpid(), localcluster.proc_start_time(os.getpid()) or 0)
    localcluster.ClusterInfo("c", "volcano", "/k", [me], 0.0, audit_policy="d").save()
    downed: list[str] = []
    monkeypatch.setattr(lifecycle, "down", downed.append)

    kept = lifecycle.running_as_asked("c", "volcano", 0, False, 0, "d")
    assert kept is not None and kept.processes == [me]
    assert downed == []
    assert lifecycle.running_as_asked("c", "volcano", 0, False, 0, "another policy") is None
    assert downed == ["c"]
    assert not localcluster.cluster_dir("c").exists()


def test_status_lists_a_cluster_whose_state_holds_fields_this_tool_does_not_know(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # The cache is shared by checkouts of different ages: one that predated audit_policy
    # failed `status` on every cluster a newer one had started.
    monkeypatch.setenv("MPI_OPERATOR_CACHE", str(tmp_path))
    me = localcluster.Proc("pytest", os.getpid(), localcluster.proc_start_time(os.getpid()) or 0)
    state = {
        **dataclasses.asdict(localcluster.ClusterInfo("c", "volcano", "/k", [me], 0.0)),
        "audit_policy": "d",
        "a_field_of_a_newer_tool": {"x": 1},
    }
    state["processes"][0]["and_one_per_process"] = True
    localcluster.cluster_dir("c").mkdir(parents=True)
    (localcluster.cluster_dir("c") / "cluster.json").write_text(json.dumps(state))

    info = localcluster.ClusterInfo.load("c")
    assert info is not None and info.audit_policy == "d" and info.processes == [me]
    assert localcluster.status("c") == 0
    assert capsys.readouterr().out.startswith("c: running scheduler=volcano kubeconfig=/k\n")
