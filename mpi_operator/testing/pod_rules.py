"""Pod specs the API server refuses or accepts, one rule each, for the unit tests of the
template checks and for the e2e test that a real API server agrees with every verdict.

A case changes a valid pod spec (a worker's: one container, no init containers) and names
where the problem is, relative to the pod spec, or nothing when the spec stays valid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Change = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class PodRuleCase:
    name: str
    change: Change
    path: str | None
    """Where the problem is, e.g. ``containers[0].env[0].name``; None when there is none."""

    def applied(self, pod_spec: dict[str, Any]) -> dict[str, Any]:
        self.change(pod_spec)
        return pod_spec


def main_container(**fields: Any) -> Change:
    return lambda spec: spec["containers"][0].update(fields)


def pod(**fields: Any) -> Change:
    return lambda spec: spec.update(fields)


def volumes(*items: dict[str, Any]) -> Change:
    """Volumes put first, before any the spec has (the pi examples' /tmp), so each keeps its
    index whatever the base spec."""
    return lambda spec: spec.update(volumes=[*items, *spec.get("volumes", [])])


def sidecar(**fields: Any) -> Change:
    """A second container with its own fields."""
    return lambda spec: spec["containers"].append({"name": "sidecar", "image": "busybox", **fields})


def init_container(**fields: Any) -> Change:
    return lambda spec: spec.setdefault("initContainers", []).append(
        {"name": "init", "image": "busybox", **fields}
    )


def both(*changes: Change) -> Change:
    def apply(spec: dict[str, Any]) -> None:
        for change in changes:
            change(spec)

    return apply


def _port(**fields: Any) -> dict[str, Any]:
    return {"containerPort": 8080, **fields}


_EXEC = {"exec": {"command": ["true"]}}

REFUSED: list[PodRuleCase] = [
    # -- types, required fields and ranges from the schema ----------------------------------
    PodRuleCase(
        "env name a number", main_container(env=[{"name": 1}]), "containers[0].env[0].name"
    ),
    PodRuleCase("env entry a number", main_container(env=[1]), "containers[0].env[0]"),
    PodRuleCase(
        "env entry without a name",
        main_container(env=[{"value": "x"}]),
        "containers[0].env[0].name",
    ),
    PodRuleCase("env entry null", main_container(env=[None]), "containers[0].env[0].name"),
    PodRuleCase(
        "env value a number",
        main_container(env=[{"name": "A", "value": 5}]),
        "containers[0].env[0].value",
    ),
    PodRuleCase("command a string", main_container(command="mpirun"), "containers[0].command"),
    PodRuleCase("args of numbers", main_container(args=[1]), "containers[0].args[0]"),
    PodRuleCase("hostNetwork a string", pod(hostNetwork="yes"), "hostNetwork"),
    PodRuleCase(
        "runAsUser a string",
        main_container(securityContext={"runAsUser": "1000"}),
        "containers[0].securityContext.runAsUser",
    ),
    PodRuleCase(
        "runAsUser a fraction",
        main_container(securityContext={"runAsUser": 1.5}),
        "containers[0].securityContext.runAsUser",
    ),
    PodRuleCase(
        "grace period a boolean",
        pod(terminationGracePeriodSeconds=True),
        "terminationGracePeriodSeconds",
    ),
    PodRuleCase(
        "port beyond int32",
        main_container(ports=[_port(containerPort=2**31)]),
        "containers[0].ports[0].containerPort",
    ),
    PodRuleCase(
        "port without containerPort",
        main_container(ports=[{"name": "web"}]),
        "containers[0].ports[0].containerPort",
    ),
    PodRuleCase("nodeSelector value a number", pod(nodeSelector={"zone": 1}), "nodeSelector[zone]"),
    PodRuleCase("affinity a string", pod(affinity="anywhere"), "affinity"),
    PodRuleCase(
        "toleration seconds a string",
        pod(
            tolerations=[
                {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": "60"}
            ]
        ),
        "tolerations[0].tolerationSeconds",
    ),
    PodRuleCase(
        "hostPath without a path",
        volumes({"name": "v", "hostPath": {}}),
        "volumes[0].hostPath.path",
    ),
    PodRuleCase(
        "configMap item without a path",
        volumes({"name": "v", "configMap": {"name": "c", "items": [{"key": "k"}]}}),
        "volumes[0].configMap.items[0].path",
    ),
    PodRuleCase(
        "secret mode a string",
        volumes({"name": "v", "secret": {"secretName": "s", "defaultMode": "0644"}}),
        "volumes[0].secret.defaultMode",
    ),
    PodRuleCase(
        "nfs server a number",
        volumes({"name": "v", "nfs": {"server": 1, "path": "/"}}),
        "volumes[0].nfs.server",
    ),
    PodRuleCase(
        "seccomp without a type",
        main_container(securityContext={"seccompProfile": {}}),
        "containers[0].securityContext.seccompProfile.type",
    ),
    PodRuleCase(
        "capabilities a string",
        main_container(securityContext={"capabilities": {"drop": "ALL"}}),
        "containers[0].securityContext.capabilities.drop",
    ),
    PodRuleCase("lifecycle a list", main_container(lifecycle=[]), "containers[0].lifecycle"),
    # -- env ----------------------------------------------------------------------------------
    *(
        PodRuleCase(
            f"env name {what}",
            main_container(env=[{"name": name, "value": "x"}]),
            "containers[0].env[0].name",
        )
        for what, name in (
            ("empty", ""),
            ("with '='", "A=B"),
            ("not ASCII", "NAMÉ"),
            ("with a tab", "A\tB"),
        )
    ),
    PodRuleCase(
        "valueFrom without a source",
        main_container(env=[{"name": "A", "valueFrom": {}}]),
        "containers[0].env[0].valueFrom",
    ),
    PodRuleCase(
        "valueFrom with two sources",
        main_container(
            env=[
                {
                    "name": "A",
                    "valueFrom": {
                        "fieldRef": {"fieldPath": "metadata.name"},
                        "secretKeyRef": {"name": "s", "key": "k"},
                    },
                }
            ]
        ),
        "containers[0].env[0].valueFrom",
    ),
    PodRuleCase(
        "value and valueFrom",
        main_container(
            env=[
                {
                    "name": "A",
                    "value": "x",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                }
            ]
        ),
        "containers[0].env[0].valueFrom",
    ),
    PodRuleCase(
        "configMapKeyRef without a key",
        main_container(env=[{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c"}}}]),
        "containers[0].env[0].valueFrom.configMapKeyRef.key",
    ),
    PodRuleCase(
        "configMapKeyRef key with a space",
        main_container(
            env=[{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "a b"}}}]
        ),
        "containers[0].env[0].valueFrom.configMapKeyRef.key",
    ),
    PodRuleCase(
        "secretKeyRef name not a subdomain",
        main_container(
            env=[{"name": "A", "valueFrom": {"secretKeyRef": {"name": "Bad_Name", "key": "k"}}}]
        ),
        "containers[0].env[0].valueFrom.secretKeyRef.name",
    ),
    PodRuleCase(
        "envFrom without a source",
        main_container(envFrom=[{"prefix": "P_"}]),
        "containers[0].envFrom[0]",
    ),
    PodRuleCase("envFrom entry null", main_container(envFrom=[None]), "containers[0].envFrom[0]"),
    PodRuleCase(
        "envFrom with two sources",
        main_container(envFrom=[{"configMapRef": {"name": "c"}, "secretRef": {"name": "s"}}]),
        "containers[0].envFrom[0]",
    ),
    PodRuleCase(
        "envFrom prefix with '='",
        main_container(envFrom=[{"prefix": "P=", "configMapRef": {"name": "c"}}]),
        "containers[0].envFrom[0].prefix",
    ),
    PodRuleCase(
        "envFrom configMapRef without a name",
        main_container(envFrom=[{"configMapRef": {}}]),
        "containers[0].envFrom[0].configMapRef.name",
    ),
    # -- ports --------------------------------------------------------------------------------
    *(
        PodRuleCase(
            f"containerPort {port}",
            main_container(ports=[_port(containerPort=port)]),
            "containers[0].ports[0].containerPort",
        )
        for port in (0, 65536, -1)
    ),
    PodRuleCase(
        "hostPort 70000",
        main_container(ports=[_port(hostPort=70000)]),
        "containers[0].ports[0].hostPort",
    ),
    PodRuleCase(
        "protocol HTTP",
        main_container(ports=[_port(protocol="HTTP")]),
        "containers[0].ports[0].protocol",
    ),
    *(
        PodRuleCase(
            f"port name {what}",
            main_container(ports=[_port(name=name)]),
            "containers[0].ports[0].name",
        )
        for what, name in (
            ("with an underscore", "web_1"),
            ("of 16 characters", "a" * 16),
            ("without a letter", "8080"),
            ("with '--'", "a--b"),
        )
    ),
    PodRuleCase(
        "port names twice",
        main_container(ports=[_port(name="web"), _port(containerPort=8081, name="web")]),
        "containers[0].ports[1].name",
    ),
    PodRuleCase(
        "host port twice in a pod",
        both(
            main_container(ports=[_port(hostPort=9000)]),
            sidecar(ports=[_port(containerPort=9001, hostPort=9000)]),
        ),
        "containers[1].ports[0].hostPort",
    ),
    PodRuleCase(
        "host port not the container port with the host's network",
        both(pod(hostNetwork=True), main_container(ports=[_port(hostPort=9000)])),
        "containers[0].ports[0].hostPort",
    ),
    # -- probes and hooks ---------------------------------------------------------------------
    PodRuleCase(
        "probe without a handler",
        main_container(livenessProbe={"periodSeconds": 5}),
        "containers[0].livenessProbe",
    ),
    PodRuleCase(
        "probe with two handlers",
        main_container(livenessProbe={**_EXEC, "tcpSocket": {"port": 80}}),
        "containers[0].livenessProbe.tcpSocket",
    ),
    PodRuleCase(
        "exec probe without a command",
        main_container(readinessProbe={"exec": {"command": []}}),
        "containers[0].readinessProbe.exec.command",
    ),
    PodRuleCase(
        "httpGet port 0",
        main_container(readinessProbe={"httpGet": {"port": 0}}),
        "containers[0].readinessProbe.httpGet.port",
    ),
    PodRuleCase(
        "httpGet port name invalid",
        main_container(readinessProbe={"httpGet": {"port": "Web"}}),
        "containers[0].readinessProbe.httpGet.port",
    ),
    PodRuleCase(
        "httpGet port a list",
        main_container(readinessProbe={"httpGet": {"port": [80]}}),
        "containers[0].readinessProbe.httpGet.port",
    ),
    PodRuleCase(
        "httpGet scheme FTP",
        main_container(readinessProbe={"httpGet": {"port": 80, "scheme": "FTP"}}),
        "containers[0].readinessProbe.httpGet.scheme",
    ),
    PodRuleCase(
        "httpGet header name with a space",
        main_container(
            readinessProbe={"httpGet": {"port": 80, "httpHeaders": [{"name": "a b", "value": "x"}]}}
        ),
        "containers[0].readinessProbe.httpGet.httpHeaders",
    ),
    PodRuleCase(
        "tcpSocket without a port",
        main_container(readinessProbe={"tcpSocket": {}}),
        "containers[0].readinessProbe.tcpSocket.port",
    ),
    PodRuleCase(
        "grpc port 70000",
        main_container(startupProbe={"grpc": {"port": 70000}}),
        "containers[0].startupProbe.grpc.port",
    ),
    PodRuleCase(
        "liveness successThreshold 2",
        main_container(livenessProbe={**_EXEC, "successThreshold": 2}),
        "containers[0].livenessProbe.successThreshold",
    ),
    PodRuleCase(
        "negative periodSeconds",
        main_container(livenessProbe={**_EXEC, "periodSeconds": -1}),
        "containers[0].livenessProbe.periodSeconds",
    ),
    PodRuleCase(
        "probe grace period 0",
        main_container(livenessProbe={**_EXEC, "terminationGracePeriodSeconds": 0}),
        "containers[0].livenessProbe.terminationGracePeriodSeconds",
    ),
    PodRuleCase(
        "readiness probe with a grace period",
        main_container(readinessProbe={**_EXEC, "terminationGracePeriodSeconds": 5}),
        "containers[0].readinessProbe.terminationGracePeriodSeconds",
    ),
    PodRuleCase(
        "preStop without a handler",
        main_container(lifecycle={"preStop": {}}),
        "containers[0].lifecycle.preStop",
    ),
    PodRuleCase(
        "preStop sleep beyond the grace period",
        main_container(lifecycle={"preStop": {"sleep": {"seconds": 31}}}),
        "containers[0].lifecycle.preStop.sleep",
    ),
    PodRuleCase(
        "postStart with two handlers",
        main_container(lifecycle={"postStart": {**_EXEC, "sleep": {"seconds": 1}}}),
        "containers[0].lifecycle.postStart.sleep",
    ),
    PodRuleCase(
        "probe on an init container",
        init_container(readinessProbe=_EXEC),
        "initContainers[0].readinessProbe",
    ),
    PodRuleCase(
        "lifecycle on an init container",
        init_container(lifecycle={"preStop": _EXEC}),
        "initContainers[0].lifecycle",
    ),
]

ACCEPTED: list[PodRuleCase] = [
    PodRuleCase(
        "env of every source",
        main_container(
            env=[
                {"name": "A", "value": "x"},
                {"name": "my.var-1 with spaces", "value": ""},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                {
                    "name": "C",
                    "valueFrom": {
                        "configMapKeyRef": {"name": "c", "key": "k.e_y-1", "optional": True}
                    },
                },
                {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                {"name": "N", "value": None},
            ]
        ),
        None,
    ),
    PodRuleCase(
        "envFrom of both kinds",
        main_container(
            envFrom=[
                {"prefix": "P_", "configMapRef": {"name": "c"}},
                {"secretRef": {"name": "s", "optional": True}},
            ]
        ),
        None,
    ),
    PodRuleCase(
        "ports of every protocol",
        main_container(
            ports=[
                _port(name="web"),
                _port(containerPort=53, protocol="UDP", hostPort=5353),
                _port(containerPort=9, protocol="SCTP"),
            ]
        ),
        None,
    ),
    PodRuleCase(
        "host network ports",
        both(
            pod(hostNetwork=True),
            main_container(ports=[_port(hostPort=8080), _port(containerPort=8081)]),
        ),
        None,
    ),
    PodRuleCase(
        "probes of every kind",
        main_container(
            livenessProbe={
                "httpGet": {
                    "port": "web",
                    "path": "/healthz",
                    "scheme": "HTTPS",
                    "httpHeaders": [{"name": "X-A", "value": "1"}],
                },
                "successThreshold": 1,
            },
            readinessProbe={"tcpSocket": {"port": 8080}, "successThreshold": 3, "periodSeconds": 0},
            startupProbe={
                "grpc": {"port": 9090},
                "failureThreshold": 30,
                "terminationGracePeriodSeconds": 10,
            },
            ports=[_port(name="web")],
        ),
        None,
    ),
    PodRuleCase(
        "hooks",
        main_container(lifecycle={"postStart": _EXEC, "preStop": {"sleep": {"seconds": 30}}}),
        None,
    ),
    PodRuleCase(
        "hooks within a longer grace period",
        both(
            pod(terminationGracePeriodSeconds=120),
            main_container(lifecycle={"preStop": {"sleep": {"seconds": 100}}}),
        ),
        None,
    ),
    PodRuleCase(
        "a sidecar with probes",
        init_container(restartPolicy="Always", readinessProbe=_EXEC, lifecycle={"preStop": _EXEC}),
        None,
    ),
    PodRuleCase(
        "a restricted security context",
        both(
            pod(
                securityContext={
                    "runAsNonRoot": True,
                    "seccompProfile": {"type": "RuntimeDefault"},
                    "fsGroup": 1000,
                }
            ),
            main_container(
                securityContext={
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                    "readOnlyRootFilesystem": True,
                    "runAsUser": 1000,
                }
            ),
        ),
        None,
    ),
    PodRuleCase(
        "volumes of many kinds",
        volumes(
            {
                "name": "cm",
                "configMap": {
                    "name": "c",
                    "items": [{"key": "k", "path": "p"}],
                    "defaultMode": 420,
                },
            },
            {"name": "sec", "secret": {"secretName": "s"}},
            {
                "name": "down",
                "downwardAPI": {
                    "items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]
                },
            },
            {
                "name": "proj",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}
                    ]
                },
            },
            {"name": "host", "hostPath": {"path": "/tmp", "type": "Directory"}},
            {"name": "nfs", "nfs": {"server": "nfs.example", "path": "/data"}},
            {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
        ),
        None,
    ),
    PodRuleCase(
        "scheduling fields",
        pod(
            nodeSelector={"zone": "a"},
            tolerations=[
                {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
            ],
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a"]}
                                ]
                            }
                        ]
                    }
                }
            },
        ),
        None,
    ),
]
