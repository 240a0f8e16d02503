"""The scripted API server the client's tests (and the CRD check's) talk to, as a fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client as k8s_client

from mpi_operator.runtime.client import Client
from tests.unit.runtime.scripted_server import FakeApiServer, serving


@pytest.fixture
def api() -> Iterator[tuple[FakeApiServer, Client]]:
    state = FakeApiServer()
    with serving(state) as port:
        configuration = k8s_client.Configuration(host=f"http://127.0.0.1:{port}")
        configuration.api_key["BearerToken"] = "Bearer secret-token"
        client = Client(configuration, user_agent="test-agent", qps=0)
        yield state, client
        client.close()
