"""Informers of kinds the operator can work without."""

from __future__ import annotations

import logging
import time

import pytest

from mpi_operator.runtime.client import NODES, Client, Resource
from mpi_operator.runtime.informer import Informer
from tests.unit.runtime.scripted_server import FakeApiServer, Reply, page, status

HYPER_NODES = Resource(
    "topology.volcano.sh", "v1alpha1", "hypernodes", namespaced=False, kind="HyperNode"
)


def stopped_by_itself(informer: Informer) -> bool:
    deadline = time.monotonic() + 10
    while not informer.stopped and time.monotonic() < deadline:
        time.sleep(0.01)
    return informer.stopped


@pytest.mark.parametrize(
    ("resource", "named"), [(NODES, "nodes"), (HYPER_NODES, "hypernodes.topology.volcano.sh")]
)
def test_a_kind_rbac_refuses_is_asked_once_and_its_loss_said_once(
    api: tuple[FakeApiServer, Client],
    caplog: pytest.LogCaptureFixture,
    resource: Resource,
    named: str,
) -> None:
    server, client = api
    server.replies.extend([Reply(403, status(403, "Forbidden")), page(resource_version="1")])
    informer = Informer.optional_for_resource(client, resource, lost="jobs go without it")
    with caplog.at_level(logging.WARNING, logger="mpi_operator.runtime.informer"):
        informer.start()
        assert stopped_by_itself(informer)
        assert informer.stop()
    assert len(server.seen) == 1
    assert not informer.has_synced()
    [line] = [r.getMessage() for r in caplog.records if r.name == "mpi_operator.runtime.informer"]
    assert line.startswith(f"cannot list and watch {named} (")
    assert line.endswith(
        f": jobs go without it; grant list and watch on {named} and restart the operator"
    )


def test_a_kind_granted_is_cached_as_any_other(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    server.replies.append(page("a", "b", resource_version="1"))
    informer = Informer.optional_for_resource(client, NODES, lost="never said")
    informer.start()
    try:
        assert informer.wait_for_sync(10)
        assert sorted(o["metadata"]["name"] for o in informer.store.list()) == ["a", "b"]
        assert not informer.stopped
    finally:
        informer.stop()
