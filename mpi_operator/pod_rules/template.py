"""What the API server checks in a pod template, checked before the operator builds pods from it.

Templates stay plain dicts in the MPIJob model, so nothing typed has looked at them. The checks
here cover every part of a template the operator reads or extends, and the parts users most
often get wrong, so that a job that passes validation gives Pods and a Job the API server
accepts: containers with a name and an image, valid and non-negative quantities with requests
no larger than limits, unique container and volume names, mounts of existing volumes at
distinct paths, valid label and annotation keys and values. On top of the API server's rules,
the operator's own volume names and mount paths are reserved, since it adds them to every pod.
"""

from __future__ import annotations

import posixpath
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final, TypeVar

from mpi_operator.field_errors import MAX_PROBLEMS, FieldError, quoted
from mpi_operator.pod_rules import dns
from mpi_operator.pod_rules.containers import (
    container_errors,
    entries,
    grace_period_of,
    host_port_errors,
)
from mpi_operator.pod_rules.schema import declared_fields, template_schema_errors
from mpi_operator.quantity import InvalidQuantityError, Quantity

T = TypeVar("T")
Checked = Generator[FieldError, None, T]
"""Yields the problems of a field, then returns what of it is usable by the later checks."""

# The API server's limits on a pod's DNS search list.
MAX_DNS_SEARCHES: Final = 32
MAX_DNS_SEARCH_CHARACTERS: Final = 2048

MAX_ANNOTATIONS_BYTES: Final = 256 * 1024
"""The API server's limit on the total size of an object's annotation keys and values."""

_VOLUME_FIELDS: Final = declared_fields("io.k8s.api.core.v1.Volume")


@dataclass(frozen=True)
class OperatorMounts:
    """The volumes the operator adds to a role's pods, and where it mounts them in the first
    container."""

    mount_paths: tuple[str, ...]
    volume_names: tuple[str, ...]

    def __post_init__(self) -> None:
        # `/etc/mpi/` and `/etc/mpi` are one directory in the container.
        object.__setattr__(
            self, "mount_paths", tuple(posixpath.normpath(p) for p in self.mount_paths)
        )


def template_errors(
    path: str, template: dict[str, Any] | None, mounts: OperatorMounts
) -> Iterator[FieldError]:
    """Kubernetes' schema first; then the rules it cannot express, except where the schema
    already refused the field or one that holds it (one problem, one message)."""
    # As for the document's limits: a list of a million wrong values needs no more lines.
    schema_errors = list(islice(template_schema_errors(path, template), MAX_PROBLEMS))
    yield from schema_errors
    refused = [error.path for error in schema_errors]
    for error in _rule_errors(path, template or {}, mounts):
        if not any(_within(error.path, where) for where in refused):
            yield error


def _within(path: str, ancestor: str) -> bool:
    return path == ancestor or (path.startswith(ancestor) and path[len(ancestor)] in ".[")


def _rule_errors(
    path: str, template: dict[str, Any], mounts: OperatorMounts
) -> Iterator[FieldError]:
    metadata = yield from _object(f"{path}.metadata", template.get("metadata"))
    if metadata is not None:
        yield from label_errors(f"{path}.metadata.labels", metadata.get("labels"))
        yield from annotation_errors(f"{path}.metadata.annotations", metadata.get("annotations"))
    pod_spec = template.get("spec")
    if pod_spec is not None and not isinstance(pod_spec, dict):
        yield FieldError(f"{path}.spec", "must be an object")
        return
    yield from _pod_spec_errors(f"{path}.spec", pod_spec or {}, mounts)


def label_errors(path: str, labels: object) -> Iterator[FieldError]:
    entries = yield from _string_map(path, labels)
    for key, value in entries:
        yield from _key_errors(path, key)
        for problem in dns.label_value(value):
            yield FieldError(f"{path}[{key}]", f"invalid value {quoted(value)}: {problem}")


def annotation_errors(path: str, annotations: object) -> Iterator[FieldError]:
    entries = yield from _string_map(path, annotations)
    size = 0
    for key, value in entries:
        yield from _key_errors(path, key)
        size += len(key.encode()) + len(value.encode())
    if size > MAX_ANNOTATIONS_BYTES:
        yield FieldError(
            path, f"may not be larger than {MAX_ANNOTATIONS_BYTES} bytes in total, found {size}"
        )


