"""An offline model of what the API server refuses in the objects the operator creates.

Written apart from the product on purpose: it restates Kubernetes' rules (names, labels,
quantities, containers, volumes, DNS settings, integer ranges, object sizes) from the API's
documentation, for the fields the operator writes or copies, so the fuzz suite can call an
object "accepted but invalid" without asking the product whether it is valid. The e2e test
``test_fuzz_oracle`` checks a sample of its verdicts against a real API server.

One rule is the operator's own, not the API server's: no pod runs as a kubeflow.org/v1
launcher's account (``<job>-launcher``, which may exec into that job's workers) but that
launcher's own.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from .pod_oracle import declared_fields, pod_spec_problems

INT32 = (0, 2**31 - 1)
LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
SUBDOMAIN = re.compile(rf"{LABEL.pattern}(\.{LABEL.pattern})*")
DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
KEY_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
QUANTITY = re.compile(
    r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
SUFFIX_EXPONENT = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY_POWER = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
MAX_QUANTITY = 2**63 - 1
RESTART_POLICIES = {"Pod": {"Always", "OnFailure", "Never"}, "Job": {"OnFailure", "Never"}}

# The MPIJob's fields, from upstream's Go types (kubeflow/mpi-operator v2beta1 and
# training-operator v1, which this CRD serves with the same fields) plus spec.transport; each
# object by the fields of its own, with the objects below it.
MPIJOB_FIELDS: dict[str, Any] = {
    "apiVersion": None,
    "kind": None,
    "metadata": None,
    "status": None,
    "spec": {
        "slotsPerWorker": None,
        "runLauncherAsWorker": None,
        "sshAuthMountPath": None,
        "launcherCreationPolicy": None,
        "mpiImplementation": None,
        "transport": None,
        "mainContainer": None,
        "cleanPodPolicy": None,
        "runPolicy": {
            "cleanPodPolicy": None,
            "ttlSecondsAfterFinished": None,
            "activeDeadlineSeconds": None,
            "backoffLimit": None,
            "suspend": None,
            "managedBy": None,
            "schedulingPolicy": {
                "minAvailable": None,
                "queue": None,
                "minResources": None,
                "priorityClass": None,
                "scheduleTimeoutSeconds": None,
            },
        },
        "mpiReplicaSpecs": None,  # by replica type: REPLICA_FIELDS
    },
}
REPLICA_FIELDS: dict[str, Any] = {
    "replicas": None,
    "restartPolicy": None,
    "template": {"metadata": "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "spec": None},
}


def problems(obj: Mapping[str, Any]) -> list[str]:
    """What the API server would refuse in one object the operator sends; empty if nothing."""
    found = list(_json_problems(obj))
    if found:
        return found
    obj = _without_nulls(obj)
    kind = obj.get("kind")
    found += _metadata_problems(obj.get("metadata") or {}, kind)
    spec = obj.get("spec") or {}
    metadata_name = (obj.get("metadata") or {}).get("name")
    if kind == "Pod":
        found += _pod_spec_problems("spec", spec, "Pod")
        found += _account_problems("spec", spec, None)
    elif kind == "Job":
        found += _job_problems(spec)
        found += _account_problems(
            "spec.template.spec", (spec.get("template") or {}).get("spec") or {}, metadata_name
        )
    elif kind == "ConfigMap":
        found += _config_map_problems(obj.get("data") or {})
    elif kind == "PodGroup":
        found += _pod_group_problems(spec)
    return found


def unknown_mpijob_fields(job: Any) -> list[str]:
    """The fields of an MPIJob that its CRD does not declare: strict field validation refuses
    them (the pod specs' own are judged in the pods the job renders to)."""
    if not isinstance(job, Mapping):
        return []
    found = list(_unknown("", job, MPIJOB_FIELDS))
    specs = (
        (job.get("spec") or {}).get("mpiReplicaSpecs")
        if isinstance(job.get("spec"), Mapping)
        else None
    )
    for role, replica in specs.items() if isinstance(specs, Mapping) else ():
        found += _unknown(f"spec.mpiReplicaSpecs[{role}]", replica, REPLICA_FIELDS)
    return found


def _unknown(where: str, value: Any, fields: Any) -> Iterator[str]:
    if isinstance(fields, str):
        fields = dict.fromkeys(declared_fields(fields))
    if not isinstance(value, Mapping) or fields is None:
        return
    for name, child in value.items():
        at = f"{where}.{name}" if where else str(name)
        if name not in fields:
            yield f"{at}: unknown field"
        else:
            yield from _unknown(at, child, fields[name])


def grant_problems(obj: Mapping[str, Any]) -> list[str]:
    """What in one object would grant more than the named pods of one job: the API server
    takes a Role rule without ``resourceNames``, and RBAC then applies it to every object of
    its resources in the namespace."""
    if obj.get("kind") != "Role":
        return []
    rules = obj.get("rules") or []
    if not rules:
        return ["a Role without rules"]
    return [
        f"rules[{index}] names no object: it grants every one of its resources"
        for index, rule in enumerate(rules)
        if not rule.get("resourceNames")
    ]


def _without_nulls(value: Any) -> Any:
    """The object as Go decodes it: a null field is the field's zero value, as if absent."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def _json_problems(obj: Any) -> Iterator[str]:
    try:
        json.dumps(obj, allow_nan=False)
    except (TypeError, ValueError) as error:
        yield f"not JSON: {error}"


def _name_problem(value: Any, pattern: re.Pattern[str], limit: int) -> bool:
    return not isinstance(value, str) or len(value) > limit or not pattern.fullmatch(value)


def _metadata_problems(metadata: Mapping[str, Any], kind: Any) -> Iterator[str]:
    name = metadata.get("name")
    if kind == "Service":
        if _name_problem(name, DNS1035, 63):
            yield f"metadata.name {name!r}: not a DNS-1035 label"
    elif kind == "Job":
        # The Job controller labels its pods with the Job's name.
        if _name_problem(name, SUBDOMAIN, 63):
            yield f"metadata.name {name!r}: not a subdomain of at most 63 characters"
    elif _name_problem(name, SUBDOMAIN, 253):
        yield f"metadata.name {name!r}: not a DNS-1123 subdomain"
    namespace = metadata.get("namespace")
    if _name_problem(namespace, LABEL, 63):
        yield f"metadata.namespace {namespace!r}: not a DNS-1123 label"
    yield from _labels(metadata.get("labels"), "metadata.labels")
    yield from _annotations(metadata.get("annotations"), "metadata.annotations")
    yield from _owner_problems(metadata.get("ownerReferences"))


def _owner_problems(references: Any) -> Iterator[str]:
    if references is None:
        return
    if not isinstance(references, list):
        yield "metadata.ownerReferences: not a list"
        return
    for reference in references:
        for field in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(reference, dict) or not reference.get(field):
                yield f"metadata.ownerReferences: {field} empty"
    if sum(1 for r in references if isinstance(r, dict) and r.get("controller")) > 1:
        yield "metadata.ownerReferences: more than one controller"


def _key_problem(key: Any) -> bool:
    if not isinstance(key, str):
        return True
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or _name_problem(prefix, SUBDOMAIN, 253)):
        return True
    return not name or len(name) > 63 or not KEY_NAME.fullmatch(name)


def _labels(labels: Any, where: str) -> Iterator[str]:
    if labels is None:
        return
    if not isinstance(labels, dict):
        yield f"{where}: not a map"
        return
    for key, value in labels.items():
        if _key_problem(key):
            yield f"{where} key {key!r} invalid"
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.fullmatch(value):
            yield f"{where}[{key}] value {value!r} invalid"


def _annotations(annotations: Any, where: str) -> Iterator[str]:
    if annotations is None:
        return
    if not isinstance(annotations, dict):
        yield f"{where}: not a map"
        return
    total = 0
    for key, value in annotations.items():
        if _key_problem(key):
            yield f"{where} key {key!r} invalid"
        if not isinstance(value, str):
            yield f"{where}[{key}] not a string"
            continue
        total += len(key) + len(value)
    if total > 256 * 1024:
        yield f"{where}: larger than 256 KiB"


def _int_problem(value: Any, low: int, high: int) -> bool:
    return isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high


def _job_problems(spec: Mapping[str, Any]) -> Iterator[str]:
    for field in ("backoffLimit", "ttlSecondsAfterFinished"):
        if field in spec and _int_problem(spec[field], *INT32):
            yield f"spec.{field} {spec[field]!r}: not a non-negative int32"
    if "activeDeadlineSeconds" in spec and _int_problem(
        spec["activeDeadlineSeconds"], 0, 2**63 - 1
    ):
        yield f"spec.activeDeadlineSeconds {spec['activeDeadlineSeconds']!r}: out of range"
    template = spec.get("template") or {}
    yield from _owner_problems((template.get("metadata") or {}).get("ownerReferences"))
    yield from _labels((template.get("metadata") or {}).get("labels"), "template labels")
    yield from _annotations(
        (template.get("metadata") or {}).get("annotations"), "template annotations"
    )
    yield from _pod_spec_problems("spec.template.spec", template.get("spec") or {}, "Job")


def _account_problems(where: str, spec: Mapping[str, Any], own: Any) -> Iterator[str]:
    """A pod running as a launcher's account: ``own`` (the launcher Job's name) is allowed."""
    # The API server falls back to the deprecated field when serviceAccountName is empty.
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if isinstance(account, str) and account.endswith("-launcher") and account != own:
        yield f"{where}: runs as {account!r}, a kubeflow.org/v1 launcher's account"


def _pod_spec_problems(where: str, spec: Mapping[str, Any], kind: str) -> Iterator[str]:
    volumes = spec.get("volumes") or []
    if not isinstance(volumes, list):
        yield f"{where}.volumes: not a list"
        volumes = []
    volume_names: set[str] = set()
    for volume in volumes:
        name = volume.get("name") if isinstance(volume, dict) else None
        if _name_problem(name, LABEL, 63):
            yield f"{where}.volumes: name {name!r} not a DNS label"
        elif name in volume_names:
            yield f"{where}.volumes: duplicate name {name!r}"
        if isinstance(name, str):
            volume_names.add(name)
        if isinstance(volume, dict) and len([k for k in volume if k != "name"]) != 1:
            yield f"{where}.volumes[{name}]: not exactly one volume source"
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        yield f"{where}.containers: none"
        containers = []
    init_containers = spec.get("initContainers") or []
    if not isinstance(init_containers, list):
        yield f"{where}.initContainers: not a list"
        init_containers = []
    names: set[str] = set()
    for container in [*init_containers, *containers]:
        yield from _container_problems(where, container, names, volume_names)
    if spec.get("restartPolicy") not in RESTART_POLICIES[kind]:
        yield f"{where}.restartPolicy {spec.get('restartPolicy')!r} not allowed in a {kind}"
    for field, pattern, limit in (
        ("hostname", LABEL, 63),
        ("subdomain", LABEL, 63),
        ("priorityClassName", SUBDOMAIN, 253),
    ):
        if field in spec and spec[field] != "" and _name_problem(spec[field], pattern, limit):
            yield f"{where}.{field} {spec[field]!r} invalid"
    if "schedulerName" in spec and not isinstance(spec["schedulerName"], str):
        yield f"{where}.schedulerName not a string"
    if "hostNetwork" in spec and not isinstance(spec["hostNetwork"], bool):
        yield f"{where}.hostNetwork not a boolean"
    yield from _dns_config_problems(where, spec.get("dnsConfig"))
    yield from _resource_list_problems(f"{where}.overhead", spec.get("overhead"))
    if spec.get("overhead") and not spec.get("runtimeClassName"):
        yield f"{where}.overhead without a RuntimeClass (RuntimeClass admission)"
    # spec.schedulingGroup came with Kubernetes 1.36, after the pinned schema: checked as
    # the 1.37 API server does, then left out of the schema's check.
    group = spec.get("schedulingGroup")
    if group is not None:
        yield from _scheduling_group_problems(f"{where}.schedulingGroup", group)
        spec = {key: value for key, value in spec.items() if key != "schedulingGroup"}
    yield from pod_spec_problems(where, spec)


def _scheduling_group_problems(where: str, group: Any) -> Iterator[str]:
    name = group.get("podGroupName") if isinstance(group, dict) else None
    if not isinstance(group, dict) or set(group) != {"podGroupName"}:
        yield f"{where}: not exactly podGroupName"
    elif _name_problem(name, SUBDOMAIN, 253):
        yield f"{where}.podGroupName {name!r}: not a DNS subdomain"


def _container_problems(
    where: str, container: Any, names: set[str], volumes: set[str]
) -> Iterator[str]:
    if not isinstance(container, dict):
        yield f"{where}: container not an object"
        return
    name = container.get("name")
    if _name_problem(name, LABEL, 63):
        yield f"{where}: container name {name!r} not a DNS label"
    elif name in names:
        yield f"{where}: duplicate container name {name!r}"
    else:
        names.add(name)
    image = container.get("image")
    if not isinstance(image, str) or not image or image != image.strip():
        yield f"{where}.{name}: image {image!r} missing or padded"
    for field in ("command", "args", "env", "volumeMounts"):
        if field in container and not isinstance(container[field], list):
            yield f"{where}.{name}.{field}: not a list"
    mount_paths: set[str] = set()
    for mount in container.get("volumeMounts") or []:
        if not isinstance(mount, dict):
            yield f"{where}.{name}: mount not an object"
            continue
        if mount.get("name") not in volumes:
            yield f"{where}.{name}: mount of unknown volume {mount.get('name')!r}"
        path = mount.get("mountPath")
        if not isinstance(path, str) or not path:
            yield f"{where}.{name}: empty mountPath"
        elif path in mount_paths:
            yield f"{where}.{name}: duplicate mountPath {path!r}"
        else:
            mount_paths.add(path)
    resources = container.get("resources")
    if resources is None:
        return
    if not isinstance(resources, dict):
        yield f"{where}.{name}.resources: not an object"
        return
    requests = yield from _resource_list_problems(
        f"{where}.{name}.requests", resources.get("requests")
    )
    limits = yield from _resource_list_problems(f"{where}.{name}.limits", resources.get("limits"))
    for resource, amount in requests.items():
        if resource in limits and amount > limits[resource]:
            yield f"{where}.{name}: {resource} request above its limit"


def quantity_value(raw: Any) -> Decimal | None:
    """The value the API server reads, or None when it refuses the quantity."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        text = str(raw)
    elif isinstance(raw, float):
        if not math.isfinite(raw):
            return None
        text = repr(raw)
    elif isinstance(raw, str):
        text = raw.strip()  # the API server trims JSON string quantities
    else:
        return None
    match = QUANTITY.fullmatch(text)
    if not match:
        return None
    number_text = match.group(0)[: len(match.group(0)) - len(match.group(3) or "")]
    suffix = match.group(3) or ""
    try:
        number = Decimal(number_text)
        if suffix in BINARY_POWER:
            value = number * Decimal(1024) ** BINARY_POWER[suffix]
        elif suffix in SUFFIX_EXPONENT or suffix == "":
            value = number.scaleb(SUFFIX_EXPONENT.get(suffix, 0))
        else:
            exponent = int(suffix[1:])
            if abs(exponent) > 400:
                return None if number != 0 else Decimal(0)
            value = number.scaleb(exponent)
    except (InvalidOperation, ValueError):
        return None
    return value


