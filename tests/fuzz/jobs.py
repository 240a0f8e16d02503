"""Hypothesis strategies for hostile MPIJob manifests.

An example starts as a valid job drawn from the whole space the operator supports (roles,
implementations, policies, gang settings, volumes, resources, labels), then takes zero to a
few mutations: a field set to a hostile value (wrong type, out of range, malformed name or
quantity, a clash with the operator's own volumes), or the YAML text attacked (alias bombs,
recursive anchors, deep nesting, NaN, binary tags, several or no documents). About a third
of the examples stay unmutated, so valid rendering is exercised as hard as refusal.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from hypothesis import strategies as st

from mpi_operator.testing.pod_rules import PodRuleCase

from .pod_fields import (
    container_mutations,
    good_container_fields,
    good_extra_volumes,
    good_pod_fields,
    pod_mutations,
    rule_cases,
)

LOWER = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
MAX_EXAMPLE_WORKERS = 40
"""Worker counts of valid examples; the edges (0, 20,000, 2^31) come from mutations."""


@dataclass(frozen=True)
class Example:
    """One input: the manifest's text and the render flags."""

    text: str
    gang_scheduling: str
    cluster_domain: str

    def flags(self) -> list[str]:
        flags = []
        if self.gang_scheduling:
            flags += ["--gang-scheduling", self.gang_scheduling]
        if self.cluster_domain:
            flags += ["--cluster-domain", self.cluster_domain]
        return flags


# -- valid values ------------------------------------------------------------------------------


def dns_label(max_size: int = 20) -> st.SearchStrategy[str]:
    return st.builds(
        lambda first, middle, last: (first + middle)[: max_size - 1] + last,
        st.sampled_from(LOWER),
        st.text(LOWER + DIGITS + "-", max_size=max(0, max_size - 2)),
        st.sampled_from(LOWER + DIGITS),
    )


def good_quantity() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(["100m", "250m", "1", "2", "1.5", "512Mi", "1Gi", "2G", "1e3", "0"]),
        st.integers(min_value=0, max_value=8),
    )


@st.composite
def good_resources(draw: st.DrawFn) -> dict[str, Any]:
    """Requests no larger than limits: limits are the requests, sometimes doubled."""
    requests = {
        name: draw(st.sampled_from(amounts))
        for name, amounts in (("cpu", ["100m", "500m", "1", 2]), ("memory", ["64Mi", "1Gi"]))
        if draw(st.booleans())
    }
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if draw(st.booleans()):
        resources["limits"] = {name: "4" if name == "cpu" else "2Gi" for name in requests} or {
            "cpu": draw(good_quantity())
        }
    return resources


@st.composite
def good_pod_spec(draw: st.DrawFn, role: str) -> dict[str, Any]:
    volume_names = draw(st.lists(dns_label(10), max_size=2, unique=True))
    volume_names = [v for v in volume_names if v not in ("ssh-auth", "mpi-job-config")]
    mounts = [{"name": v, "mountPath": f"/mnt/{i}"} for i, v in enumerate(volume_names)]
    main: dict[str, Any] = {"name": role, "image": "mpioperator/mpi-pi:openmpi"}
    if draw(st.booleans()):
        main["resources"] = draw(good_resources())
    if mounts:
        main["volumeMounts"] = mounts
    if draw(st.booleans()):
        main["command"] = ["mpirun"] if role == "launcher" else ["/usr/sbin/sshd", "-De"]
    containers = [main]
    if draw(st.integers(0, 3)) == 0:
        containers.append({"name": f"{role}-sidecar", "image": "busybox"})
    main.update(draw(good_container_fields()))
    spec: dict[str, Any] = {"containers": containers}
    volumes = [{"name": v, "emptyDir": {}} for v in volume_names]
    volumes += draw(good_extra_volumes())
    if volumes:
        spec["volumes"] = volumes
    spec.update(draw(good_pod_fields()))
    if draw(st.integers(0, 4)) == 0:
        spec["initContainers"] = [{"name": "init", "image": "busybox"}]
    if draw(st.integers(0, 4)) == 0:
        spec["hostNetwork"] = True
    if draw(st.integers(0, 3)) == 0:
        spec["priorityClassName"] = draw(st.sampled_from(["high", "low"]))
    if draw(st.integers(0, 5)) == 0:
        spec["dnsConfig"] = {"searches": draw(st.lists(dns_label(10), max_size=3))}
    return spec


