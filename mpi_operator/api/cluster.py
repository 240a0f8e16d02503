"""Facts about the cluster that shape a job's objects but are not part of the job."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.pod_rules import dns

STANDARD_OPERATOR_ACCOUNT: Final = f"{c.OPERATOR_NAME}/{c.OPERATOR_NAME}"
"""The account the standard install runs the operator as, as NAMESPACE/NAME."""


NodeLabels = Mapping[str, Mapping[str, str]]
"""Node name -> its labels."""


@dataclass(frozen=True)
class ClusterLayout:
    """How the cluster's nodes are grouped, for a gang scheduler whose objects name its groups
    (``gang.WithClusterLayout``): the nodes' labels by node name, and the objects of the
    strategy's ``layout_resources`` by plural."""

    node_labels: NodeLabels = field(default_factory=dict)
    objects: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    # What a strategy derives from this layout, kept with it: the operator hands every sync the
    # same layout until it changes, so each answer is worked out once per change.
    derived: dict[Hashable, object] = field(default_factory=dict, compare=False, repr=False)

    def derive(
        self,
        plural: str,
        label: str,
        work_out: Callable[[str, Sequence[Mapping[str, Any]], NodeLabels], object],
    ) -> object:
        """``work_out(label, the objects of plural, the nodes' labels)``, worked out once."""
        key = (plural, label)
        if key not in self.derived:
            self.derived[key] = work_out(label, self.objects.get(plural) or (), self.node_labels)
        return self.derived[key]


@dataclass(frozen=True)
class ClusterFacts:
    """What the operator knows of the cluster when it renders a job.

    ``priority_classes`` maps PriorityClass names to values; ``default_priority`` is the
    value of the cluster's globalDefault PriorityClass (0 when there is none), which the
    API server gives to pods that name no class. ``operator_account`` is the (namespace,
    name) of the ServiceAccount the operator runs as, which no job's pod may name; None when
    unknown (out of the cluster).
    """

    cluster_domain: str = ""
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    default_priority: int = 0
    # The image whose entrypoint copies kubectl into $TARGET_DIR, for KubectlExec launchers.
    kubectl_delivery_image: str = c.DEFAULT_KUBECTL_DELIVERY_IMAGE
    operator_account: tuple[str, str] | None = None
    # None when the layout is not known: its kinds are not served or not readable, the
    # operator watches one namespace (nodes are cluster-scoped), or the job is rendered offline.
    layout: ClusterLayout | None = None

    def priority_of(self, class_name: str | None) -> int:
        """Priority a pod with this priorityClassName gets; unknown classes count as default."""
        if not class_name:
            return self.default_priority
        return self.priority_classes.get(class_name, self.default_priority)


def rendering_flag_problems(scheduler_name: str, cluster_domain: str) -> Iterator[str]:
    """Flags whose values land in every pod: the scheduler name --gang-scheduling gives them
    (``gang.scheduler_name_of``) and a DNS search domain."""
    if scheduler_name:
        for problem in dns.dns1123_subdomain(scheduler_name):
            yield f"--gang-scheduling {scheduler_name!r}: a scheduler name {problem}"
    if cluster_domain:
        for problem in dns.dns1123_subdomain(cluster_domain):
            yield f"--cluster-domain {cluster_domain!r}: a DNS domain {problem}"


def operator_account_problems(account: str) -> Iterator[str]:
    """An --operator-account value: NAMESPACE/NAME, or empty when the account is unknown."""
    if not account:
        return
    namespace, slash, name = account.partition("/")
    if not slash:
        yield f"--operator-account {account!r}: expected NAMESPACE/NAME"
        return
    for problem in dns.dns1123_label(namespace):
        yield f"--operator-account {account!r}: a namespace {problem}"
    for problem in dns.dns1123_subdomain(name):
        yield f"--operator-account {account!r}: a ServiceAccount name {problem}"


def operator_account_of(account: str) -> tuple[str, str] | None:
    """A valid --operator-account value as (namespace, name); None when empty."""
    namespace, _, name = account.partition("/")
    return (namespace, name) if account else None
