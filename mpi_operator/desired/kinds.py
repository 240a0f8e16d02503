"""The kinds of a job's children: where each lives in the API and what a sync writes to it.

The one table of them: the sync plan names its kinds from it, the operator caches and writes
exactly these, and the test view files objects by it; the RBAC tests check that the plans
write each kind with exactly the verbs listed here, and that the install grants what they
write. The gang's own kinds come from its strategy instead (``gang.gang_resources_of``).

Every child is namespaced (its owner, the MPIJob, is in its namespace) and cached, filtered by
the operator's label: a sync reads each object before it writes one, to know it is the job's
own. ``Child`` names the steps that make them, which rendering and the sync both walk.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final, Literal

Verb = Literal["create", "update", "update_status", "delete", "patch"]
"""A sync plan's write; ``update_status`` is an update of the ``status`` subresource."""


@dataclass(frozen=True)
class ChildKind:
    group: str
    version: str
    plural: str
    kind: str
    # What a sync plan sends for objects of this kind.
    writes: frozenset[Verb]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


_RBAC: Final = "rbac.authorization.k8s.io"

SERVICE: Final = ChildKind("", "v1", "services", "Service", frozenset({"create", "update"}))
CONFIG_MAP: Final = ChildKind("", "v1", "configmaps", "ConfigMap", frozenset({"create", "update"}))
SECRET: Final = ChildKind("", "v1", "secrets", "Secret", frozenset({"create", "update"}))
SERVICE_ACCOUNT: Final = ChildKind(
    "", "v1", "serviceaccounts", "ServiceAccount", frozenset({"create"})
)
ROLE: Final = ChildKind(_RBAC, "v1", "roles", "Role", frozenset({"create", "update", "delete"}))
ROLE_BINDING: Final = ChildKind(
    _RBAC, "v1", "rolebindings", "RoleBinding", frozenset({"create", "update", "delete"})
)
POD: Final = ChildKind("", "v1", "pods", "Pod", frozenset({"create", "delete"}))
JOB: Final = ChildKind(
    "batch", "v1", "jobs", "Job", frozenset({"create", "update", "update_status"})
)

# The operator starts its informers in this order: Jobs before Pods, whose events find their
# job through the launcher's Job.
CHILD_KINDS: Final = (SERVICE, CONFIG_MAP, SECRET, JOB, SERVICE_ACCOUNT, ROLE, ROLE_BINDING, POD)
CHILD_KINDS_BY_PLURAL: Final = {kind.plural: kind for kind in CHILD_KINDS}


class Child(Enum):
    """A step of a job's children: ``objects.children`` gives their creation order, and a
    transport names the ones it adds (``desired.transports``)."""

    SERVICE = "Service"
    CONFIG_MAP = "ConfigMap"
    SSH_SECRET = "Secret"
    EXEC_ACCESS = "the launcher's exec access"
    GANG_OBJECTS = "the gang's objects"
    WORKERS = "worker Pods"
    LAUNCHER = "launcher Job"
