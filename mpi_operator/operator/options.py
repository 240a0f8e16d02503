"""The operator's command line: upstream's flags, spelled as upstream spells them, plus ours.

Go's flag package accepts ``-flag`` and ``--flag`` alike and upstream's manifests use both, so
every flag parses under both spellings (and ``-kubeConfig``'s camel case); ``--help`` shows each
once, as ``--flag``, in its group with its default. A boolean flag given alone
(``--leader-elect``) is true, as in Go. klog's flags, which upstream's and training-operator's
Deployments pass, are accepted too: ``-v`` sets the verbosity, the others are named in one log
line at start and change nothing.
"""

from __future__ import annotations

import argparse
import os
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

import gang
from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts, rendering_flag_problems

DEFAULT_LEASE_NAME: Final = "mpi-operator"
# The first is the default: klog's text lines, which upstream's and training-operator's users read.
LOG_FORMATS: Final = ("text", "json")
# The width argparse wraps help at without a terminal; group descriptions are wrapped to it.
HELP_WIDTH: Final = 78
# klog's flags (k8s.io/klog/v2's InitFlags) but -v, by the type of their value. Logs here
# always go to stderr in --log-format, so none of them has anything to set.
KLOG_FLAGS: Final[dict[str, type]] = {
    "add_dir_header": bool,
    "alsologtostderr": bool,
    "log_backtrace_at": str,
    "log_dir": str,
    "log_file": str,
    "log_file_max_size": int,
    "logtostderr": bool,
    "one_output": bool,
    "skip_headers": bool,
    "skip_log_headers": bool,
    "stderrthreshold": str,
    "vmodule": str,
}


@dataclass(frozen=True)
class Options:
    master: str = ""
    kubeconfig: str = ""
    namespace: str = ""
    threadiness: int = 2
    monitoring_port: int = 0
    gang_scheduling: str = ""
    lock_namespace: str = "mpi-operator"
    kube_api_qps: float = 5.0
    kube_api_burst: int = 10
    controller_queue_rate_limit: float = 10.0
    controller_queue_burst: int = 100
    cluster_domain: str = ""
    mpi_kubectl_delivery_image: str = c.DEFAULT_KUBECTL_DELIVERY_IMAGE
    health_port: int = 8080
    bind_address: str = "0.0.0.0"
    leader_elect: bool = True
    failure_log_tail: bool = True
    verbosity: int = 0
    log_format: str = LOG_FORMATS[0]

    def static_facts(self) -> ClusterFacts:
        """What the flags and the environment tell of the cluster; the caches add what they
        watch."""
        return ClusterFacts(
            cluster_domain=self.cluster_domain,
            kubectl_delivery_image=self.mpi_kubectl_delivery_image,
            operator_account=operator_account(os.environ),
        )


