"""Sync-plan writes sent to the API server.

A create that meets AlreadyExists is looked at once, live: the cache may simply lag behind an
earlier create of ours (then the object is ours and the write's goal holds), or an object of the
same name belongs to someone else (then the sync stops with ErrResourceExists, as upstream's
does, and nothing is overwritten). Objects of ours that lack the operator's label, made by an
earlier operator version, get the label so the filtered caches see them from then on.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from mpi_operator.api import constants as c
from mpi_operator.controller.execute import WriteError
from mpi_operator.controller.plan import REASON_RESOURCE_EXISTS, Action, resource_exists_message
from mpi_operator.runtime.client import ApiError, Client, Resource
from mpi_operator.runtime.objects import Object, controller_ref


class ApiWriter:
    def __init__(self, client: Client, resources: Mapping[str, Resource]) -> None:
        self._client = client
        self._resources = dict(resources)

    def write(self, action: Action) -> dict[str, Any] | None:
        plural, _, subresource = action.resource.partition("/")
        resource = self._resources[plural]
        try:
            return self._send(action, resource, subresource)
        except ApiError as error:
            if action.verb == "create" and error.status == 409:
                return self._existing(action, resource)
            raise WriteError(error.status, str(error)) from None

    def _send(self, action: Action, resource: Resource, subresource: str) -> Object:
        client, body, ns = self._client, action.body or {}, action.namespace
        if action.verb == "create":
            return client.create(resource, body, ns)
        if action.verb == "update":
            return client.update(resource, body, ns)
        if action.verb == "patch":
            return client.patch(resource, action.name, body, ns)
        if action.verb == "update_status":
            assert subresource == "status"
            return client.update_status(resource, body, ns)
        return client.delete(
            resource,
            action.name,
            ns,
            propagation_policy="Background",
            preconditions=body.get("preconditions"),
        )

    def _existing(self, action: Action, resource: Resource) -> Object:
        try:
            live = self._client.get(resource, action.name, action.namespace)
        except ApiError as error:
            raise WriteError(error.status, str(error)) from None
        if not _same_controller(live, action.body or {}):
            raise WriteError(
                409,
                resource_exists_message(action.name, resource.kind),
                reason=REASON_RESOURCE_EXISTS,
            )
        labels = live["metadata"].get("labels") or {}
        if labels.get(c.LABEL_OPERATOR_NAME) == c.OPERATOR_NAME:
            return live
        adopted = copy.deepcopy(live)
        adopted["metadata"]["labels"] = {**labels, c.LABEL_OPERATOR_NAME: c.OPERATOR_NAME}
        try:
            return self._client.update(resource, adopted, action.namespace)
        except ApiError as error:
            raise WriteError(error.status, str(error)) from None


def _same_controller(live: Object, desired: Object) -> bool:
    wanted, found = controller_ref(desired), controller_ref(live)
    return wanted is not None and found is not None and found.get("uid") == wanted.get("uid")