def _resource_list_problems(where: str, resources: Any) -> Any:
    """Yields problems; returns the valid amounts (a generator used with ``yield from``)."""
    amounts: dict[str, Decimal] = {}
    if resources is None:
        return amounts
    if not isinstance(resources, dict):
        yield f"{where}: not a map"
        return amounts
    for resource, raw in resources.items():
        value = quantity_value(raw)
        if value is None:
            yield f"{where}[{resource}] {raw!r}: not a quantity"
        elif value < 0:
            yield f"{where}[{resource}] {raw!r}: negative"
        elif abs(value) > MAX_QUANTITY:
            yield f"{where}[{resource}] {raw!r}: beyond 2^63-1"
        else:
            amounts[resource] = value
    return amounts


def _dns_config_problems(where: str, dns_config: Any) -> Iterator[str]:
    if dns_config is None:
        return
    if not isinstance(dns_config, dict):
        yield f"{where}.dnsConfig: not an object"
        return
    searches = dns_config.get("searches") or []
    if not isinstance(searches, list):
        yield f"{where}.dnsConfig.searches: not a list"
        return
    if len(searches) > 32:
        yield f"{where}.dnsConfig.searches: more than 32"
    if all(isinstance(s, str) for s in searches) and len(" ".join(searches)) > 2048:
        yield f"{where}.dnsConfig.searches: more than 2048 characters"
    for search in searches:
        if not isinstance(search, str) or _name_problem(search.removesuffix("."), SUBDOMAIN, 253):
            yield f"{where}.dnsConfig.searches: {search!r} not a domain"