def operator_account(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The (namespace, name) of the ServiceAccount the operator runs as, which the Deployment
    passes down as $POD_NAMESPACE and $POD_SERVICE_ACCOUNT; None unless both are set (out of
    the cluster, with a kubeconfig, it runs as no account)."""
    namespace = environ.get("POD_NAMESPACE", "")
    name = environ.get("POD_SERVICE_ACCOUNT", "")
    return (namespace, name) if namespace and name else None


class OptionsError(ValueError):
    """A flag value that cannot work, named by its flag."""


# The help's groups, in the order it lists them.
JOBS: Final = "jobs"
SCHEDULING: Final = "scheduling"
API_CLIENT: Final = "API client"
LEADER_ELECTION: Final = "leader election"
MONITORING: Final = "metrics and health"
LOGGING: Final = "logging"
COMPATIBILITY: Final = "compatibility"
_DESCRIPTIONS: Final[dict[str, str | None]] = {
    JOBS: "what the operator watches and how it runs a job",
    SCHEDULING: None,
    API_CLIENT: "how it reaches the API server",
    LEADER_ELECTION: None,
    MONITORING: None,
    LOGGING: None,
    COMPATIBILITY: (
        "Every flag also takes one dash (-threadiness=4), as Go's flag package does, and a "
        "boolean flag alone means true; -kubeConfig is --kubeconfig. klog's flags, which "
        "upstream's and training-operator's Deployments pass, are accepted and change nothing: "
        + ", ".join(f"-{name}" for name in KLOG_FLAGS)
        + "."
    ),
}


@dataclass(frozen=True)
class _Help:
    group: str
    text: str
    shown_default: str | None = None
    """What --help says the default is, when the value alone would not say it."""


# Each option's flag, in the order --help lists them; the default is the option's.
_FLAGS: Final[dict[str, _Help]] = {
    "namespace": _Help(
        JOBS,
        "namespace to watch; empty watches all namespaces",
        "$KUBEFLOW_NAMESPACE, else all namespaces",
    ),
    "threadiness": _Help(JOBS, "reconcile workers"),
    "controller_queue_rate_limit": _Help(
        JOBS, "work queue retries per second (failed or requeued syncs; events are not limited)"
    ),
    "controller_queue_burst": _Help(JOBS, "work queue retry burst"),
    "cluster_domain": _Help(JOBS, "appended to host names in the hostfile", "none"),
    "mpi_kubectl_delivery_image": _Help(
        JOBS, "image that copies kubectl into KubectlExec launchers (training-operator's flag)"
    ),
    "failure_log_tail": _Help(
        JOBS,
        "quote a failed container's termination message (its log's tail, with "
        "FallbackToLogsOnError) in the MPIJob's conditions and events; false keeps only its "
        "exit code and reason",
    ),
    "gang_scheduling": _Help(SCHEDULING, gang.flag_help(), "none"),
    "master": _Help(API_CLIENT, "API server URL (out of cluster)", "the kubeconfig's"),
    "kubeconfig": _Help(
        API_CLIENT, "kubeconfig path", "$KUBECONFIG, else the in-cluster service account"
    ),
    "kube_api_qps": _Help(
        API_CLIENT,
        "API requests per second, for each budget: Kubernetes' own groups, kubeflow.org, the "
        "gang scheduler's group and leader election each have one (as upstream's clientsets)",
    ),
    "kube_api_burst": _Help(API_CLIENT, "API request burst, per budget"),
    "leader_elect": _Help(
        LEADER_ELECTION, "hold a Lease before reconciling, so only one replica acts"
    ),
    "lock_namespace": _Help(LEADER_ELECTION, "namespace of the leader Lease"),
    "monitoring_port": _Help(MONITORING, "port serving Prometheus /metrics; 0 disables"),
    "health_port": _Help(MONITORING, "port serving /healthz and /readyz"),
    "bind_address": _Help(MONITORING, "address the health and metrics servers listen on"),
    "verbosity": _Help(LOGGING, "log verbosity; 4 and above debug"),
    "log_format": _Help(LOGGING, "text (klog's lines, as upstream's) or json (one object a line)"),
}
# Spellings beyond --flag and -flag: upstream's camel case.
_ALIASES: Final = {"kubeconfig": ("--kubeConfig", "-kubeConfig")}
_CHOICES: Final = {"log_format": LOG_FORMATS}


def flag_name(option: str) -> str:
    """The flag of an Options field: klog's ``v`` for the verbosity, else the field dashed."""
    return "v" if option == "verbosity" else option.replace("_", "-")


def add_operator_flags(parser: argparse.ArgumentParser) -> None:
    """Each option shown once, as ``--flag`` with its default, in its group; its other
    spellings (Go's ``-flag``, upstream's ``-kubeConfig``) are hidden aliases that parse the
    same."""
    groups = {
        title: parser.add_argument_group(
            title, textwrap.fill(description, HELP_WIDTH) if description else None
        )
        for title, description in _DESCRIPTIONS.items()
    }
    defaults = Options(namespace=os.environ.get("KUBEFLOW_NAMESPACE", ""))
    kinds = {field.name: type(getattr(defaults, field.name)) for field in fields(Options)}
    for option, about in _FLAGS.items():
        default = getattr(defaults, option)
        kind = kinds[option]
        value: dict[str, Any] = (
            {"type": _boolean, "nargs": "?", "const": True, "metavar": "bool"}
            if kind is bool
            else {"type": kind, "metavar": "string" if kind is str else kind.__name__}
        )
        if option in _CHOICES:
            value["choices"] = _CHOICES[option]
        shown = _go_value(default) if about.shown_default is None else about.shown_default
        group, name = groups[about.group], flag_name(option)
        group.add_argument(
            f"--{name}",
            dest=option,
            default=default,
            help=f"{about.text} (default: {shown})",
            **value,
        )
        group.add_argument(
            f"-{name}",
            *_ALIASES.get(option, ()),
            dest=option,
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
            **value,
        )
    for name, kind in KLOG_FLAGS.items():
        boolean = kind is bool
        groups[COMPATIBILITY].add_argument(
            f"--{name}",
            f"-{name}",
            dest=f"klog_{name}",
            type=_boolean if boolean else kind,
            nargs="?" if boolean else None,
            const=True if boolean else None,
            default=None,
            help=argparse.SUPPRESS,
        )


def _go_value(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "t", "true", "yes"):
        return True
    if lowered in ("0", "f", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def ignored_flags(namespace: argparse.Namespace) -> tuple[str, ...]:
    """klog's flags given on the command line (but -v), as ``-name=value``: they set nothing
    here, and the operator says so once at start."""
    return tuple(
        f"-{name}={str(value).lower() if isinstance(value, bool) else value}"
        for name in KLOG_FLAGS
        if (value := getattr(namespace, f"klog_{name}", None)) is not None
    )


def options_from(namespace: argparse.Namespace) -> Options:
    options = Options(**{field.name: getattr(namespace, field.name) for field in fields(Options)})
    problems = list(_problems(options))
    if problems:
        raise OptionsError("; ".join(problems))
    return options


def _problems(options: Options) -> Iterator[str]:
    if options.log_format not in LOG_FORMATS:
        yield f"--log-format: must be one of {', '.join(LOG_FORMATS)}"
    if options.threadiness < 1:
        yield "--threadiness: must be at least 1"
    for flag, port in (
        ("--monitoring-port", options.monitoring_port),
        ("--health-port", options.health_port),
    ):
        if not 0 <= port <= 65535:
            yield f"{flag}: must be a port number from 0 to 65535"
    if options.kube_api_burst < 1 and options.kube_api_qps > 0:
        yield "--kube-api-burst: must be at least 1"
    if options.controller_queue_rate_limit <= 0:
        yield "--controller-queue-rate-limit: must be positive"
    if options.controller_queue_burst < 1:
        yield "--controller-queue-burst: must be at least 1"
    if options.leader_elect and not options.lock_namespace:
        yield "--lock-namespace: must not be empty while --leader-elect is true"
    yield from rendering_flag_problems(
        gang.scheduler_name_of(options.gang_scheduling), options.cluster_domain
    )
    image = options.mpi_kubectl_delivery_image
    if not image or any(ch.isspace() for ch in image):
        yield f"--mpi-kubectl-delivery-image {image!r}: must be an image reference"
