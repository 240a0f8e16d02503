"""The operator's command line: upstream's flags, spelled as upstream spells them, plus ours.

Go's flag package accepts ``-flag`` and ``--flag`` alike and upstream's manifests use both, so
every flag is registered under both spellings (and ``-kubeConfig``'s camel case). A boolean
flag given alone (``--leader-elect``) is true, as in Go. klog's flags, which upstream's and
training-operator's Deployments pass, are accepted too: ``-v`` sets the verbosity, the others
are named in one log line at start and change nothing.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

import gang
from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts, rendering_flag_problems

DEFAULT_LEASE_NAME: Final = "mpi-operator"
# klog's flags (k8s.io/klog/v2's InitFlags) but -v, by the type of their value. Logs here are
# always one JSON object a line on stderr, so none of them has anything to set.
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


def _flag(parser: argparse.ArgumentParser, name: str, *extra: str, **kwargs: object) -> None:
    parser.add_argument(f"--{name}", f"-{name}", *extra, **kwargs)  # type: ignore[arg-type]


def add_operator_flags(parser: argparse.ArgumentParser) -> None:
    _flag(parser, "master", default="", help="API server URL (out of cluster)")
    _flag(
        parser,
        "kubeconfig",
        "--kubeConfig",
        "-kubeConfig",
        default="",
        help="kubeconfig path; $KUBECONFIG when empty, else the in-cluster service account",
    )
    _flag(
        parser,
        "namespace",
        default=os.environ.get("KUBEFLOW_NAMESPACE", ""),
        help="namespace to watch; empty watches all namespaces ($KUBEFLOW_NAMESPACE)",
    )
    _flag(parser, "threadiness", type=int, default=2, help="reconcile workers")
    _flag(
        parser,
        "monitoring-port",
        type=int,
        default=0,
        help="port serving Prometheus /metrics; 0 disables",
    )
    _flag(
        parser,
        "gang-scheduling",
        default="",
        help=gang.flag_help(),
    )
    _flag(parser, "lock-namespace", default="mpi-operator", help="namespace of the leader Lease")
    _flag(
        parser,
        "kube-api-qps",
        type=float,
        default=5.0,
        help="API requests per second, for each budget: Kubernetes' own groups, kubeflow.org, "
        "the gang scheduler's group and leader election each have one (as upstream's clientsets)",
    )
    _flag(parser, "kube-api-burst", type=int, default=10, help="API request burst, per budget")
    _flag(
        parser,
        "controller-queue-rate-limit",
        type=float,
        default=10.0,
        help="work queue retries per second (failed or requeued syncs; events are not limited)",
    )
    _flag(parser, "controller-queue-burst", type=int, default=100, help="work queue retry burst")
    _flag(parser, "cluster-domain", default="", help="appended to host names in the hostfile")
    _flag(
        parser,
        "mpi-kubectl-delivery-image",
        default=c.DEFAULT_KUBECTL_DELIVERY_IMAGE,
        help="image that copies kubectl into KubectlExec launchers (training-operator's flag)",
    )
    _flag(parser, "health-port", type=int, default=8080, help="port serving /healthz and /readyz")
    _flag(
        parser,
        "bind-address",
        default="0.0.0.0",
        help="address the health and metrics servers listen on",
    )
    _flag(
        parser,
        "leader-elect",
        type=_boolean,
        nargs="?",
        const=True,
        default=True,
        help="hold a Lease before reconciling, so only one replica acts (default true)",
    )
    _flag(
        parser,
        "failure-log-tail",
        type=_boolean,
        nargs="?",
        const=True,
        default=True,
        help="quote a failed container's termination message (its log's tail, with "
        "FallbackToLogsOnError) in the MPIJob's conditions and events; false keeps only its "
        "exit code and reason (default true)",
    )
    parser.add_argument("-v", "--v", type=int, default=0, dest="verbosity", help="log verbosity")
    klog = parser.add_argument_group(
        "klog flags", "accepted so upstream's manifests start the operator; they change nothing"
    )
    for name, kind in KLOG_FLAGS.items():
        boolean = kind is bool
        _flag(
            klog,  # type: ignore[arg-type]
            name,
            dest=f"klog_{name}",
            type=_boolean if boolean else kind,
            nargs="?" if boolean else None,
            const=True if boolean else None,
            default=None,
            help=argparse.SUPPRESS,
        )


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
    options = Options(
        master=namespace.master,
        kubeconfig=namespace.kubeconfig,
        namespace=namespace.namespace,
        threadiness=namespace.threadiness,
        monitoring_port=namespace.monitoring_port,
        gang_scheduling=namespace.gang_scheduling,
        lock_namespace=namespace.lock_namespace,
        kube_api_qps=namespace.kube_api_qps,
        kube_api_burst=namespace.kube_api_burst,
        controller_queue_rate_limit=namespace.controller_queue_rate_limit,
        controller_queue_burst=namespace.controller_queue_burst,
        cluster_domain=namespace.cluster_domain,
        mpi_kubectl_delivery_image=namespace.mpi_kubectl_delivery_image,
        health_port=namespace.health_port,
        bind_address=namespace.bind_address,
        leader_elect=namespace.leader_elect,
        failure_log_tail=namespace.failure_log_tail,
        verbosity=namespace.verbosity,
    )
    problems = list(_problems(options))
    if problems:
        raise OptionsError("; ".join(problems))
    return options


def _problems(options: Options) -> Iterator[str]:
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
    yield from rendering_flag_problems(options.gang_scheduling, options.cluster_domain)
    image = options.mpi_kubectl_delivery_image
    if not image or any(ch.isspace() for ch in image):
        yield f"--mpi-kubectl-delivery-image {image!r}: must be an image reference"
