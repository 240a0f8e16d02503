"""Helpers for Kubernetes objects kept as the API server's raw JSON (plain dicts).

Objects stay ``dict[str, Any]`` end to end: typed models would drop fields they do not know and
cost several times the memory. These helpers read the few metadata fields the runtime needs and
never mutate their argument.
"""

from __future__ import annotations

from typing import Any

Object = dict[str, Any]
"""One Kubernetes object as decoded JSON."""


def metadata(obj: Object) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def name_of(obj: Object) -> str:
    return str(metadata(obj).get("name") or "")


def namespace_of(obj: Object) -> str:
    return str(metadata(obj).get("namespace") or "")


def resource_version_of(obj: Object) -> str:
    return str(metadata(obj).get("resourceVersion") or "")


def labels_of(obj: Object) -> dict[str, str]:
    labels = metadata(obj).get("labels")
    return labels if isinstance(labels, dict) else {}


def object_key(obj: Object) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones (client-go's
    MetaNamespaceKeyFunc), so keys from caches and from work queues are interchangeable."""
    namespace = namespace_of(obj)
    name = name_of(obj)
    return f"{namespace}/{name}" if namespace else name


def make_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def split_key(key: str) -> tuple[str, str]:
    """Inverse of :func:`object_key`: ``(namespace, name)``; namespace ``""`` if cluster-scoped."""
    namespace, sep, name = key.partition("/")
    if not sep:
        return "", key
    if "/" in name:
        raise ValueError(f"invalid object key {key!r}: more than one '/'")
    return namespace, name


def controller_ref(obj: Object) -> dict[str, Any] | None:
    """The ownerReference with ``controller: true``, if any (at most one may exist)."""
    for ref in metadata(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None
