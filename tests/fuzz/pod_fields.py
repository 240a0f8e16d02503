"""Hypothesis strategies for the parts of a pod template beyond names, images and resources:
env, envFrom, ports, probes, lifecycle hooks, security contexts and volumes of every type.

Valid values come from fixed lists the API server is known to accept (``pod_rules.ACCEPTED``
shows it with dry runs); hostile ones mix wrong types, missing required fields and values
just outside the API server's rules, so that each draws a verdict both the operator and the
oracle can give.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

from mpi_operator.testing.pod_rules import ACCEPTED, REFUSED, PodRuleCase

from .pod_oracle import SCHEMA

PORT_NAME_ALPHABET = "abz09-_A"
NAME_FIELD = {"fieldPath": "metadata.name"}

# -- valid ------------------------------------------------------------------------------------

GOOD_ENV = [
    {"name": "OMP_NUM_THREADS", "value": "1"},
    {"name": "with spaces.and-dots", "value": ""},
    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
    {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "config", "key": "k.e-y_1"}}},
    {"name": "S", "valueFrom": {"secretKeyRef": {"name": "secret", "key": "k", "optional": True}}},
]
GOOD_ENV_FROM = [
    {"configMapRef": {"name": "config"}},
    {"prefix": "P_", "secretRef": {"name": "secret", "optional": True}},
]
GOOD_PROBES = [
    {"exec": {"command": ["true"]}, "periodSeconds": 5},
    {"tcpSocket": {"port": 2222}, "failureThreshold": 3},
    {"httpGet": {"port": "metrics", "path": "/healthz", "scheme": "HTTPS"}},
    {"grpc": {"port": 9090}, "successThreshold": 1, "terminationGracePeriodSeconds": 5},
]
GOOD_LIFECYCLE = [
    {"preStop": {"sleep": {"seconds": 5}}},
    {"postStart": {"exec": {"command": ["true"]}}, "preStop": {"tcpSocket": {"port": 2222}}},
]
GOOD_CONTAINER_SECURITY = [
    {"runAsUser": 1000, "runAsNonRoot": True},
    {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
        "readOnlyRootFilesystem": True,
    },
]
GOOD_POD_SECURITY = [{"fsGroup": 1000, "runAsNonRoot": True}, {"sysctls": []}]
GOOD_VOLUMES = [
    {"name": "extra-cm", "configMap": {"name": "c", "items": [{"key": "k", "path": "p"}]}},
    {"name": "extra-secret", "secret": {"secretName": "s", "defaultMode": 256}},
    {"name": "extra-down", "downwardAPI": {"items": [{"path": "n", "fieldRef": NAME_FIELD}]}},
    {"name": "extra-token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
    {"name": "extra-host", "hostPath": {"path": "/tmp"}},
    {"name": "extra-nfs", "nfs": {"server": "nfs.example", "path": "/data", "readOnly": True}},
    {"name": "extra-claim", "persistentVolumeClaim": {"claimName": "data"}},
]


def _pick(values: list[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.sampled_from(values).map(copy.deepcopy)


@st.composite
def good_container_fields(draw: st.DrawFn) -> dict[str, Any]:
    """Fields of a role's main container, each drawn or not. Its ports are named so that the
    probes that name a port find one."""
    fields: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        fields["env"] = draw(st.lists(_pick(GOOD_ENV), max_size=3))
    if draw(st.integers(0, 5)) == 0:
        fields["envFrom"] = draw(st.lists(_pick(GOOD_ENV_FROM), max_size=2))
    if draw(st.integers(0, 3)) == 0:
        fields["ports"] = [{"containerPort": 2222, "name": "ssh"}, {"containerPort": 9090}]
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if draw(st.integers(0, 5)) == 0:
            fields[probe] = draw(_pick(GOOD_PROBES))
            if probe == "readinessProbe":
                # Only probes that can end the container have a grace period.
                fields[probe].pop("terminationGracePeriodSeconds", None)
    if draw(st.integers(0, 5)) == 0:
        fields["lifecycle"] = draw(_pick(GOOD_LIFECYCLE))
    if draw(st.integers(0, 4)) == 0:
        fields["securityContext"] = draw(_pick(GOOD_CONTAINER_SECURITY))
    return fields


@st.composite
def good_pod_fields(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if draw(st.integers(0, 4)) == 0:
        fields["securityContext"] = draw(_pick(GOOD_POD_SECURITY))
    return fields


def good_extra_volumes() -> st.SearchStrategy[list[dict[str, Any]]]:
    """Volumes of other kinds than emptyDir, not mounted."""
    return st.one_of(
        st.just([]), st.lists(_pick(GOOD_VOLUMES), max_size=3, unique_by=lambda v: v["name"])
    )


# -- hostile ----------------------------------------------------------------------------------


def _maybe(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


def _env_name() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.text(max_size=8),
        st.sampled_from(["A=B", "", "A B", "NAMÉ", "a\tb", "PATH", "1X"]),
        st.integers(),
        st.none(),
    )


def _key_selector() -> st.SearchStrategy[Any]:
    return st.one_of(
        _maybe(
            name=st.sampled_from(["s", "Bad_Name", "", None, 1]),
            key=st.sampled_from(["k", "a b", "..x", ".", "", None, "x" * 254]),
            optional=st.sampled_from([True, "yes"]),
        ),
        st.just("ref"),
    )


def _env_entry() -> st.SearchStrategy[Any]:
    value_from = st.one_of(
        _maybe(
            fieldRef=st.sampled_from([{"fieldPath": "metadata.name"}, {}, "x"]),
            resourceFieldRef=st.sampled_from([{"resource": "limits.memory"}, {"resource": 1}]),
            configMapKeyRef=_key_selector(),
            secretKeyRef=_key_selector(),
        ),
        st.sampled_from(["x", [], None]),
    )
    entry = _maybe(
        name=_env_name(),
        value=st.one_of(st.text(max_size=4), st.integers(), st.none()),
        valueFrom=value_from,
    )
    return st.one_of(entry, _pick(GOOD_ENV), st.sampled_from([1, "A=1", None, []]))


def _env_from_entry() -> st.SearchStrategy[Any]:
    reference = st.one_of(_maybe(name=st.sampled_from(["c", "Bad_Name", "", None])), st.just("c"))
    return st.one_of(
        _maybe(prefix=_env_name(), configMapRef=reference, secretRef=reference),
        st.sampled_from([1, "x", None]),
    )


def _port_number() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.integers(-1, 65537), st.sampled_from([0, 65535, 65536, 2**31, "80", 1.5, None, True])
    )


def _port_name() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.text(PORT_NAME_ALPHABET, max_size=17), st.sampled_from(["web", "ssh", 7, None])
    )


def _port() -> st.SearchStrategy[Any]:
    return st.one_of(
        _maybe(
            containerPort=_port_number(),
            hostPort=st.one_of(st.sampled_from([0, 2222, 9000]), _port_number()),
            name=_port_name(),
            protocol=st.sampled_from(["TCP", "UDP", "SCTP", "", "HTTP", "tcp", 1, None]),
            hostIP=st.sampled_from(["", "127.0.0.1"]),
        ),
        st.sampled_from([80, "80", None]),
    )


def _handler(*kinds: str) -> st.SearchStrategy[Any]:
    port_or_name = st.one_of(_port_number(), _port_name())
    actions: dict[str, st.SearchStrategy[Any]] = {
        "exec": st.sampled_from([{"command": ["true"]}, {"command": []}, {}, {"command": "true"}]),
        "httpGet": _maybe(
            port=port_or_name,
            path=st.sampled_from(["/", "", 1]),
            scheme=st.sampled_from(["HTTP", "HTTPS", "", "FTP", "http"]),
            httpHeaders=st.sampled_from(
                [[{"name": n, "value": "1"}] for n in ("X-A", "a b", None)]
            ),
        ),
        "tcpSocket": _maybe(port=port_or_name),
        "grpc": _maybe(port=_port_number(), service=st.sampled_from(["", "health"])),
        "sleep": _maybe(seconds=st.one_of(st.integers(-2, 40), st.sampled_from(["5", None]))),
    }
    return _maybe(**{kind: actions[kind] for kind in kinds})


def _probe() -> st.SearchStrategy[Any]:
    thresholds = st.one_of(st.integers(-2, 3), st.sampled_from(["1", 1.0]))
    return st.one_of(
        st.builds(
            lambda handler, extra: {**handler, **extra},
            _handler("exec", "httpGet", "tcpSocket", "grpc"),
            _maybe(
                initialDelaySeconds=thresholds,
                periodSeconds=thresholds,
                successThreshold=thresholds,
                failureThreshold=thresholds,
                terminationGracePeriodSeconds=st.one_of(st.integers(-1, 2), st.none()),
            ),
        ),
        _pick(GOOD_PROBES),
        st.sampled_from(["exec", []]),
    )


def _lifecycle() -> st.SearchStrategy[Any]:
    hook = _handler("exec", "httpGet", "tcpSocket", "sleep")
    return st.one_of(_maybe(postStart=hook, preStop=hook), st.sampled_from(["x", []]))


WRONG_CONTAINER_SECURITY = [
    {"runAsUser": "1000"},
    {"runAsUser": 1.5},
    {"privileged": "yes"},
    {"capabilities": {"drop": "ALL"}},
    {"capabilities": {"add": [1]}},
    {"seccompProfile": {}},
    {"seccompProfile": {"type": 1}},
    {"readOnlyRootFilesystem": "true"},
    "restricted",
]
WRONG_POD_SECURITY = [
    {"fsGroup": "1000"},
    {"sysctls": [{"name": "net.core.somaxconn"}]},
    {"supplementalGroups": "1"},
    {"runAsNonRoot": 1},
    [],
]


def _volume_sources() -> list[dict[str, Any]]:
    """For every volume type of the schema: the source not an object, and (when it has
    required fields) missing them, or with the first of them of a wrong type."""
    definitions = json.loads(SCHEMA.read_text())["definitions"]
    volumes: list[dict[str, Any]] = []
    for source, node in definitions["io.k8s.api.core.v1.Volume"]["properties"].items():
        if source == "name":
            continue
        volumes.append({"name": "v", source: "x"})
        required = definitions[node["$ref"]].get("required", [])
        if required:
            volumes.append({"name": "v", source: {}})
            volumes.append({"name": "v", source: {required[0]: {"x": 1}}})
    return volumes


VOLUME_SOURCES = _volume_sources()


def container_mutations() -> list[tuple[str, st.SearchStrategy[Any]]]:
    """(field of a role's main container, hostile value)."""
    return [
        ("env", st.lists(_env_entry(), min_size=1, max_size=3)),
        ("envFrom", st.lists(_env_from_entry(), min_size=1, max_size=2)),
        ("ports", st.lists(_port(), min_size=1, max_size=3)),
        ("livenessProbe", _probe()),
        ("readinessProbe", _probe()),
        ("startupProbe", _probe()),
        ("lifecycle", _lifecycle()),
        ("securityContext", st.sampled_from(WRONG_CONTAINER_SECURITY)),
    ]


def pod_mutations() -> list[tuple[str, st.SearchStrategy[Any]]]:
    """(field of a role's pod spec, hostile value)."""
    return [
        ("securityContext", st.sampled_from(WRONG_POD_SECURITY)),
        ("volumes", st.lists(st.sampled_from(VOLUME_SOURCES), min_size=1, max_size=1)),
        (
            "terminationGracePeriodSeconds",
            st.one_of(st.integers(0, 60), st.sampled_from(["30", 1.5])),
        ),
        # Accounts: kubeflow.org/v1 launchers' and others; a number is the schema's to refuse.
        *(
            (field, st.sampled_from(["default", "runner", "test-launcher", "x-launcher", 5]))
            for field in ("serviceAccountName", "serviceAccount")
        ),
        (
            "initContainers",
            st.builds(
                lambda probe, hook: [{"name": "init", "image": "busybox", **probe, **hook}],
                _maybe(readinessProbe=_probe(), restartPolicy=st.sampled_from(["Always", "Never"])),
                _maybe(lifecycle=_lifecycle()),
            ),
        ),
    ]


def rule_cases() -> st.SearchStrategy[PodRuleCase]:
    """A change of the pod-rule table, refused or accepted."""
    return st.sampled_from([*REFUSED, *ACCEPTED])
