"""Whether the gang strategy's kinds are served, and the caches built from the answer."""

from __future__ import annotations

import threading

from gang import GangKind, GangScheduler, gang_kinds_of, gang_resources_of, select_gang_scheduler
from gang.koordinator import CLUSTER_NETWORK_TOPOLOGY_RESOURCE
from gang.volcano import HYPER_NODE_RESOURCE
from mpi_operator.operator.served import (
    ServedGang,
    ask_served,
    asks_served,
    describe_unserved,
    watch_served,
)
from mpi_operator.runtime.client import Client
from tests.unit.runtime.scripted_server import FakeApiServer, Reply, page, status

VOLCANO = select_gang_scheduler("volcano")
NATIVE = select_gang_scheduler("scheduling.k8s.io/podgroup")


def unserved_kinds(
    client: Client, namespace: str, gang: GangScheduler | None
) -> tuple[GangKind, ...]:
    return ask_served(client, namespace, gang).unserved


def listed(count: int) -> list[Reply]:
    """``count`` answers of a kind served."""
    return [page(resource_version="1") for _ in range(count)]


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
    server.replies.extend(
        [
            Reply(403, status(403, "Forbidden")),
            page(resource_version="3"),
            page(resource_version="1"),
        ]
    )
    assert unserved_kinds(client, "", VOLCANO) == ()


def test_a_layout_kind_not_served_holds_nothing_back_and_is_not_cached(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.extend([*listed(2), Reply(404, status(404, "NotFound"))])
    served = ask_served(client, "", VOLCANO)
    assert served.unserved == () and served.layout == ()
    assert server.seen[-1].path == "/apis/topology.volcano.sh/v1alpha1/hypernodes"


def test_a_served_layout_kind_is_cached_by_an_operator_of_every_namespace_only(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.extend(listed(5))
    assert ask_served(client, "", VOLCANO).layout == (HYPER_NODE_RESOURCE,)
    assert ask_served(client, "ns", VOLCANO).layout == ()
    assert len(server.seen) == 5


def test_without_gang_kinds_only_the_layout_is_asked(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    koordinator = select_gang_scheduler("koord-scheduler")
    assert unserved_kinds(client, "ns", koordinator) == ()
    assert unserved_kinds(client, "", None) == ()
    assert server.seen == []
    server.replies.extend(listed(1))
    assert ask_served(client, "", koordinator).layout == (CLUSTER_NETWORK_TOPOLOGY_RESOURCE,)
    assert [seen.path for seen in server.seen] == [
        "/apis/scheduling.koordinator.sh/v1alpha1/clusternetworktopologies"
    ]


def test_a_strategy_with_gang_or_layout_kinds_is_asked_about_them_and_no_other() -> None:
    assert asks_served(VOLCANO) and asks_served(select_gang_scheduler("koord-scheduler"))
    assert asks_served(select_gang_scheduler("scheduler-plugins-scheduler"))
    assert not asks_served(None)


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
            *listed(5),
        ]
    )
    [pod_groups, _] = gang_kinds_of(VOLCANO)
    stop, changed = threading.Event(), threading.Event()
    known = ServedGang(VOLCANO, (pod_groups,), (HYPER_NODE_RESOURCE,))
    watch_served(client, "", VOLCANO, known, stop, changed, interval=0.01)
    assert changed.is_set() and not stop.is_set()
    assert len(server.seen) == 6


def test_a_layout_kind_installed_ends_the_caches_session(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.extend(listed(3))
    stop, changed = threading.Event(), threading.Event()
    watch_served(client, "", VOLCANO, ServedGang(VOLCANO, ()), stop, changed, interval=0.01)
    assert changed.is_set() and not stop.is_set()


def test_stopping_ends_the_watch_of_what_is_served(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    stop, changed = threading.Event(), threading.Event()
    stop.set()
    watch_served(client, "", VOLCANO, ServedGang(VOLCANO, ()), stop, changed)
    assert changed.is_set() and server.seen == []


def test_a_kind_of_several_versions_is_used_in_the_first_one_served(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.extend([Reply(404, status(404, "NotFound")), page(resource_version="3")])
    served = ask_served(client, "ns", NATIVE)
    assert served.unserved == ()
    assert [(r.api_version, r.plural) for r in gang_resources_of(served.gang)] == [
        ("scheduling.k8s.io/v1alpha2", "podgroups")
    ]
    assert [s.path for s in server.seen] == [
        "/apis/scheduling.k8s.io/v1beta1/namespaces/ns/podgroups",
        "/apis/scheduling.k8s.io/v1alpha2/namespaces/ns/podgroups",
    ]


def test_the_preferred_version_served_is_asked_alone(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    server.replies.extend([page(resource_version="3")])
    served = ask_served(client, "", NATIVE)
    assert served.gang == NATIVE and served.unserved == ()
    assert len(server.seen) == 1


def test_a_kind_served_in_none_of_its_versions_is_unserved_and_says_how_to_serve_it(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.extend(
        [Reply(404, status(404, "NotFound")), Reply(404, status(404, "NotFound"))]
    )
    served = ask_served(client, "", NATIVE)
    [pod_groups] = gang_kinds_of(NATIVE)
    assert served.unserved == (pod_groups,)
    line = describe_unserved(served.unserved)
    assert line.startswith(
        "podgroups.scheduling.k8s.io is not served by the API server: turn on the "
        "GenericWorkload feature gate"
    )
    assert "reason PodGroupAPIMissing" in line and "CRD" not in line


def test_a_version_change_alone_ends_the_caches_session(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    # v1beta1 was served when the caches were built; now only v1alpha2 is.
    server.replies.extend([Reply(404, status(404, "NotFound")), page(resource_version="1")])
    stop, changed = threading.Event(), threading.Event()
    watch_served(client, "", NATIVE, ServedGang(NATIVE, ()), stop, changed, interval=0.01)
    assert changed.is_set() and not stop.is_set()
