"""The API writer's answer to AlreadyExists (adopt what is ours, refuse what is not), and its
refusal to send any grant wider than one job's named pods."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.controller.execute import WriteError
from mpi_operator.controller.plan import Action
from mpi_operator.desired.kinds import Verb
from mpi_operator.operator.writer import ApiWriter
from mpi_operator.runtime.client import CONFIGMAPS, ROLE_BINDINGS, ROLES, ApiError, Resource
from mpi_operator.testing.wrappers import owner_references

LABEL = "training.kubeflow.org/operator-name"


class ExistingObjectClient:
    """Answers every create with 409 and every get with ``live``; records updates."""

    def __init__(self, live: dict[str, Any]) -> None:
        self.live = live
        self.updates: list[dict[str, Any]] = []

    def create(self, resource: Resource, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        raise ApiError(409, "AlreadyExists", "exists")

    def get(self, resource: Resource, name: str, namespace: str) -> dict[str, Any]:
        return self.live

    def update(self, resource: Resource, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        self.updates.append(obj)
        return obj


def create_config_map() -> Action:
    body = {"metadata": {"name": "pi-config", "ownerReferences": owner_references("pi")}}
    return Action("create", "configmaps", "ns", "pi-config", body)


def writer_for(live: dict[str, Any]) -> tuple[ApiWriter, ExistingObjectClient]:
    client = ExistingObjectClient(live)
    return ApiWriter(client, {"configmaps": CONFIGMAPS}), client  # type: ignore[arg-type]


def test_our_object_without_the_label_is_adopted_by_labelling_it() -> None:
    live = {"metadata": {"name": "pi-config", "ownerReferences": owner_references("pi")}}
    writer, client = writer_for(live)
    written = writer.write(create_config_map())
    assert written is not None and written["metadata"]["labels"] == {LABEL: "mpi-operator"}
    assert len(client.updates) == 1 and "labels" not in live["metadata"]


def test_our_labelled_object_counts_as_created() -> None:
    live = {
        "metadata": {
            "name": "pi-config",
            "labels": {LABEL: "mpi-operator"},
            "ownerReferences": owner_references("pi"),
        }
    }
    writer, client = writer_for(live)
    assert writer.write(create_config_map()) is live
    assert client.updates == []


def test_our_object_made_through_kubeflow_org_v1_counts_as_ours() -> None:
    """training-operator's children name kubeflow.org/v1 as their controller's version."""
    [owner] = owner_references("pi")
    live = {
        "metadata": {
            "name": "pi-config",
            "labels": {LABEL: "mpi-operator"},
            "ownerReferences": [{**owner, "apiVersion": "kubeflow.org/v1"}],
        }
    }
    writer, _ = writer_for(live)
    assert writer.write(create_config_map()) is live


def foreign_owner(**changed: Any) -> list[dict[str, Any]]:
    [owner] = owner_references("pi")
    return [{**owner, **changed}]


@pytest.mark.parametrize(
    "owners",
    [
        [],
        owner_references("pi", uid="another-uid"),
        foreign_owner(apiVersion="example.com/v1"),
        foreign_owner(kind="PyTorchJob"),
        foreign_owner(controller=False),
    ],
    ids=[
        "no owner",
        "another job of the same name",
        "same uid in another group",
        "same uid of another kind",
        "owner but not controller",
    ],
)
def test_someone_elses_object_is_refused_with_err_resource_exists(
    owners: list[dict[str, Any]],
) -> None:
    writer, client = writer_for({"metadata": {"name": "pi-config", "ownerReferences": owners}})
    with pytest.raises(WriteError) as raised:
        writer.write(create_config_map())
    assert raised.value.reason == "ErrResourceExists"
    assert str(raised.value) == (
        'Resource "pi-config" of Kind "ConfigMap" already exists and is not managed by MPIJob'
    )
    assert client.updates == []


class RecordingClient:
    """Accepts every write; records what was sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def create(self, resource: Resource, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        self.sent.append(obj)
        return obj

    update = create


def rbac_writer() -> tuple[ApiWriter, RecordingClient]:
    client = RecordingClient()
    resources = {"roles": ROLES, "rolebindings": ROLE_BINDINGS}
    return ApiWriter(client, resources), client  # type: ignore[arg-type]


def rule(resource: str, verb: str, **names: Any) -> dict[str, Any]:
    return {"apiGroups": [""], "resources": [resource], "verbs": [verb], **names}


def role(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "pi-launcher", "namespace": "ns"}, "rules": list(rules)}


def binding(**changed: Any) -> dict[str, Any]:
    subject = {"kind": "ServiceAccount", "name": "pi-launcher", "namespace": "ns"}
    body = {
        "metadata": {"name": "pi-launcher", "namespace": "ns"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pi-launcher"},
        "subjects": [subject],
    }
    return {**body, **changed}


@pytest.mark.parametrize("verb", ["create", "update"])
@pytest.mark.parametrize(
    ("resource", "body"),
    [
        ("roles", role(rule("pods/exec", "create"))),
        ("roles", role(rule("pods/exec", "create", resourceNames=[]))),
        ("roles", role(rule("pods", "get", resourceNames=["pi-worker-0"]), rule("pods", "list"))),
        ("roles", role(rule("pods/exec", "create", resourceNames=[""]))),
        ("roles", role()),
        ("rolebindings", binding(roleRef={"kind": "ClusterRole", "name": "pi-launcher"})),
        ("rolebindings", binding(roleRef={"kind": "Role", "name": "admin"})),
        ("rolebindings", binding(subjects=[{"kind": "Group", "name": "system:authenticated"}])),
        ("rolebindings", binding(subjects=[{"kind": "ServiceAccount", "name": "default"}])),
        (
            "rolebindings",
            binding(subjects=[{"kind": "ServiceAccount", "name": "pi-launcher", "namespace": "x"}]),
        ),
    ],
    ids=[
        "rule without names",
        "rule with no names",
        "a second rule without names",
        "an empty name",
        "no rules",
        "binds a ClusterRole",
        "binds another Role",
        "binds a group",
        "binds another account",
        "binds an account of another namespace",
    ],
)
def test_a_grant_wider_than_named_pods_is_refused_unsent(
    verb: Verb, resource: str, body: dict[str, Any]
) -> None:
    writer, client = rbac_writer()
    with pytest.raises(WriteError, match="internal error: refused to") as raised:
        writer.write(Action(verb, resource, "ns", "pi-launcher", body))
    assert raised.value.status == 500
    assert client.sent == []


def test_the_launchers_own_grant_is_sent() -> None:
    writer, client = rbac_writer()
    names = {"resourceNames": ["pi-worker-0"]}
    exec_role = role(rule("pods", "get", **names), rule("pods/exec", "create", **names))
    for resource, body in (("roles", exec_role), ("rolebindings", binding())):
        writer.write(Action("create", resource, "ns", "pi-launcher", body))
    assert len(client.sent) == 2
