"""The start-up check that the MPIJob CRD is installed."""

from __future__ import annotations

from mpi_operator.operator.main import check_crd
from mpi_operator.runtime.client import Client
from tests.unit.runtime.scripted_server import FakeApiServer, Reply, page, status


def test_the_crd_check_is_one_request_however_many_jobs_exist(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    # Three of a thousand pages of one job each: the check needs the first only.
    for index in range(3):
        server.replies.append(page(f"job-{index}", resource_version="7", continue_token="more"))
    assert check_crd(client, "")
    [request] = server.seen
    assert request.path == "/apis/kubeflow.org/v2beta1/mpijobs"
    assert dict(request.query) == {"limit": "1"}


def test_the_crd_check_fails_when_mpijobs_are_not_served(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.append(Reply(404, status(404, "NotFound")))
    assert not check_crd(client, "ns")
    assert [s.path for s in server.seen] == ["/apis/kubeflow.org/v2beta1/namespaces/ns/mpijobs"]
