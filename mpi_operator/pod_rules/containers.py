"""The API server's rules for a container's env, envFrom, ports, probes and lifecycle hooks.

These are the checks of Kubernetes' pod validation that a schema cannot express (the types are
``schema``'s job, and a value of the wrong type is skipped here): environment variable
names, exactly one source of a value, port numbers and names, exactly one probe or hook handler.
Messages are worded as apimachinery words them. Defaults the API server fills in before it
validates (a port's protocol, a probe's thresholds, an HTTP probe's scheme) are taken into
account, so what it would default is never refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final, TypeGuard

from mpi_operator.field_errors import FieldError, quoted
from mpi_operator.pod_rules import dns

PROTOCOLS: Final = ("SCTP", "TCP", "UDP")
HTTP_SCHEMES: Final = ("HTTP", "HTTPS")
DEFAULT_GRACE_PERIOD_SECONDS: Final = 30
PROBES: Final = ("livenessProbe", "readinessProbe", "startupProbe")
_PROBE_HANDLERS: Final = ("exec", "httpGet", "tcpSocket", "grpc")
_HOOK_HANDLERS: Final = ("exec", "httpGet", "tcpSocket", "sleep")
_VALUE_SOURCES: Final = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
_ENV_SOURCES: Final = ("configMapRef", "secretRef")
_NON_NEGATIVE: Final = (
    "initialDelaySeconds",
    "timeoutSeconds",
    "periodSeconds",
    "successThreshold",
    "failureThreshold",
)


def container_errors(
    path: str, container: Mapping[str, Any], *, init: bool, grace_period: int
) -> Iterator[FieldError]:
    """The rules above for one container (``init`` for an entry of ``initContainers``)."""
    yield from _env_errors(f"{path}.env", container.get("env"))
    yield from _env_from_errors(f"{path}.envFrom", container.get("envFrom"))
    yield from _port_errors(f"{path}.ports", container.get("ports"))
    sidecar = init and container.get("restartPolicy") == "Always"
    for probe in PROBES:
        value = container.get(probe)
        if not isinstance(value, dict):
            continue
        if init and not sidecar:
            yield _init_forbidden(f"{path}.{probe}")
            continue
        yield from _probe_errors(f"{path}.{probe}", value, readiness=probe == PROBES[1])
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        if init and not sidecar:
            yield _init_forbidden(f"{path}.lifecycle")
            return
        for hook in ("postStart", "preStop"):
            handler = lifecycle.get(hook)
            if isinstance(handler, dict):
                yield from _handler_errors(
                    f"{path}.lifecycle.{hook}", handler, _HOOK_HANDLERS, grace_period
                )


def grace_period_of(pod_spec: Mapping[str, Any]) -> int:
    """The pod's termination grace period, which bounds a preStop sleep; the API server's
    default when unset (or of a type the schema refuses)."""
    grace_period = pod_spec.get("terminationGracePeriodSeconds")
    return grace_period if _is_int(grace_period) else DEFAULT_GRACE_PERIOD_SECONDS


def host_port_errors(
    path: str, pod_spec: Mapping[str, Any], host_network: bool
) -> Iterator[FieldError]:
    """Host ports: unique per protocol and address among the containers (each init container
    alone, as they run one by one), and with the host's network each is its container port."""
    for index, container in entries(pod_spec.get("initContainers")):
        yield from _duplicate_host_ports(
            f"{path}.initContainers", [(index, container)], host_network, set()
        )
    containers = list(entries(pod_spec.get("containers")))
    yield from _duplicate_host_ports(f"{path}.containers", containers, host_network, set())
    if not host_network:
        return
    for index, container in containers:
        for port_index, port in entries(container.get("ports")):
            host_port = port.get("hostPort")
            if _is_int(host_port) and host_port not in (0, port.get("containerPort")):
                yield FieldError(
                    f"{path}.containers[{index}].ports[{port_index}].hostPort",
                    f"invalid value {host_port}: must match `containerPort` when `hostNetwork` "
                    "is true",
                )