def _config_map_problems(data: Mapping[str, Any]) -> Iterator[str]:
    size = 0
    for key, value in data.items():
        if _name_problem(key, CONFIG_MAP_KEY, 253):
            yield f"data key {key!r} invalid"
        size += len(str(value).encode())
    if size > 1024 * 1024:
        yield f"data: {size} bytes, more than 1 MiB"


def _pod_group_problems(spec: Mapping[str, Any]) -> Iterator[str]:
    if "schedulingPolicy" in spec:
        yield from _native_pod_group_problems(spec)
        return
    for field in ("minMember", "scheduleTimeoutSeconds"):
        if field in spec and _int_problem(spec[field], *INT32):
            yield f"spec.{field} {spec[field]!r}: not a non-negative int32"
    yield from _resource_list_problems("spec.minResources", spec.get("minResources"))


def _native_pod_group_problems(spec: Mapping[str, Any]) -> Iterator[str]:
    """A scheduling.k8s.io PodGroup, as Kubernetes 1.37 validates one."""
    policy = spec["schedulingPolicy"]
    if policy == {"basic": {}}:
        pass
    elif not isinstance(policy, dict) or set(policy) != {"gang"}:
        yield "spec.schedulingPolicy: not exactly one of basic and gang"
    elif _int_problem((policy["gang"] or {}).get("minCount"), 1, INT32[1]):
        yield f"spec.schedulingPolicy.gang.minCount {policy['gang']!r}: not a positive int32"
    name = spec.get("priorityClassName")
    if name is not None and _name_problem(name, SUBDOMAIN, 253):
        yield f"spec.priorityClassName {name!r}: not a DNS subdomain"
    unknown = set(spec) - {"schedulingPolicy", "priorityClassName"}
    if unknown:
        yield f"spec: unknown fields {sorted(unknown)}"
