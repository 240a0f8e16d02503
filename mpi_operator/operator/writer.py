"""Sync-plan writes sent to the API server.

A create that meets AlreadyExists is looked at once, live: the cache may simply lag behind an
earlier create of ours (then the object is ours and the write's goal holds), or an object of the
same name belongs to someone else (then the sync stops with ErrResourceExists, as upstream's
does, and nothing is overwritten). Objects of ours that lack the operator's label, made by an
earlier operator version, get the label so the filtered caches see them from then on.

The writer is also the last guard on what the operator grants: it refuses to send a Role or
RoleBinding that would grant more than the named pods of one job (see ``grant_problem``),
whatever the plan that asked for it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from mpi_operator.api import constants as c
from mpi_operator.api.meta import controlled_by_mpijob
from mpi_operator.controller.execute import WriteError
from mpi_operator.controller.plan import REASON_RESOURCE_EXISTS, Action, resource_exists_message
from mpi_operator.desired.kinds import ROLE, ROLE_BINDING, SERVICE_ACCOUNT
from mpi_operator.runtime.client import ApiError, Client, Resource
from mpi_operator.runtime.objects import Object, controller_ref


class ApiWriter:
    def __init__(self, client: Client, resources: Mapping[str, Resource]) -> None:
        self._client = client
        self._resources = dict(resources)

    def write(self, action: Action) -> dict[str, Any] | None:
        problem = grant_problem(action)
        if problem is not None:
            # A bug of ours, never the user's: nothing is sent, and the sync fails loudly.
            raise WriteError(500, f"internal error: refused to {action.describe()}: {problem}")
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
        wanted = controller_ref(action.body or {})
        if wanted is None or not controlled_by_mpijob(live, wanted.get("uid")):
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


def grant_problem(action: Action) -> str | None:
    """Why a write of a Role or RoleBinding must not be sent, or None.

    A Role rule without ``resourceNames``, or with an empty list, applies to every object of
    its resources in the namespace: RBAC reads "no names" as "all names". The operator's only
    grants are a launcher's access to its own job's pods by name, bound to that launcher's own
    account, so anything else is refused.
    """
    if action.verb not in ("create", "update"):
        return None
    body = action.body or {}
    if action.resource == ROLE.plural:
        rules = body.get("rules")
        if not isinstance(rules, list) or not rules:
            return "a Role must have rules"
        for index, rule in enumerate(rules):
            names = rule.get("resourceNames") if isinstance(rule, dict) else None
            if not isinstance(names, list) or not names or not all(names):
                return f"rules[{index}] must name the objects it grants (resourceNames)"
    elif action.resource == ROLE_BINDING.plural:
        role_ref = body.get("roleRef") or {}
        if role_ref.get("kind") != ROLE.kind or role_ref.get("name") != action.name:
            return "a RoleBinding must bind the Role of its own name"
        subjects = body.get("subjects") or []
        subject = subjects[0] if len(subjects) == 1 and isinstance(subjects[0], dict) else {}
        if (subject.get("kind"), subject.get("name"), subject.get("namespace")) != (
            SERVICE_ACCOUNT.kind,
            action.name,
            action.namespace,
        ):
            return "a RoleBinding must bind only the ServiceAccount of its own name"
    return None