def _key_errors(path: str, key: str) -> Iterator[FieldError]:
    for problem in dns.qualified_name(key):
        yield FieldError(f"{path}[{key}]", f"invalid key: {problem}")


def _string_map(path: str, value: object) -> Checked[list[tuple[str, str]]]:
    """Problems of a map of strings; returns its well-formed entries."""
    entries: list[tuple[str, str]] = []
    mapping = yield from _object(path, value)
    for key, item in (mapping or {}).items():
        if isinstance(item, str):
            entries.append((key, item))
        else:
            yield FieldError(f"{path}[{key}]", "must be a string")
    return entries


def _pod_spec_errors(
    path: str, pod_spec: dict[str, Any], mounts: OperatorMounts
) -> Iterator[FieldError]:
    containers = pod_spec.get("containers")
    if not containers:
        yield FieldError(f"{path}.containers", "must define at least one container")
    volumes = yield from _volume_errors(
        f"{path}.volumes", pod_spec.get("volumes"), mounts.volume_names
    )
    grace_period = grace_period_of(pod_spec)
    names: set[str] = set()
    for field in ("initContainers", "containers"):
        for index, container in entries(pod_spec.get(field)):
            where = f"{path}.{field}[{index}]"
            operator_mounts = mounts.mount_paths if (field, index) == ("containers", 0) else ()
            yield from _container_errors(where, container, names, volumes, operator_mounts)
            yield from container_errors(
                where, container, init=field == "initContainers", grace_period=grace_period
            )
    yield from host_port_errors(path, pod_spec, pod_spec.get("hostNetwork") is True)
    # The API server checks a priority class's name; a scheduler name may be any string.
    priority_class = pod_spec.get("priorityClassName")
    if isinstance(priority_class, str) and priority_class:
        for problem in dns.dns1123_subdomain(priority_class):
            yield FieldError(
                f"{path}.priorityClassName", f"invalid value {quoted(priority_class)}: {problem}"
            )
    yield from _dns_config_errors(f"{path}.dnsConfig", pod_spec.get("dnsConfig"))
    yield from resource_list_errors(f"{path}.overhead", pod_spec.get("overhead"))
    if pod_spec.get("overhead") and not pod_spec.get("runtimeClassName"):
        # The RuntimeClass admission plugin (on by default) sets a pod's overhead from its
        # class, and refuses a pod that sets one without a class to compare it with.
        yield FieldError(
            f"{path}.overhead",
            "is set from the pod's RuntimeClass: the API server refuses a pod that sets it "
            "without spec.runtimeClassName",
        )
    yield from _resources_errors(f"{path}.resources", pod_spec.get("resources"))


def _volume_errors(path: str, volumes: object, reserved: tuple[str, ...]) -> Checked[set[str]]:
    """Problems of the volumes; returns (through ``yield from``) the names they define."""
    names: set[str] = set()
    for index, volume in entries(volumes):
        where = f"{path}[{index}]"
        name = yield from _unique_name(where, volume, names, "volume", reserved)
        # An unknown field is no source: the schema check names it.
        sources = [key for key in volume if key != "name" and key in _VOLUME_FIELDS]
        if name is not None and len(sources) != 1:
            yield FieldError(where, "must specify exactly one volume source (emptyDir, ...)")
    return names


def _unique_name(
    path: str, item: dict[str, Any], seen: set[str], noun: str, reserved: tuple[str, ...] = ()
) -> Checked[str | None]:
    """Problems of an item's name (a DNS label, new among ``seen``); returns the name."""
    name = item.get("name")
    if not isinstance(name, str) or not name:
        yield FieldError(f"{path}.name", "is required")
        return None
    for problem in dns.dns1123_label(name):
        yield FieldError(f"{path}.name", f"invalid value {quoted(name)}: {problem}")
    if name in reserved:
        yield FieldError(
            f"{path}.name", f"{quoted(name)} is reserved: the operator adds a {noun} of that name"
        )
    elif name in seen:
        yield FieldError(f"{path}.name", f"duplicate {noun} name {quoted(name)}")
    seen.add(name)
    return name


def _container_errors(
    path: str,
    container: dict[str, Any],
    names: set[str],
    volumes: set[str],
    operator_mounts: tuple[str, ...],
) -> Iterator[FieldError]:
    yield from _unique_name(path, container, names, "container")
    image = container.get("image")
    if not isinstance(image, str) or not image:
        yield FieldError(f"{path}.image", "is required")
    elif image != image.strip():
        yield FieldError(f"{path}.image", "must not have leading or trailing whitespace")
    yield from _mount_errors(
        f"{path}.volumeMounts", container.get("volumeMounts"), volumes, operator_mounts
    )
    yield from _resources_errors(f"{path}.resources", container.get("resources"))