def _duplicate_host_ports(
    path: str,
    containers: list[tuple[int, dict[str, Any]]],
    host_network: bool,
    seen: set[tuple[int, str, str]],
) -> Iterator[FieldError]:
    for index, container in containers:
        for port_index, port in entries(container.get("ports")):
            host_port = port.get("hostPort")
            if host_network and not host_port:
                host_port = port.get("containerPort")  # what the API server defaults it to
            if not _is_int(host_port) or host_port == 0:
                continue
            protocol = _str(port.get("protocol")) or "TCP"
            key = (host_port, protocol, _str(port.get("hostIP")))
            if key in seen:
                yield FieldError(
                    f"{path}[{index}].ports[{port_index}].hostPort",
                    f'duplicate value "{protocol}/{key[2]}/{host_port}"',
                )
            seen.add(key)


def _env_errors(path: str, env: object) -> Iterator[FieldError]:
    for index, var in entries(env):
        where = f"{path}[{index}]"
        name = var.get("name")
        if name == "":
            yield FieldError(f"{where}.name", "is required")
        elif isinstance(name, str):
            yield from _invalid(f"{where}.name", name, dns.env_var_name(name))
        value_from = var.get("valueFrom")
        if not isinstance(value_from, dict):
            continue
        sources = [s for s in _VALUE_SOURCES if value_from.get(s) is not None]
        if not sources:
            choices = ", ".join(f"`{s}`" for s in _VALUE_SOURCES)
            yield FieldError(f"{where}.valueFrom", f"must specify one of: {choices}")
        elif var.get("value"):
            yield FieldError(f"{where}.valueFrom", "may not be specified when `value` is not empty")
        elif len(sources) > 1:
            yield FieldError(
                f"{where}.valueFrom", "may not have more than one field specified at a time"
            )
        for source in ("configMapKeyRef", "secretKeyRef"):
            selector = value_from.get(source)
            if isinstance(selector, dict):
                yield from _reference_name_errors(f"{where}.valueFrom.{source}", selector)
                yield from _key_errors(f"{where}.valueFrom.{source}.key", selector.get("key"))


def _env_from_errors(path: str, env_from: object) -> Iterator[FieldError]:
    for index, entry in entries(env_from):
        where = f"{path}[{index}]"
        prefix = entry.get("prefix")
        if isinstance(prefix, str) and prefix:
            yield from _invalid(f"{where}.prefix", prefix, dns.env_var_name(prefix))
        sources = [s for s in _ENV_SOURCES if entry.get(s) is not None]
        if not sources:
            yield FieldError(where, "must specify one of: `configMapRef` or `secretRef`")
        elif len(sources) > 1:
            yield FieldError(where, "may not have more than one field specified at a time")
        for source in sources:
            reference = entry[source]
            if isinstance(reference, dict):
                yield from _reference_name_errors(f"{where}.{source}", reference)


def _reference_name_errors(path: str, reference: Mapping[str, Any]) -> Iterator[FieldError]:
    """The name of a ConfigMap or Secret that a variable reads: required, a DNS subdomain."""
    name = reference.get("name")
    if name is None or name == "":
        yield FieldError(f"{path}.name", "is required")
    elif isinstance(name, str):
        yield from _invalid(f"{path}.name", name, dns.dns1123_subdomain(name))


def _key_errors(path: str, key: object) -> Iterator[FieldError]:
    """The key a variable reads from a ConfigMap or Secret."""
    if key == "":
        yield FieldError(path, "is required")
    elif isinstance(key, str):
        yield from _invalid(path, key, dns.config_key(key))


def _port_errors(path: str, ports: object) -> Iterator[FieldError]:
    names: set[str] = set()
    for index, port in entries(ports):
        where = f"{path}[{index}]"
        name = port.get("name")
        if isinstance(name, str) and name:
            problems = dns.port_name(name)
            yield from _invalid(f"{where}.name", name, problems)
            if not problems and name in names:
                yield FieldError(f"{where}.name", f"duplicate value {quoted(name)}")
            names.add(name)
        container_port = port.get("containerPort")
        if container_port == 0:
            yield FieldError(f"{where}.containerPort", "is required")
        elif _is_int(container_port) and not 0 < container_port < 65536:
            yield FieldError(f"{where}.containerPort", _port_number_problem(container_port))
        host_port = port.get("hostPort")
        if _is_int(host_port) and host_port != 0 and not 0 < host_port < 65536:
            yield FieldError(f"{where}.hostPort", _port_number_problem(host_port))
        protocol = port.get("protocol")
        if isinstance(protocol, str) and protocol and protocol not in PROTOCOLS:
            yield FieldError(f"{where}.protocol", _unsupported(protocol, PROTOCOLS))


