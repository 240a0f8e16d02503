"""What the operator imports before it holds the Lease, and before its caches list: the process,
its client and the election first; the caches next; the sync's modules (the MPIJob models, the
controller) only while the caches list; the metrics and probe servers once the first attempt at
the Lease is answered. Where libcurl answers whole requests, urllib3 loads with the first
stream, a cache's watch."""

import subprocess
import sys
import textwrap

import pytest

from mpi_operator.runtime import curl

# The sync's own modules: pydantic and the models, the plan.
SYNC_ONLY = ("pydantic", "mpi_operator.api.models", "mpi_operator.controller.plan")


def _modules_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(done.stdout.split())


# The metrics and probe servers' modules, which start once the first Lease attempt is answered.
SERVERS_ONLY = ("prometheus_client", "http.server", "mpi_operator.runtime.health")


def test_the_start_imports_none_of_the_leaders_work() -> None:
    started = _modules_after("import mpi_operator.cli, mpi_operator.operator.main")
    assert "mpi_operator.runtime.leader" in started
    leaders = {"mpi_operator.operator.leading", "mpi_operator.operator.caches", *SYNC_ONLY}
    assert leaders & started == set()


def test_the_start_imports_neither_server_nor_the_standard_http_client() -> None:
    started = _modules_after("import mpi_operator.cli, mpi_operator.operator.main")
    assert {*SERVERS_ONLY, "http.client", "urllib.request"} & started == set()
    served = _modules_after("import mpi_operator.runtime.health")
    assert set(SERVERS_ONLY) <= served


def test_the_caches_start_before_the_sync_modules_load() -> None:
    leading = _modules_after("import mpi_operator.operator.leading")
    assert "mpi_operator.operator.caches" in leading
    assert set(SYNC_ONLY) & leading == set()


# A client's requests before the Lease, to a server answering each with an empty object.
_REQUESTS_BEFORE_THE_LEASE = textwrap.dedent(
    """
    import json, threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import mpi_operator.cli, mpi_operator.operator.main
    from mpi_operator.runtime.client import LEASES, Client
    from mpi_operator.runtime.kubeconfig import Configuration

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"kind": "Lease"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"http://127.0.0.1:{server.server_address[1]}"
    client = Client(Configuration(host=host), qps=0).with_options(user_agent="leader-election")
    assert client.get(LEASES, "mpi-operator", "kubeflow") == {"kind": "Lease"}
    client.close()
    """
)


@pytest.mark.skipif(not curl.INSTALLED, reason="pycurl (the extra curl) is not installed")
def test_with_libcurl_the_start_and_its_requests_import_no_urllib3() -> None:
    started = _modules_after(_REQUESTS_BEFORE_THE_LEASE)
    assert "pycurl" in started
    assert "urllib3" not in started
