"""The API writer's answer to AlreadyExists: adopt what is ours, refuse what is not."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.controller.execute import WriteError
from mpi_operator.controller.plan import Action
from mpi_operator.operator.writer import ApiWriter
from mpi_operator.runtime.client import CONFIGMAPS, ApiError, Resource
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


@pytest.mark.parametrize(
    "owners",
    [[], owner_references("pi", uid="another-uid")],
    ids=["no owner", "another job of the same name"],
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
