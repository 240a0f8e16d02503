"""Whether the API server serves the gang strategy's kinds: asked when the caches are built,
and again every ``RECHECK_INTERVAL`` seconds while they run.

A kind whose CRD is not installed cannot be cached (its informer's list would fail for ever,
and the operator would never become ready) nor written. The leader then caches everything else
and syncs every job; a job that needs gang objects waits with a condition naming the CRD
(``controller.plan``). When the answer changes (the CRD installed, or removed), the leader
builds its caches again from the new answer.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from gang import GangKind, GangScheduler, gang_kinds_of, unserved_state
from mpi_operator.operator.caches import resource_of
from mpi_operator.runtime.client import ApiError, Client, is_not_found

log = logging.getLogger(__name__)

RECHECK_INTERVAL: Final = 30.0
"""Seconds between two checks: one list request (of one object) per kind."""


def unserved_kinds(
    client: Client, namespace: str, gang: GangScheduler | None
) -> tuple[GangKind, ...]:
    """The strategy's kinds that a list answers with 404 Not Found: their CRD is missing.

    Any other failure (a refused or timed-out request) counts as served: the informer then
    reports it, as for any other kind."""
    missing = []
    for kind in gang_kinds_of(gang):
        resource = resource_of(kind)
        try:
            client.list_first_page(
                resource, (namespace or None) if resource.namespaced else None, 1
            )
        except ApiError as error:
            if is_not_found(error):
                missing.append(kind)
            else:
                log.warning("could not check whether %s is served: %s", kind.crd_name, error)
    return tuple(missing)


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
    known: tuple[GangKind, ...],
    stop: threading.Event,
    changed: threading.Event,
    interval: float = RECHECK_INTERVAL,
) -> None:
    """Set ``changed`` once the unserved kinds differ from ``known``, or once ``stop`` is set;
    return when ``changed`` is set, by this or by anyone else."""
    while not changed.is_set():
        if stop.wait(interval):
            changed.set()
            return
        if changed.is_set():
            return
        now = unserved_kinds(client, namespace, gang)
        if now != known:
            log.info(
                "served gang kinds changed (missing before: %s; now: %s): building the caches "
                "again",
                _names(known),
                _names(now),
            )
            changed.set()


def _names(kinds: tuple[GangKind, ...]) -> str:
    return ", ".join(kind.crd_name for kind in kinds) or "none"
