"""Object metadata shared by everything the operator creates for a job."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob


class OwnerReference(TypedDict, total=False):
    """An ownerReference. One read from the API server may lack any key, so reads use
    ``.get``; the types are what those reads are checked against."""

    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    """The metadata fields the operator writes or reads; like ``OwnerReference``, any key
    may be missing from an object the API server returned."""

    name: str
    namespace: str
    uid: str
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    ownerReferences: list[OwnerReference]


def metadata_of(obj: Mapping[str, Any]) -> ObjectMeta:
    """``obj``'s metadata; empty when it has none."""
    metadata: ObjectMeta | None = obj.get("metadata")
    return metadata or {}


def controller_reference(job: MPIJob) -> OwnerReference:
    """The ownerReference making ``job`` the controller of a child, so GC deletes both."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_terminating(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is being deleted (its name is soon anyone's)."""
    return bool(metadata_of(obj).get("deletionTimestamp"))


def child_metadata(job: MPIJob, name: str, labels: dict[str, str] | None = None) -> ObjectMeta:
    """Metadata of a child object: deterministic name, job namespace, controller reference.

    Every child carries the operator's label (upstream labels only pods with it) so the
    operator can watch its own objects and nothing else of the cluster.
    """
    return {
        "name": name,
        "namespace": job.namespace,
        "labels": {**(labels or {}), c.LABEL_OPERATOR_NAME: c.OPERATOR_NAME},
        "ownerReferences": [controller_reference(job)],
    }


def is_controlled_by(obj: Mapping[str, Any], job: MPIJob) -> bool:
    """True when ``obj``'s controller is this very job: see :func:`controlled_by_mpijob`."""
    return controlled_by_mpijob(obj, job.uid)


def controlled_by_mpijob(obj: Mapping[str, Any], uid: str | None) -> bool:
    """True when ``obj``'s controller reference is an MPIJob of group kubeflow.org with this
    UID, through whichever version of the API (training-operator's children name
    ``kubeflow.org/v1``). The one test of ownership: the sync and the writer both ask it before
    they touch an object, and the launcher's exec access names only pods that pass it."""
    if not uid:
        return False
    for ref in metadata_of(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            return group == c.GROUP and ref.get("kind") == c.KIND and ref.get("uid") == uid
    return False