def _mount_errors(
    path: str, mounts: object, volumes: set[str], operator_mounts: tuple[str, ...]
) -> Iterator[FieldError]:
    seen: set[str] = set()
    for index, mount in entries(mounts):
        where = f"{path}[{index}]"
        name, mount_path = mount.get("name"), mount.get("mountPath")
        if not isinstance(name, str) or not name:
            yield FieldError(f"{where}.name", "is required")
        elif name not in volumes:
            yield FieldError(f"{where}.name", f"no volume named {quoted(name)} in the template")
        if not isinstance(mount_path, str) or not mount_path:
            yield FieldError(f"{where}.mountPath", "is required")
            continue
        if posixpath.normpath(mount_path) in operator_mounts:
            yield FieldError(
                f"{where}.mountPath",
                f"{quoted(mount_path)} is reserved: the operator mounts its own volume there",
            )
        elif mount_path in seen:
            yield FieldError(f"{where}.mountPath", f"duplicate mount path {quoted(mount_path)}")
        seen.add(mount_path)


def _object(path: str, value: object) -> Checked[dict[str, Any] | None]:
    """An optional object field: None when absent or (with its problem) not an object."""
    if value is not None and not isinstance(value, dict):
        yield FieldError(path, "must be an object")
        return None
    return value


def _resources_errors(path: str, value: object) -> Iterator[FieldError]:
    """A ResourceRequirements: valid lists, and no request above its limit."""
    resources = yield from _object(path, value)
    if resources is None:
        return
    requests = yield from _amounts(f"{path}.requests", resources.get("requests"))
    limits = yield from _amounts(f"{path}.limits", resources.get("limits"))
    for name, request in requests.items():
        limit = limits.get(name)
        if limit is not None and request.value > limit.value:
            yield FieldError(
                f"{path}.requests[{name}]",
                f"must be less than or equal to the {name} limit of {limit}",
            )


def resource_list_errors(path: str, resources: object) -> Iterator[FieldError]:
    """A map of resource names to valid, non-negative quantities."""
    yield from _amounts(path, resources)


def _amounts(path: str, value: object) -> Checked[dict[str, Quantity]]:
    """Problems of a resource list; returns the quantities that are valid."""
    amounts: dict[str, Quantity] = {}
    resources = yield from _object(path, value)
    for name, raw in (resources or {}).items():
        try:
            amount = Quantity.parse(raw)
        except InvalidQuantityError as error:
            yield FieldError(f"{path}[{name}]", str(error))
            continue
        if amount.is_negative:
            yield FieldError(f"{path}[{name}]", "must be greater than or equal to 0")
            continue
        amounts[name] = amount
    return amounts


def _dns_config_errors(path: str, value: object) -> Iterator[FieldError]:
    dns_config = yield from _object(path, value)
    if dns_config is None:
        return
    searches = dns_config.get("searches")
    if searches is None:
        return
    if not isinstance(searches, list):
        return  # the schema's to refuse
    # A null entry is the empty string, as the API server decodes it.
    searches = ["" if search is None else search for search in searches]
    if len(searches) > MAX_DNS_SEARCHES:
        yield FieldError(f"{path}.searches", f"must have at most {MAX_DNS_SEARCHES} entries")
    elif all(isinstance(s, str) for s in searches):
        characters = len(" ".join(searches))
        if characters > MAX_DNS_SEARCH_CHARACTERS:
            yield FieldError(
                f"{path}.searches",
                f"must have at most {MAX_DNS_SEARCH_CHARACTERS} characters, found {characters}",
            )
    for index, search in enumerate(searches):
        if not isinstance(search, str):
            continue  # the schema's to refuse
        for problem in dns.dns1123_subdomain(search.removesuffix(".")):
            yield FieldError(
                f"{path}.searches[{index}]", f"invalid value {quoted(search)}: {problem}"
            )


def searches_of(pod_spec: Mapping[str, Any]) -> list[str]:
    """The template's DNS search domains, as far as they are well formed."""
    dns_config = pod_spec.get("dnsConfig")
    searches = dns_config.get("searches") if isinstance(dns_config, dict) else None
    return [s for s in searches if isinstance(s, str)] if isinstance(searches, list) else []