def _probe_errors(path: str, probe: Mapping[str, Any], *, readiness: bool) -> Iterator[FieldError]:
    """A probe's rules; a readiness probe may succeed more than once in a row, and never
    ends the container, so it has no grace period of its own."""
    yield from _handler_errors(path, probe, _PROBE_HANDLERS, None)
    for field in _NON_NEGATIVE:
        value = probe.get(field)
        if _is_int(value) and value < 0:
            yield FieldError(f"{path}.{field}", f"invalid value {value}: must be non-negative")
    success = probe.get("successThreshold")
    if not readiness and _is_int(success) and success not in (0, 1):
        # 0 is defaulted to 1 before validation.
        yield FieldError(f"{path}.successThreshold", f"invalid value {success}: must be 1")
    grace = probe.get("terminationGracePeriodSeconds")
    if readiness and grace is not None:
        yield FieldError(
            f"{path}.terminationGracePeriodSeconds",
            f"invalid value {grace}: must not be set for readinessProbes",
        )
    elif _is_int(grace) and grace <= 0:
        yield FieldError(
            f"{path}.terminationGracePeriodSeconds",
            f"invalid value {grace}: must be greater than 0",
        )


def _handler_errors(
    path: str, handler: Mapping[str, Any], kinds: tuple[str, ...], grace_period: int | None
) -> Iterator[FieldError]:
    given = [kind for kind in kinds if handler.get(kind) is not None]
    if not given:
        yield FieldError(path, "must specify a handler type")
        return
    for extra in given[1:]:
        yield FieldError(f"{path}.{extra}", "may not specify more than 1 handler type")
    kind, action = given[0], handler[given[0]]
    if not isinstance(action, dict):
        return
    where = f"{path}.{kind}"
    if kind == "exec" and not action.get("command"):
        yield FieldError(f"{where}.command", "is required")
    elif kind in ("httpGet", "tcpSocket", "grpc"):
        yield from _port_or_name_errors(f"{where}.port", action.get("port"))
    if kind == "httpGet":
        yield from _http_get_errors(where, action)
    elif kind == "sleep" and grace_period is not None:
        seconds = action.get("seconds")
        if _is_int(seconds) and not 0 <= seconds <= grace_period:
            yield FieldError(
                where,
                f"invalid value {seconds}: must be non-negative and less than "
                f"terminationGracePeriodSeconds ({grace_period})",
            )


def _http_get_errors(path: str, action: Mapping[str, Any]) -> Iterator[FieldError]:
    scheme = action.get("scheme")
    if isinstance(scheme, str) and scheme and scheme not in HTTP_SCHEMES:
        yield FieldError(f"{path}.scheme", _unsupported(scheme, HTTP_SCHEMES))
    for _, header in entries(action.get("httpHeaders")):
        name = header.get("name")
        if isinstance(name, str):
            yield from _invalid(f"{path}.httpHeaders", name, dns.http_header_name(name))


def _port_or_name_errors(path: str, port: object) -> Iterator[FieldError]:
    if isinstance(port, str):
        yield from _invalid(path, port, dns.port_name(port))
    elif _is_int(port) and not 0 < port < 65536:
        yield FieldError(path, _port_number_problem(port))


def _invalid(path: str, value: str, problems: list[str]) -> Iterator[FieldError]:
    for problem in problems:
        yield FieldError(path, f"invalid value {quoted(value)}: {problem}")


def _port_number_problem(port: int) -> str:
    return f"invalid value {port}: must be between 1 and 65535, inclusive"


def _unsupported(value: str, supported: tuple[str, ...]) -> str:
    return f"unsupported value {quoted(value)}: supported values: " + ", ".join(
        quoted(s) for s in supported
    )


def _init_forbidden(path: str) -> FieldError:
    return FieldError(path, "may not be set for init containers without restartPolicy=Always")


def entries(items: object) -> Iterator[tuple[int, dict[str, Any]]]:
    """The object entries of a list, with their indexes; a null entry is an empty object, as
    the API server decodes it, and anything else is the schema's to refuse."""
    if isinstance(items, list):
        for index, item in enumerate(items):
            if item is None:
                yield index, {}
            elif isinstance(item, dict):
                yield index, item


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""