@st.composite
def good_template(draw: st.DrawFn, role: str) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": draw(good_pod_spec(role))}
    if draw(st.integers(0, 2)) == 0:
        labels = draw(st.dictionaries(dns_label(10), dns_label(10), max_size=2))
        annotations = draw(st.dictionaries(dns_label(10), st.text(max_size=20), max_size=2))
        template["metadata"] = {"labels": labels, "annotations": annotations}
    return template


@st.composite
def valid_job(draw: st.DrawFn) -> dict[str, Any]:
    workers = draw(st.integers(0, MAX_EXAMPLE_WORKERS))
    specs: dict[str, Any] = {
        "Launcher": {"replicas": 1, "template": draw(good_template("launcher"))}
    }
    if workers:
        specs["Worker"] = {"replicas": workers, "template": draw(good_template("worker"))}
    spec: dict[str, Any] = {"mpiReplicaSpecs": specs}
    optional: dict[str, st.SearchStrategy[Any]] = {
        "slotsPerWorker": st.integers(0, 8),
        "runLauncherAsWorker": st.booleans(),
        "sshAuthMountPath": st.sampled_from(["/root/.ssh", "/home/mpiuser/.ssh"]),
        "launcherCreationPolicy": st.sampled_from(["AtStartup", "WaitForWorkersReady"]),
        "mpiImplementation": st.sampled_from(["OpenMPI", "Intel", "MPICH"]),
    }
    for field, strategy in optional.items():
        if draw(st.booleans()):
            spec[field] = draw(strategy)
    run_policy: dict[str, Any] = {}
    for field, strategy in {
        "cleanPodPolicy": st.sampled_from(["All", "None", "Running"]),
        "ttlSecondsAfterFinished": st.integers(0, 3600),
        "activeDeadlineSeconds": st.integers(1, 10**6),
        "backoffLimit": st.integers(0, 10),
        "suspend": st.booleans(),
    }.items():
        if draw(st.integers(0, 2)) == 0:
            run_policy[field] = draw(strategy)
    if draw(st.integers(0, 2)) == 0:
        run_policy["schedulingPolicy"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "minAvailable": st.integers(0, workers + 1),
                    "queue": st.sampled_from(["default", "team-a"]),
                    "minResources": st.dictionaries(
                        st.sampled_from(["cpu", "memory"]), good_quantity(), max_size=2
                    ),
                    "priorityClass": st.sampled_from(["high", "low"]),
                    "scheduleTimeoutSeconds": st.integers(0, 600),
                },
            )
        )
    if run_policy:
        spec["runPolicy"] = run_policy
    api_version = "kubeflow.org/v2beta1"
    if draw(st.integers(0, 2)) == 0:
        # kubeflow.org/v1, as Flyte writes them: kubectl exec, and v1's own fields.
        api_version = "kubeflow.org/v1"
        for replica in specs.values():
            if draw(st.booleans()):
                replica["restartPolicy"] = draw(
                    st.sampled_from(["Always", "ExitCode", "Never", "OnFailure"])
                )
        if workers and draw(st.booleans()):
            spec["mainContainer"] = "worker"
        if draw(st.booleans()):
            spec["cleanPodPolicy"] = draw(st.sampled_from(["All", "None", "Running"]))
    elif draw(st.integers(0, 3)) == 0:
        spec["transport"] = draw(st.sampled_from(["SSH", "KubectlExec"]))
    metadata: dict[str, Any] = {"name": draw(dns_label(30))}
    if draw(st.booleans()):
        metadata["namespace"] = draw(dns_label(30))
    if draw(st.integers(0, 3)) == 0:
        metadata["annotations"] = {"scheduling.volcano.sh/queue-name": "team-a"}
    return {"apiVersion": api_version, "kind": "MPIJob", "metadata": metadata, "spec": spec}


# -- hostile values ----------------------------------------------------------------------------


def bad_name() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(
            ["", "-", "a-", "-a", "A", "a.b", "a_b", "a b", "a\nb", "ä", "a" * 64, "a" * 254]
        ),
        st.text(max_size=12),
        st.integers(),
        st.just(None),
        st.just(["a"]),
    )


