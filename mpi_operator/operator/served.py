"""Whether the API server serves the gang strategy's kinds, and in which version: asked when
the caches are built, and again every ``RECHECK_INTERVAL`` seconds while they run.

A kind whose CRD is not installed cannot be cached (its informer's list would fail for ever,
and the operator would never become ready) nor written. The leader then caches everything else
and syncs every job; a job that needs gang objects waits with a condition naming the CRD
(``controller.plan``). A kind of Kubernetes' own API may be served in one of several versions
(the strategy's ``WithServedVersions``): the first served is the one cached and written. When
the answer changes (the CRD installed, or removed), the leader builds its caches again from
the new answer. The strategy's layout kinds (``gang.WithClusterLayout``) are asked the same
way, by an operator watching every namespace, but a missing one holds nothing back: it is just
not cached.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from dataclasses import dataclass
from typing import Final

from gang import (
    ClusterResource,
    GangKind,
    GangResource,
    GangScheduler,
    cluster_layout_of,
    gang_kinds_of,
    in_served_versions,
    unserved_state,
)
from mpi_operator.operator.caches import resource_of
from mpi_operator.runtime.client import ApiError, Client, is_not_found

log = logging.getLogger(__name__)

RECHECK_INTERVAL: Final = 30.0
"""Seconds between two checks: one list request (of one object) per kind."""


@dataclass(frozen=True)
class ServedGang:
    """The API server's answer: the strategy with its kinds in the versions served, and the
    kinds served in none of their versions; of its layout kinds, those served."""

    gang: GangScheduler | None
    unserved: tuple[GangKind, ...]
    layout: tuple[ClusterResource, ...] = ()

    def differs_from(self, other: ServedGang) -> bool:
        return (gang_kinds_of(self.gang), self.unserved, self.layout) != (
            gang_kinds_of(other.gang),
            other.unserved,
            other.layout,
        )


def ask_served(client: Client, namespace: str, gang: GangScheduler | None) -> ServedGang:
    """Which of the strategy's kinds the API server serves, each in the first of its versions
    that a list does not answer with 404 Not Found (for a CRD: the CRD is missing).

    Any other failure (a refused or timed-out request) counts as served: the informer then
    reports it, as for any other kind."""
    missing = []
    versions = {}
    for kind in gang_kinds_of(gang):
        served = _served_version(client, namespace, kind)
        if served is None:
            missing.append(kind)
        elif served != kind.version:
            versions[kind.plural] = served
    layout = cluster_layout_of(gang)
    layout_kinds = layout.layout_resources if layout is not None and not namespace else ()
    served_layout = tuple(
        kind for kind in layout_kinds if _served_version(client, namespace, kind) is not None
    )
    return ServedGang(in_served_versions(gang, versions), tuple(missing), served_layout)


def asks_served(gang: GangScheduler | None) -> bool:
    """Whether the strategy has kinds whose being served is asked at all: its gang kinds or
    its layout kinds (the API server then answers every ``RECHECK_INTERVAL``)."""
    return bool(gang_kinds_of(gang)) or cluster_layout_of(gang) is not None


def _served_version(client: Client, namespace: str, kind: GangKind) -> str | None:
    fallbacks = kind.fallback_versions if isinstance(kind, GangResource) else ()
    for version in (kind.version, *fallbacks):
        resource = resource_of(dataclasses.replace(kind, version=version))
        try:
            client.list_first_page(
                resource, (namespace or None) if resource.namespaced else None, 1
            )
        except ApiError as error:
            if is_not_found(error):
                continue
            log.warning("could not check whether %s is served: %s", kind.crd_name, error)
        return version
    return None


def describe_unserved(missing: tuple[GangKind, ...]) -> str:
    """The log line saying what a missing CRD means for the jobs."""
    state = unserved_state(missing)
    return (
        f"{state.message} Meanwhile jobs that need gang objects wait (condition "
        f"GangScheduled=False, reason {state.reason}) and every other job runs; "
        f"checked again every {RECHECK_INTERVAL:g} s."
    )


def watch_served(
    client: Client,
    namespace: str,
    gang: GangScheduler | None,
    known: ServedGang,
    stop: threading.Event,
    changed: threading.Event,
    interval: float = RECHECK_INTERVAL,
) -> None:
    """Set ``changed`` once what is served differs from ``known``, or once ``stop`` is set;
    return when ``changed`` is set, by this or by anyone else."""
    while not changed.is_set():
        if stop.wait(interval):
            changed.set()
            return
        if changed.is_set():
            return
        now = ask_served(client, namespace, gang)
        if now.differs_from(known):
            log.info(
                "served gang kinds changed (before: %s; now: %s): building the caches again",
                _describe(known),
                _describe(now),
            )
            changed.set()


def _describe(served: ServedGang) -> str:
    missing = ", ".join(kind.crd_name for kind in served.unserved) or "none"
    cached = ", ".join(
        f"{kind.plural}.{kind.group}/{kind.version}"
        for kind in (*gang_kinds_of(served.gang), *served.layout)
        if kind not in served.unserved
    )
    return f"served {cached or 'none'}; missing {missing}"
