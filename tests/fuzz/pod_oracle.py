"""The oracle's view of a pod spec beyond names and quantities: Kubernetes' schema and its
container rules (env, envFrom, ports, probes, lifecycle hooks).

Types are checked by the ``jsonschema`` library against the OpenAPI schema of the pinned
Kubernetes release, read as the API server decodes JSON (an integer is an integer literal in
its format's range) and as strict field validation reads it (a field the schema does not
declare is refused, where the API server would otherwise drop it); the product has its own
walker of the same schema, so the two can disagree. The container rules are restated from
Kubernetes' validation. The caller has already dropped null fields, as Go decodes them as
absent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.validators import extend

SCHEMA = (
    Path(__file__).resolve().parents[2] / "mpi_operator" / "pod_rules" / "pod_template_schema.json"
)
PORT_NAME = re.compile(r"[-a-z0-9]*[a-z][-a-z0-9]*")
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
HEADER_NAME = re.compile(r"[-A-Za-z0-9]+")
TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
HOOK_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")


def _go_integer(_: Any, value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _or_null(kind: str) -> Any:
    """A null list item decodes as the zero value: fine for scalars and lists (an object
    item keeps its required fields, so it stays refused)."""
    return lambda checker, value: value is None or _TYPES.is_type(value, kind)


_FORMATS = FormatChecker(formats=())
_FORMATS.checks("int32")(lambda v: not _go_integer(None, v) or -(2**31) <= v < 2**31)
_FORMATS.checks("int64")(lambda v: not _go_integer(None, v) or -(2**63) <= v < 2**63)
_FORMATS.checks("date-time")(lambda v: not isinstance(v, str) or bool(TIME.fullmatch(v)))
_TYPES = Draft202012Validator.TYPE_CHECKER.redefine("integer", _go_integer)
_Validator = extend(
    Draft202012Validator,
    type_checker=_TYPES.redefine_many(
        {kind: _or_null(kind) for kind in ("string", "integer", "number", "boolean", "array")}
    ),
)


@cache
def _validator(root: str) -> Any:
    document = json.loads(SCHEMA.read_text())

    def linked(node: Any) -> Any:
        if isinstance(node, dict):
            closed = {"additionalProperties": False} if "properties" in node else {}
            return closed | {
                key: f"#/$defs/{value}" if key == "$ref" else linked(value)
                for key, value in node.items()
            }
        return node

    schema = {
        "$defs": {name: linked(node) for name, node in document["definitions"].items()},
        "$ref": f"#/$defs/{root}",
    }
    return _Validator(schema, format_checker=_FORMATS)


def declared_fields(definition: str) -> frozenset[str]:
    """The fields Kubernetes declares for one of its types, such as ObjectMeta."""
    document = json.loads(SCHEMA.read_text())
    return frozenset(document["definitions"][definition]["properties"])


def pod_spec_problems(where: str, spec: Mapping[str, Any]) -> Iterator[str]:
    """What the schema and the container rules refuse in a pod spec (nulls already dropped)."""
    schema_problems = [
        f"{where}.{'.'.join(str(p) for p in error.absolute_path)}: {error.message}"
        for error in _validator("io.k8s.api.core.v1.PodSpec").iter_errors(spec)
    ]
    if schema_problems:
        yield from schema_problems
        return  # the rules below read typed values
    grace = spec.get("terminationGracePeriodSeconds", 30)
    host_network = spec.get("hostNetwork") is True
    for field in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(field) or []):
            at = f"{where}.{field}[{index}]"
            yield from _env(at, container)
            yield from _ports(at, container.get("ports") or [])
            init = field == "initContainers" and container.get("restartPolicy") != "Always"
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                if probe in container:
                    if init:
                        yield f"{at}.{probe}: on an init container"
                    else:
                        yield from _probe(f"{at}.{probe}", probe, container[probe])
            for hook, handler in (container.get("lifecycle") or {}).items():
                if init:
                    yield f"{at}.lifecycle: on an init container"
                elif hook in ("postStart", "preStop"):
                    yield from _handler(f"{at}.lifecycle.{hook}", handler, HOOK_HANDLERS, grace)
    yield from _host_ports(where, spec, host_network)


def _env_name_ok(name: Any) -> bool:
    return bool(name) and all(32 <= ord(c) <= 126 and c != "=" for c in name)


def _reference_problems(at: str, reference: Mapping[str, Any], key: bool) -> Iterator[str]:
    name = reference.get("name") or ""
    if not SUBDOMAIN.fullmatch(name) or len(name) > 253:
        yield f"{at}.name {name!r}: not a subdomain"
    if key:
        value = reference.get("key") or ""
        if not CONFIG_KEY.fullmatch(value) or len(value) > 253 or value.startswith(".."):
            yield f"{at}.key {value!r}: not a config key"
        elif value == ".":
            yield f"{at}.key: '.'"


def _env(at: str, container: Mapping[str, Any]) -> Iterator[str]:
    sources = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
    for index, var in enumerate(container.get("env") or []):
        if not _env_name_ok(var.get("name")):
            yield f"{at}.env[{index}].name {var.get('name')!r}: not an env var name"
        value_from = var.get("valueFrom")
        if value_from is None:
            continue
        given = [s for s in sources if s in value_from]
        if len(given) != 1 or var.get("value"):
            yield f"{at}.env[{index}].valueFrom: {given} beside value {var.get('value')!r}"
        for source in ("configMapKeyRef", "secretKeyRef"):
            if source in value_from:
                yield from _reference_problems(
                    f"{at}.env[{index}].{source}", value_from[source], True
                )
    for index, entry in enumerate(container.get("envFrom") or []):
        prefix = entry.get("prefix")
        if prefix and not _env_name_ok(prefix):
            yield f"{at}.envFrom[{index}].prefix {prefix!r}: not an env var name"
        given = [s for s in ("configMapRef", "secretRef") if s in entry]
        if len(given) != 1:
            yield f"{at}.envFrom[{index}]: sources {given}"
        for source in given:
            yield from _reference_problems(f"{at}.envFrom[{index}].{source}", entry[source], False)


def _port_name_ok(name: str) -> bool:
    return (
        len(name) <= 15
        and bool(PORT_NAME.fullmatch(name))
        and "--" not in name
        and not name.startswith("-")
        and not name.endswith("-")
    )


def _ports(at: str, ports: list[Mapping[str, Any]]) -> Iterator[str]:
    names = []
    for index, port in enumerate(ports):
        name = port.get("name") or ""
        if name and not _port_name_ok(name):
            yield f"{at}.ports[{index}].name {name!r}: not an IANA service name"
        elif name and name in names:
            yield f"{at}.ports[{index}].name {name!r}: twice"
        names.append(name)
        if not 1 <= port.get("containerPort", 0) <= 65535:
            yield f"{at}.ports[{index}].containerPort: not a port"
        if not 0 <= port.get("hostPort", 0) <= 65535:
            yield f"{at}.ports[{index}].hostPort: not a port"
        if port.get("protocol", "TCP") not in ("", "TCP", "UDP", "SCTP"):
            yield f"{at}.ports[{index}].protocol {port.get('protocol')!r}: unsupported"


def _host_ports(where: str, spec: Mapping[str, Any], host_network: bool) -> Iterator[str]:
    def used(containers: list[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
        found = []
        for container in containers:
            for port in container.get("ports") or []:
                host_port = port.get("hostPort") or (
                    port.get("containerPort") if host_network else 0
                )
                if host_port:
                    found.append((host_port, port.get("protocol") or "TCP", port.get("hostIP", "")))
        return found

    groups = [[c] for c in spec.get("initContainers") or []] + [spec.get("containers") or []]
    for group in groups:
        ports = used(group)
        if len(ports) != len(set(ports)):
            yield f"{where}: a host port twice in {ports}"
    if host_network:
        for container in spec.get("containers") or []:
            for port in container.get("ports") or []:
                if port.get("hostPort", 0) not in (0, port.get("containerPort")):
                    yield f"{where}: hostPort {port.get('hostPort')} beside the host's network"


def _probe(at: str, kind: str, probe: Mapping[str, Any]) -> Iterator[str]:
    yield from _handler(at, probe, PROBE_HANDLERS, None)
    for field in (
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ):
        if probe.get(field, 0) < 0:
            yield f"{at}.{field}: negative"
    if kind != "readinessProbe" and probe.get("successThreshold", 1) not in (0, 1):
        yield f"{at}.successThreshold: not 1"
    if kind == "readinessProbe" and probe.get("terminationGracePeriodSeconds") is not None:
        yield f"{at}.terminationGracePeriodSeconds: set on a readiness probe"
    elif probe.get("terminationGracePeriodSeconds", 1) <= 0:
        yield f"{at}.terminationGracePeriodSeconds: not positive"


def _port_ok(port: Any) -> bool:
    if isinstance(port, str):
        return _port_name_ok(port)
    return 1 <= port <= 65535


def _handler(
    at: str, handler: Mapping[str, Any], kinds: tuple[str, ...], grace: int | None
) -> Iterator[str]:
    given = [k for k in kinds if k in handler]
    if len(given) != 1:
        yield f"{at}: handlers {given}"
        return
    action = handler[given[0]]
    if given[0] == "exec" and not action.get("command"):
        yield f"{at}.exec: no command"
    if given[0] in ("httpGet", "tcpSocket", "grpc") and not _port_ok(action.get("port")):
        yield f"{at}.{given[0]}.port {action.get('port')!r}: not a port"
    if given[0] == "httpGet":
        if action.get("scheme", "HTTP") not in ("", "HTTP", "HTTPS"):
            yield f"{at}.httpGet.scheme: unsupported"
        for header in action.get("httpHeaders") or []:
            if not HEADER_NAME.fullmatch(header.get("name", "")):
                yield f"{at}.httpGet.httpHeaders: {header.get('name')!r}"
    if given[0] == "sleep" and grace is not None and not 0 <= action["seconds"] <= grace:
        yield f"{at}.sleep: {action['seconds']} outside 0..{grace}"