def bad_quantity() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(
            [
                "-1",
                " 1",
                "1 ",
                "1\n",
                "1e309",
                "1e999999999",
                "1e" + "9" * 60,
                "9223372036854775807",
                "9223372036854775808",
                "8Ei",
                "7Ei",
                "1e-40",
                "lots",
                "1GB",
                "",
                "0x10",
                "1.5.5",
            ]
        ),
        st.sampled_from([float("nan"), float("inf"), -1.5, 0.25, 1e18, 1e300, True, None]),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.just([1]),
    )


def bad_integer() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from([-1, 0, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63)]),
        st.sampled_from(["1", 1.5, True, None, [1], {"a": 1}]),
    )


def any_value() -> st.SearchStrategy[Any]:
    return st.one_of(bad_name(), bad_integer(), bad_quantity(), st.just({}), st.just([]))


Mutation = Callable[[dict[str, Any]], None]


def _set(path: tuple[Any, ...], value: Any) -> Mutation:
    """Set ``path`` (creating objects on the way; a list index must exist) to ``value``."""

    def apply(job: dict[str, Any]) -> None:
        target: Any = job
        for part in path[:-1]:
            if isinstance(part, int):
                if not isinstance(target, list) or len(target) <= part:
                    return
                target = target[part]
            else:
                if not isinstance(target, dict):
                    return
                target = target.setdefault(part, {})
        if isinstance(target, dict) or (
            isinstance(target, list) and isinstance(path[-1], int) and len(target) > path[-1]
        ):
            target[path[-1]] = copy.deepcopy(value)

    return apply


def _delete(path: tuple[Any, ...]) -> Mutation:
    def apply(job: dict[str, Any]) -> None:
        target: Any = job
        for part in path[:-1]:
            target = target.get(part) if isinstance(target, dict) else None
        if isinstance(target, dict):
            target.pop(path[-1], None)

    return apply


def _rule_case(replica_type: str, case: PodRuleCase) -> Mutation:
    """One change of the pod-rule table, on a pod spec still shaped for it."""

    def apply(job: dict[str, Any]) -> None:
        try:
            spec = job["spec"]["mpiReplicaSpecs"][replica_type]["template"]["spec"]
            shaped = isinstance(spec["containers"][0], dict)
        except (KeyError, IndexError, TypeError):
            return
        if shaped:
            case.change(spec)

    return apply


