"""A pod template checked against Kubernetes' own OpenAPI schema of a PodTemplateSpec.

The schema (``pod_template_schema.json``) is generated from the pinned Kubernetes release by
``make generate``, never written by hand, so every field of every release-year of the pod API is
covered without restating it. The check follows how the API server decodes JSON into its Go
types, which is stricter in some places and looser in others than JSON Schema:

- ``null`` is a field's zero value, as if the field were absent; a ``null`` list item is a zero
  item (an object with no fields, so its required fields are missing);
- an integer is an integer literal (``1.0`` does not decode into a Go int) within its format's
  range; a boolean is never a number;
- a field the schema does not know is refused, with the nearest known name: the API server
  would drop it (a field newer than the pinned release included);
- a required field is present and not ``null``.

What the schema cannot say (names, quantities, port ranges, ...) is checked by the rules in
``template`` and ``containers``. The walk follows the document, whose depth and size
``api.bounds`` has already limited, so it is bounded too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any, Final

from mpi_operator.field_errors import FieldError, quoted, unknown_field

Schema = Mapping[str, Any]

_RANGES: Final = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_NOUNS: Final = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
}
# Go's time.RFC3339, which metav1.Time decodes with: a 'T', seconds, an optional fraction and a
# zone of 'Z' or an offset.
_RFC3339: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))"
)


@cache
def _schema() -> dict[str, Any]:
    text = (
        resources.files("mpi_operator.pod_rules").joinpath("pod_template_schema.json").read_text()
    )
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def kubernetes_version() -> str:
    """The Kubernetes release the schema was generated from."""
    return str(_schema()["kubernetes"])


def template_schema() -> Schema:
    """The PodTemplateSpec's own node; its references resolve with :func:`resolved`."""
    schema = _schema()
    root: Schema = schema["definitions"][schema["root"]]
    return root


def declared_fields(definition: str) -> frozenset[str]:
    """The fields the schema declares for a Kubernetes type (``io.k8s.api.core.v1.Volume``)."""
    return frozenset(_schema()["definitions"][definition]["properties"])


def template_schema_errors(path: str, template: object) -> Iterator[FieldError]:
    """Where ``template`` breaks the PodTemplateSpec schema, each problem with its field path."""
    yield from _errors(path, template, template_schema())


def resolved(node: Schema) -> Schema:
    """``node``, or the definition it refers to."""
    ref = node.get("$ref")
    if ref is None:
        return node
    resolved: Schema = _schema()["definitions"][ref]
    return resolved


def _errors(path: str, value: object, node: Schema) -> Iterator[FieldError]:
    if value is None:
        return
    node = resolved(node)
    choices = node.get("oneOf")
    if choices is not None:
        kinds = [choice["type"] for choice in choices]
        if not any(_is_a(value, kind) for kind in kinds):
            yield FieldError(path, "must be " + " or ".join(_NOUNS[k] for k in kinds))
        return
    kind = node.get("type")
    if kind is None:
        return
    if not _is_a(value, kind):
        yield FieldError(path, f"must be {_NOUNS[kind]}")
        return
    if kind == "object":
        assert isinstance(value, dict)
        yield from _object_errors(path, value, node)
    elif kind == "array":
        assert isinstance(value, list)
        items = node.get("items")
        if items is not None:
            for index, item in enumerate(value):
                yield from _item_errors(f"{path}[{index}]", item, items)
    else:
        yield from _scalar_errors(path, value, node)


def _object_errors(path: str, value: dict[str, Any], node: Schema) -> Iterator[FieldError]:
    for name in node.get("required", ()):
        if value.get(name) is None:
            yield FieldError(f"{path}.{name}", "is required")
    properties = node.get("properties")
    if properties is not None:
        for name, child in value.items():
            known = properties.get(name)
            if known is None:
                yield unknown_field(path, name, properties)
            else:
                yield from _errors(f"{path}.{name}", child, known)
    values = node.get("additionalProperties")
    if isinstance(values, dict):
        for key, child in value.items():
            yield from _errors(f"{path}[{key}]", child, values)


def _item_errors(path: str, item: object, node: Schema) -> Iterator[FieldError]:
    # Go decodes a null item of a list of structs as the zero struct, whose required fields
    # are then missing; a null string or number is its zero value.
    if item is None and resolved(node).get("type") == "object":
        item = {}
    yield from _errors(path, item, node)


def _scalar_errors(path: str, value: object, node: Schema) -> Iterator[FieldError]:
    enum = node.get("enum")
    if enum is not None and value not in enum:
        choices = ", ".join(quoted(choice) for choice in enum)
        yield FieldError(path, f"unsupported value {quoted(value)}: must be one of {choices}")
    limits = _RANGES.get(node.get("format", ""))
    if limits is not None and isinstance(value, int) and not limits[0] <= value <= limits[1]:
        yield FieldError(path, f"must be between {limits[0]} and {limits[1]}")
    if node.get("format") == "date-time" and isinstance(value, str) and not _is_time(value):
        yield FieldError(
            path, f"invalid value {quoted(value)}: must be a time such as 2006-01-02T15:04:05Z"
        )


def _is_a(value: object, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int)
    return kind == "number" and isinstance(value, int | float)


def _is_time(text: str) -> bool:
    match = _RFC3339.fullmatch(text)
    if match is None:
        return False
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    try:
        datetime(year, month, day, hour, minute, second)
    except ValueError:
        return False
    zone_hour, zone_minute = match.group(9), match.group(10)
    return zone_hour is None or (int(zone_hour) < 24 and int(zone_minute) < 60)
