"""The scripted API server the client's tests (and the CRD check's) talk to, as a fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mpi_operator.runtime.client import Client
from mpi_operator.runtime.credentials import FixedAuthorization
from mpi_operator.runtime.kubeconfig import Configuration
from tests.unit.runtime.scripted_server import FakeApiServer, serving


@pytest.fixture
def api() -> Iterator[tuple[FakeApiServer, Client]]:
    state = FakeApiServer()
    with serving(state) as port:
        configuration = Configuration(
            host=f"http://127.0.0.1:{port}",
            authorization=FixedAuthorization("Bearer secret-token"),
        )
        client = Client(configuration, user_agent="test-agent", qps=0)
        yield state, client
        client.close()
