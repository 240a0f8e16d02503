"""Whether the gang strategy's kinds are served, and the caches built from the answer."""

from __future__ import annotations

import threading

from gang import gang_kinds_of, select_gang_scheduler
from mpi_operator.operator.served import describe_unserved, unserved_kinds, watch_served
from mpi_operator.runtime.client import Client
from tests.unit.runtime.scripted_server import FakeApiServer, Reply, page, status

VOLCANO = select_gang_scheduler("volcano")


def test_a_kind_whose_list_is_not_found_is_unserved_and_each_kind_is_asked_once(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.extend([Reply(404, status(404, "NotFound")), page(resource_version="3")])
    [pod_groups, _] = gang_kinds_of(VOLCANO)
    assert unserved_kinds(client, "ns", VOLCANO) == (pod_groups,)
    assert [(s.path, dict(s.query)) for s in server.seen] == [
        ("/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups", {"limit": "1"}),
        ("/apis/scheduling.volcano.sh/v1beta1/queues", {"limit": "1"}),
    ]


def test_a_kind_that_cannot_be_checked_counts_as_served(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.extend([Reply(403, status(403, "Forbidden")), page(resource_version="3")])
    assert unserved_kinds(client, "", VOLCANO) == ()


def test_without_gang_kinds_nothing_is_asked(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    assert unserved_kinds(client, "", select_gang_scheduler("koord-scheduler")) == ()
    assert unserved_kinds(client, "", None) == ()
    assert server.seen == []


def test_the_log_line_names_the_crd_and_what_jobs_do_meanwhile() -> None:
    [pod_groups, _] = gang_kinds_of(VOLCANO)
    assert describe_unserved((pod_groups,)) == (
        "podgroups.scheduling.volcano.sh is not served by the API server: install Volcano's "
        "CRDs. The gang's objects and pods are created once it is served. Meanwhile jobs "
        "that need gang objects wait (condition GangScheduled=False, reason "
        "PodGroupCRDMissing) and every other job runs; checked again every 30 s."
    )


def test_a_change_in_what_is_served_ends_the_caches_session(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    # Unchanged at the first check; both served at the second, where podgroups were not.
    server.replies.extend(
        [
            Reply(404, status(404, "NotFound")),
            page(resource_version="1"),
            page(resource_version="1"),
            page(resource_version="1"),
        ]
    )
    [pod_groups, _] = gang_kinds_of(VOLCANO)
    stop, changed = threading.Event(), threading.Event()
    watch_served(client, "", VOLCANO, (pod_groups,), stop, changed, interval=0.01)
    assert changed.is_set() and not stop.is_set()
    assert len(server.seen) == 4


def test_stopping_ends_the_watch_of_what_is_served(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    stop, changed = threading.Event(), threading.Event()
    stop.set()
    watch_served(client, "", VOLCANO, (), stop, changed)
    assert changed.is_set() and server.seen == []