def mutation() -> st.SearchStrategy[Mutation]:
    role = st.sampled_from(["Launcher", "Worker"])
    pod = st.builds(lambda r: ("spec", "mpiReplicaSpecs", r, "template", "spec"), role)
    main = st.builds(lambda p: (*p, "containers", 0), pod)

    def at(prefix: st.SearchStrategy[tuple[Any, ...]], *suffix: Any) -> Any:
        return st.builds(lambda p: (*p, *suffix), prefix)

    settable: list[tuple[Any, st.SearchStrategy[Any]]] = [
        (st.just(("metadata", "name")), bad_name()),
        (st.just(("metadata", "namespace")), bad_name()),
        (st.just(("metadata", "annotations")), st.one_of(bad_name(), st.just({"a b": "c"}))),
        (st.just(("metadata", "labels")), st.just({"team": "a b"})),
        (st.just(("metadata",)), st.sampled_from(["pi", [], None])),
        (st.just(("apiVersion",)), st.sampled_from(["v1", "kubeflow.org/v1", None, 2])),
        (st.just(("kind",)), st.sampled_from(["Pod", "mpijob", None])),
        (st.just(("spec",)), st.sampled_from([None, [], "x"])),
        (st.just(("spec", "mpiReplicaSpecs")), st.sampled_from([{}, [], None])),
        (
            st.just(("spec", "mpiReplicaSpecs", "Worker", "replicas")),
            st.one_of(bad_integer(), st.sampled_from([20_000, 20_001, 19_999])),
        ),
        (st.just(("spec", "mpiReplicaSpecs", "Launcher", "replicas")), bad_integer()),
        (st.just(("spec", "mpiReplicaSpecs", "Workers")), st.just({"replicas": 1})),
        (
            at(st.builds(lambda r: ("spec", "mpiReplicaSpecs", r), role), "restartPolicy"),
            st.sampled_from(["Always", "never", None]),
        ),
        (
            at(st.builds(lambda r: ("spec", "mpiReplicaSpecs", r), role), "template"),
            st.sampled_from([None, "pod", {}, {"spec": []}, {"metadata": "x", "spec": {}}]),
        ),
        (
            st.sampled_from(
                [("spec", f) for f in ("slotsPerWorker",)]
                + [
                    ("spec", "runPolicy", f)
                    for f in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit")
                ]
                + [
                    ("spec", "runPolicy", "schedulingPolicy", f)
                    for f in ("minAvailable", "scheduleTimeoutSeconds")
                ]
            ),
            bad_integer(),
        ),
        (st.just(("spec", "runPolicy", "schedulingPolicy", "minResources", "cpu")), bad_quantity()),
        (st.just(("spec", "runPolicy", "schedulingPolicy", "queue")), bad_name()),
        (st.just(("spec", "runPolicy", "schedulingPolicy", "priorityClass")), bad_name()),
        (
            st.sampled_from(
                [
                    ("spec", "runPolicy", "cleanPodPolicy"),
                    ("spec", "mpiImplementation"),
                    ("spec", "launcherCreationPolicy"),
                    ("spec", "runPolicy", "managedBy"),
                ]
            ),
            st.sampled_from(["Sometimes", "", None, 1, "kueue.x-k8s.io/multikueue"]),
        ),
        (
            st.just(("spec", "sshAuthMountPath")),
            st.sampled_from(["/etc/mpi", "/etc/mpi/", "", None, 7, "/data"]),
        ),
        (st.just(("spec", "runLauncherAsWorker")), st.sampled_from(["yes", 1, None])),
        (st.just(("spec", "transport")), st.sampled_from(["ssh", "", None, 1, "KubectlExec"])),
        (st.just(("spec", "mainContainer")), st.sampled_from(["nope", "", None, 3, "worker"])),
        (st.just(("spec", "cleanPodPolicy")), st.sampled_from(["Sometimes", None, 0, "All"])),
        (st.just(("spec", "runPolicy", "suspend")), st.sampled_from(["no", 0, None])),
        (at(main, "name"), bad_name()),
        (at(main, "image"), st.sampled_from(["", " img", "img\n", None, 5, "img:tag"])),
        (at(main, "resources", "requests", "cpu"), bad_quantity()),
        (at(main, "resources", "limits", "memory"), bad_quantity()),
        (
            at(main, "resources"),
            st.sampled_from(["lots", [], None, {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}]),
        ),
        (
            at(main, "volumeMounts"),
            st.sampled_from(
                [
                    [{"name": "ssh-auth", "mountPath": "/x"}],
                    [{"name": "nowhere", "mountPath": "/x"}],
                    [{"name": "v", "mountPath": "/root/.ssh"}],
                    [{"name": "v", "mountPath": "/etc/mpi"}],
                    [{"name": "v", "mountPath": ""}],
                    {"name": "v"},
                ]
            ),
        ),
        (at(main, "env"), st.sampled_from([{"A": "1"}, "A=1", None])),
        (at(main, "command"), st.sampled_from(["mpirun", None, []])),
        (
            at(pod, "containers"),
            st.sampled_from(
                [[], None, {"name": "x"}, [None], ["x"], [{"name": "a", "image": "i"}] * 2]
            ),
        ),
        (
            at(pod, "initContainers"),
            st.sampled_from(
                [
                    [{"name": "launcher", "image": "i"}],
                    [{"name": "worker", "image": "i"}],
                    [{"image": "i"}],
                    "x",
                ]
            ),
        ),
        (
            at(pod, "volumes"),
            st.sampled_from(
                [
                    [{"name": "ssh-auth", "emptyDir": {}}],
                    [{"name": "mpi-job-config", "emptyDir": {}}],
                    [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}],
                    [{"name": "v"}],
                    [{"name": "Bad_Name", "emptyDir": {}}],
                    [{"emptyDir": {}}],
                    "data",
                ]
            ),
        ),
        (at(pod, "hostNetwork"), st.sampled_from(["yes", 1, None])),
        (at(pod, "priorityClassName"), bad_name()),
        (at(pod, "schedulerName"), bad_name()),
        (
            at(pod, "dnsConfig"),
            st.one_of(
                st.sampled_from(["x", {"searches": "x"}, {"searches": [1]}]),
                st.builds(
                    lambda n: {"searches": [f"s{i}.example" for i in range(n)]}, st.integers(30, 34)
                ),
                st.just({"searches": ["d" * 250 + ".x"] * 9}),
            ),
        ),
        (at(pod, "overhead"), st.dictionaries(st.just("cpu"), bad_quantity(), min_size=1)),
        (
            st.builds(
                lambda r: ("spec", "mpiReplicaSpecs", r, "template", "metadata", "labels"), role
            ),
            st.one_of(
                st.just({"a b": "c"}),
                st.dictionaries(
                    st.sampled_from(["team", "example.com/x", "x" * 70, "/x", "a/b/c"]),
                    st.one_of(bad_name(), st.just("ok")),
                    min_size=1,
                ),
            ),
        ),
        (
            st.builds(
                lambda r: ("spec", "mpiReplicaSpecs", r, "template", "metadata", "annotations"),
                role,
            ),
            st.one_of(st.just("x"), st.just({"k": 1}), st.just({"big": "x" * 300_000})),
        ),
        (at(pod, "futureField"), any_value()),
        # Typos: fields no schema declares, which the API server would drop.
        (st.just(("spec", "slotPerWorker")), st.integers(0, 8)),
        (st.just(("spec", "runPolicy", "backofLimit")), st.integers(0, 3)),
        (st.builds(lambda r: ("spec", "mpiReplicaSpecs", r, "replica"), role), st.just(2)),
        (
            st.builds(
                lambda r: ("spec", "mpiReplicaSpecs", r, "template", "metadata", "label"), role
            ),
            st.just({"team": "a"}),
        ),
        (at(main, "comand"), st.just(["mpirun"])),
        (at(main, "resource"), st.just({"limits": {"nvidia.com/gpu": 8}})),
        *((at(main, field), value) for field, value in container_mutations()),
        *((at(pod, field), value) for field, value in pod_mutations()),
    ]
    sets = [st.builds(_set, path, value) for path, value in settable]
    deletes = st.builds(
        _delete,
        st.sampled_from(
            [
                ("metadata", "name"),
                ("spec", "mpiReplicaSpecs", "Launcher"),
                ("spec", "mpiReplicaSpecs", "Worker", "replicas"),
                ("spec", "mpiReplicaSpecs", "Launcher", "template"),
            ]
        ),
    )
    rules = st.builds(_rule_case, role, rule_cases())
    return st.one_of(*sets, deletes, rules)


# -- the YAML text -----------------------------------------------------------------------------

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)

TEXT_ATTACKS: list[Callable[[str], str]] = [
    lambda text: text + "extra:\n" + "".join(f"  {line}\n" for line in ALIAS_BOMB.splitlines()),
    lambda text: text + "loop: &loop [*loop]\n",
    lambda text: text + "deep: " + "[" * 100 + "]" * 100 + "\n",
    lambda text: text + "deep: " + "[" * 5000 + "]" * 5000 + "\n",
    lambda text: text + "nan: .nan\nbig: 1.0e+999\n",
    lambda text: text + "blob: !!binary aGVsbG8=\n",
    lambda text: text + "---\n" + text,
    lambda text: "- " + text.replace("\n", "\n  "),
    lambda text: "",
    lambda text: "42\n",
    lambda text: text[: len(text) // 2],
    lambda text: text.replace("spec:", "spec: &s\n  x: 1\n  y: *s\n", 1),
    lambda text: text + "\u2028: x\n",
    lambda text: text.replace("kind: MPIJob", 'kind: "MPI\\nJob"'),
]


def dumped(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


@st.composite
def examples(draw: st.DrawFn) -> Example:
    """A valid job with zero to three mutations, sometimes a text attack, and flags."""
    job = draw(valid_job())
    # A third of the examples keep the valid job as drawn.
    changes = draw(st.sampled_from([0, 0, 1, 1, 2, 3]))
    for change in draw(st.lists(mutation(), min_size=changes, max_size=changes)):
        change(job)
    text = dumped(job)
    if draw(st.integers(0, 9)) == 0:
        text = draw(st.sampled_from(TEXT_ATTACKS))(text)
    gang = draw(
        st.sampled_from(
            [
                "",
                "",
                "volcano",
                "scheduler-plugins-scheduler",
                "koord-scheduler",
                "scheduling.k8s.io/podgroup",
                "Bad Name",
            ]
        )
    )
    domain = draw(st.sampled_from(["", "", "", "cluster.example", "corp", "bad..domain"]))
    return Example(text, gang, domain)
