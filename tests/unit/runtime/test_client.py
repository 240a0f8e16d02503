"""The raw-JSON client, against a local stdlib HTTP
server that plays a scripted API server (this checks our request building, error mapping,
pagination and watch streaming; behaviour of a real kube-apiserver is for the e2e suite)."""

from __future__ import annotations

import json
import threading
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from kubernetes import client as k8s_client

from mpi_operator.runtime import curl
from mpi_operator.runtime.client import (
    API_REQUESTS,
    JOBS,
    NAMESPACES,
    PODS,
    PRIORITY_CLASSES,
    ApiError,
    Client,
    Resource,
    is_already_exists,
    is_conflict,
    is_forbidden,
    is_gone,
    is_not_found,
    is_unauthorized,
)
from mpi_operator.runtime.clock import FakeClock
from mpi_operator.runtime.informer import Informer
from mpi_operator.runtime.kubeconfig import Configuration, load_configuration
from mpi_operator.runtime.leader import LeaderElectionConfig, LeaderElector, LeaseClient
from mpi_operator.runtime.reflector import strip_managed_fields
from tests.unit.runtime.api_bodies import (
    BOOKMARK,
    EXPIRED,
    JOB,
    MPIJOB,
    POD,
    STATUS,
    event,
    exact,
)
from tests.unit.runtime.scripted_server import FakeApiServer, Reply, page, status

MPIJOBS = Resource("kubeflow.org", "v2beta1", "mpijobs", True, "MPIJob")


@pytest.fixture(autouse=True, params=["libcurl", "urllib3 alone"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with pycurl and as without the extra that installs it."""
    if request.param != "libcurl":
        monkeypatch.setattr(curl, "INSTALLED", False)
    return str(request.param)


def test_the_transport_is_the_one_asked_for(
    api: tuple[FakeApiServer, Client], transport: str
) -> None:
    server, client = api
    assert (client._curl is not None) == (transport == "libcurl")
    server.replies.append(Reply(body={"kind": "Pod"}))
    assert client.get(PODS, "p", "ns") == {"kind": "Pod"}


def requests(verb: str, resource: str, code: str) -> float:
    return API_REQUESTS.value(verb, resource, code)


@pytest.mark.parametrize(
    ("resource", "namespace", "name", "sub", "path"),
    [
        (PODS, "ns", "p", "", "/api/v1/namespaces/ns/pods/p"),
        (PODS, None, None, "", "/api/v1/pods"),
        (JOBS, "ns", None, "", "/apis/batch/v1/namespaces/ns/jobs"),
        (
            MPIJOBS,
            "ns",
            "pi",
            "status",
            "/apis/kubeflow.org/v2beta1/namespaces/ns/mpijobs/pi/status",
        ),
        (PRIORITY_CLASSES, "x", "high", "", "/apis/scheduling.k8s.io/v1/priorityclasses/high"),
    ],
)
def test_resource_paths(
    resource: Resource, namespace: str | None, name: str | None, sub: str, path: str
) -> None:
    assert resource.path(namespace, name, sub) == path


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ApiError(404, "NotFound", ""), {"not_found"}),
        (ApiError(409, "AlreadyExists", ""), {"already_exists"}),
        (ApiError(409, "Conflict", ""), {"conflict"}),
        (ApiError(410, "Expired", ""), {"gone"}),
        (ApiError(403, "Forbidden", ""), {"forbidden"}),
        (ApiError(401, "Unauthorized", ""), {"unauthorized"}),
        (ApiError(0, "ConnectionRefused", ""), set()),
        (RuntimeError("not an API error"), set()),
    ],
)
def test_error_predicates(error: BaseException, expected: set[str]) -> None:
    predicates = {
        "not_found": is_not_found,
        "already_exists": is_already_exists,
        "conflict": is_conflict,
        "gone": is_gone,
        "forbidden": is_forbidden,
        "unauthorized": is_unauthorized,
    }
    assert {name for name, check in predicates.items() if check(error)} == expected


def test_get_keeps_unknown_fields_and_sends_auth_and_agent(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"someFutureField": {"x": 1}}}
    server.replies.append(Reply(body=pod))
    before = requests("get", "pods", "200")
    assert client.get(PODS, "p", "ns") == pod
    seen = server.seen[0]
    assert (seen.method, seen.path) == ("GET", "/api/v1/namespaces/ns/pods/p")
    assert seen.headers["user-agent"] == ["test-agent"]
    assert seen.headers["authorization"] == ["Bearer secret-token"]
    assert requests("get", "pods", "200") == before + 1


def test_list_pages_and_fills_in_kind(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    server.replies.append(page("a", resource_version="5", continue_token="tok"))
    server.replies.append(page("b", resource_version="5"))
    result = client.list(JOBS, "ns", label_selector="app in (a,b)", field_selector="x=y")
    assert [item["metadata"]["name"] for item in result.items] == ["a", "b"]
    assert all(item["apiVersion"] == "batch/v1" and item["kind"] == "Job" for item in result.items)
    assert result.resource_version == "5"
    first, second = (dict(s.query) for s in server.seen)
    assert first == {"labelSelector": "app in (a,b)", "fieldSelector": "x=y", "limit": "500"}
    assert second == {**first, "continue": "tok"}


def test_list_transforms_each_page_before_asking_for_the_next(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.append(page("a", resource_version="5", continue_token="tok"))
    server.replies.append(page("b", resource_version="5"))
    requests_sent_by_item: dict[str, int] = {}

    def trim(obj: dict[str, Any]) -> dict[str, Any]:
        requests_sent_by_item[obj["metadata"]["name"]] = len(server.seen)
        return {"kind": obj["kind"], "metadata": obj["metadata"]}

    result = client.list(PODS, "ns", transform=trim)
    assert requests_sent_by_item == {"a": 1, "b": 2}
    assert result.items == [
        {"kind": "Pod", "metadata": {"name": "a"}},
        {"kind": "Pod", "metadata": {"name": "b"}},
    ]


def test_list_falls_back_to_one_request_when_the_token_expires(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.append(page("a", resource_version="5", continue_token="tok"))
    server.replies.append(Reply(410, status(410, "Expired")))
    server.replies.append(page("a", "b", resource_version="9"))
    result = client.list(PODS)
    assert [item["metadata"]["name"] for item in result.items] == ["a", "b"]
    assert result.resource_version == "9"
    assert server.seen[0].path == "/api/v1/pods"
    assert "limit" not in dict(server.seen[2].query)


def test_writes_and_their_bodies(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    job = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
           "metadata": {"name": "pi", "namespace": "ns", "resourceVersion": "3"},
           "status": {"conditions": []}}  # fmt: skip
    for _ in range(7):
        server.replies.append(Reply(body=job))
    before = requests("update", "mpijobs/status", "200")
    client.create(MPIJOBS, job)
    client.update(MPIJOBS, job, field_manager="mpi-operator")
    client.update_status(MPIJOBS, job)
    client.patch(MPIJOBS, "pi", {"metadata": {"labels": {"a": "b"}}}, "ns")
    client.patch(PODS, "p", [{"op": "remove", "path": "/x"}], "ns", patch_type="json")
    client.patch(PODS, "p", {"metadata": {}}, "ns", patch_type="strategic")
    client.delete(PODS, "p", "ns", propagation_policy="Background", preconditions={"uid": "u"})
    got = [(s.method, s.path, s.headers.get("content-type")) for s in server.seen]
    base = "/apis/kubeflow.org/v2beta1/namespaces/ns/mpijobs"
    assert got == [
        ("POST", base, ["application/json"]),
        ("PUT", f"{base}/pi", ["application/json"]),
        ("PUT", f"{base}/pi/status", ["application/json"]),
        ("PATCH", f"{base}/pi", ["application/merge-patch+json"]),
        ("PATCH", "/api/v1/namespaces/ns/pods/p", ["application/json-patch+json"]),
        ("PATCH", "/api/v1/namespaces/ns/pods/p", ["application/strategic-merge-patch+json"]),
        ("DELETE", "/api/v1/namespaces/ns/pods/p", ["application/json"]),
    ]
    assert server.seen[0].body == job
    assert dict(server.seen[1].query) == {"fieldManager": "mpi-operator"}
    assert server.seen[4].body == [{"op": "remove", "path": "/x"}]
    assert server.seen[6].body == {"apiVersion": "v1", "kind": "DeleteOptions",
                                   "propagationPolicy": "Background",
                                   "preconditions": {"uid": "u"}}  # fmt: skip
    assert requests("update", "mpijobs/status", "200") == before + 1


def test_bodies_and_headers_are_those_the_official_serialization_sends(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    job = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
           "metadata": {"name": "pi", "namespace": "ns", "labels": {"é": "ü"}},
           "spec": {"slotsPerWorker": 1, "runPolicy": {"suspend": False},
                    "mpiReplicaSpecs": {"Worker": {"replicas": 2, "template": {}}}},
           "status": {"conditions": [], "startTime": None, "ratio": 0.5}}  # fmt: skip
    calls = [
        (lambda: client.create(MPIJOBS, job), job),
        (lambda: client.patch(PODS, "p", [{"op": "remove", "path": "/x"}], "ns",
                              patch_type="json"), [{"op": "remove", "path": "/x"}]),
        (lambda: client.patch(MPIJOBS, "pi", job, "ns", patch_type="apply",
                              field_manager="m", force=True), job),
        (lambda: client.patch(MPIJOBS, "pi", {}, "ns"), {}),
    ]  # fmt: skip
    # The official client, kept as a development dependency to hold ours to what it sent.
    settings = k8s_client.Configuration(host=client.host)
    settings.api_key["BearerToken"] = "Bearer secret-token"
    official = k8s_client.ApiClient(settings)
    official.user_agent = client.user_agent
    for call, body in calls:
        server.replies.append(Reply(body={}))
        call()
        seen = server.seen[-1]
        expected = official.param_serialize(
            method=seen.method, resource_path=seen.path, query_params=seen.query,
            header_params={"Accept": "application/json",
                           "Content-Type": seen.headers["content-type"][0]},
            body=body, auth_settings=["BearerToken"],
        )  # fmt: skip
        _, url, headers, sanitized, _ = expected
        assert seen.raw == json.dumps(sanitized).encode()
        assert (urlsplit(url).path, parse_qsl(urlsplit(url).query)) == (seen.path, seen.query)
        for name, value in headers.items():
            assert seen.headers[name.lower()] == [value]


def test_a_redirect_is_followed_as_the_official_client_followed_it(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    moved = Reply(307, raw=b"", location="/api/v1/namespaces/other/pods/p")
    server.replies.extend([moved, moved, Reply(body={"a": 1})])
    assert client.update(PODS, {"metadata": {"name": "p", "namespace": "ns"}}) == {"a": 1}
    # The redirect goes back through the pool manager, which asks again and follows it; a
    # 307 keeps the method and the body.
    assert [(seen.method, seen.path) for seen in server.seen] == [
        ("PUT", "/api/v1/namespaces/ns/pods/p"),
        ("PUT", "/api/v1/namespaces/ns/pods/p"),
        ("PUT", "/api/v1/namespaces/other/pods/p"),
    ]
    assert server.seen[-1].body == {"metadata": {"name": "p", "namespace": "ns"}}


def test_through_a_proxy_the_pool_manager_sends(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    # The fake server stands in for the proxy.
    proxied = Configuration(host="http://api.invalid:6443", proxy=client.configuration.host)
    through_proxy = Client(proxied, qps=0)
    server.replies.append(Reply(body={"kind": "Pod"}))
    try:
        assert through_proxy.get(PODS, "p", "ns") == {"kind": "Pod"}
    finally:
        through_proxy.close()
    [seen] = server.seen
    assert seen.path == "/api/v1/namespaces/ns/pods/p"
    assert seen.headers["host"] == ["api.invalid:6443"]


def raw_list(resource_version: str, *items: bytes) -> Reply:
    """A list answer of these objects, as the API server writes it."""
    return Reply(
        raw=b'{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"%s"},"items":[%s]}'
        % (resource_version.encode(), b",".join(items))
    )


@pytest.mark.parametrize(
    ("resource", "body", "send"),
    [
        (PODS, POD, "create"),
        (JOBS, JOB, "create"),
        (MPIJOBS, MPIJOB, "update_status"),
    ],
    ids=["pod", "job", "mpijob status"],
)
def test_bodies_are_sent_as_the_standard_library_encodes_them(
    api: tuple[FakeApiServer, Client], resource: Resource, body: bytes, send: str
) -> None:
    # Unicode, escapes and integers beyond 64 bits, sent byte for byte as before: json.dumps.
    server, client = api
    obj = json.loads(body)
    server.replies.append(Reply(raw=body))
    answer = getattr(client, send)(resource, obj)
    assert server.seen[-1].raw == json.dumps(obj).encode()
    assert exact(answer) == exact(json.loads(body))


def test_lists_watch_events_and_errors_decode_as_the_standard_library_decodes_them(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.append(raw_list("9", POD, MPIJOB))
    listed = client.list(PODS, "default")
    assert [exact(item) for item in listed.items] == [exact(json.loads(POD)),
                                                      exact(json.loads(MPIJOB))]  # fmt: skip
    lines = [event(b"ADDED", POD), event(b"MODIFIED", MPIJOB), event(b"DELETED", JOB),
             event(b"BOOKMARK", BOOKMARK), event(b"ERROR", EXPIRED)]  # fmt: skip
    server.replies.append(Reply(chunks=[line + b"\n" for line in lines]))
    watched = list(client.watch(PODS, "default", resource_version="9"))
    assert [(kind, exact(obj)) for kind, obj in watched] == [
        (json.loads(line)["type"], exact(json.loads(line)["object"])) for line in lines
    ]
    server.replies.append(Reply(409, raw=STATUS))
    with pytest.raises(ApiError) as caught:
        client.create(PODS, json.loads(POD))
    assert exact(caught.value.body) == exact(json.loads(STATUS))
    assert is_already_exists(caught.value)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(chunks=[b"[" * 5000 + b"]" * 5000 + b"\n"]), "InvalidWatchEvent"),
        (Reply(chunks=[b'{"type":"ADDED","object":{"a":"\xff"}}\n']), "InvalidWatchEvent"),
        (Reply(raw=b"[" * 5000 + b"]" * 5000), "InvalidResponse"),
        (Reply(raw=b'{"kind":"Pod","a":"\xff"}'), "InvalidResponse"),
    ],
    ids=["deep watch line", "invalid utf-8 in a watch line", "deep answer", "invalid utf-8"],
)
def test_undecodable_bodies_are_api_errors(
    api: tuple[FakeApiServer, Client], reply: Reply, reason: str
) -> None:
    server, client = api
    server.replies.append(reply)
    with pytest.raises(ApiError) as caught:
        if reply.chunks is not None:
            list(client.watch(PODS, "default"))
        else:
            client.get(PODS, "p", "default")
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    "raw",
    [
        b'{"kind":"PodList","metadata":{},"items":[1]}',
        b'{"kind":"PodList","metadata":{},"items":[{"a":1},null]}',
        b'{"kind":"PodList","metadata":5,"items":[]}',
        b'{"kind":"PodList","metadata":{},"items":{"a":1}}',
        b'["not", "a", "list"]',
        b'{"kind":"PodList","items":[{"a":"\xff"}]}',
        b"[" * 5000 + b"]" * 5000,
        b'{"items":[' + b"[" * 5000 + b"]" * 5000 + b"]}",
    ],
    ids=["item", "null item", "metadata", "items", "array", "invalid utf-8", "deep", "deep item"],
)
def test_a_list_page_of_another_shape_is_an_api_error(
    api: tuple[FakeApiServer, Client], raw: bytes
) -> None:
    server, client = api
    server.replies.append(Reply(raw=raw))
    with pytest.raises(ApiError) as caught:
        client.list(PODS, "default")
    assert caught.value.reason == "InvalidResponse"


def test_the_cache_holds_what_the_standard_library_decodes(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.append(raw_list("5", POD))
    renamed = MPIJOB.replace(b'"name":"\xcf\x80-', b'"name":"other-\xcf\x80-')
    modified = POD.replace(b'"resourceVersion":"424"', b'"resourceVersion":"600"')
    lines = [event(b"ADDED", MPIJOB), event(b"MODIFIED", modified), event(b"BOOKMARK", BOOKMARK),
             event(b"ADDED", renamed), event(b"DELETED", renamed)]  # fmt: skip
    hold = threading.Event()
    server.replies.append(Reply(chunks=[line + b"\n" for line in lines], hold=hold))
    informer = Informer.for_resource(client, PODS, namespace="default")
    deleted = threading.Event()
    informer.add_event_handler(on_delete=lambda obj: deleted.set())
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        assert deleted.wait(5), "the last watch event never arrived"
        cached = {informer.store.key_of(obj): exact(obj) for obj in informer.store.list()}
    finally:
        informer.stop(timeout=5)
        hold.set()
    expected = [strip_managed_fields(json.loads(body)) for body in (MPIJOB, modified)]
    assert cached == {
        f"{obj['metadata']['namespace']}/{obj['metadata']['name']}": exact(obj) for obj in expected
    }


def test_a_refreshed_token_is_sent_with_the_next_request(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    refreshes: list[int] = []

    class Renewed:
        """What a token file or an exec plugin does: a new header when the token changes."""

        def header(self) -> str:
            refreshes.append(1)
            return f"Bearer token-{len(refreshes)}"

    client.configuration.authorization = Renewed()
    server.replies.extend([Reply(body={"kind": "Pod"}), Reply(body={"kind": "Pod"})])
    client.get(PODS, "p", "ns")
    client.create(PODS, {"metadata": {"name": "p"}}, "ns")
    assert [s.headers["authorization"] for s in server.seen] == [
        ["Bearer token-1"],
        ["Bearer token-2"],
    ]


def test_patch_argument_checks(api: tuple[FakeApiServer, Client]) -> None:
    _, client = api
    with pytest.raises(TypeError):
        client.patch(PODS, "p", {"not": "a list"}, "ns", patch_type="json")
    with pytest.raises(TypeError):
        client.patch(PODS, "p", [{"op": "add"}], "ns", patch_type="merge")
    with pytest.raises(ValueError):
        client.patch(PODS, "p", {}, "ns", patch_type="apply")
    with pytest.raises(ValueError):
        client.get(PODS, "p")  # namespaced kind without a namespace


@pytest.mark.parametrize(
    ("reply", "status_code", "reason", "check"),
    [
        (Reply(409, status(409, "AlreadyExists")), 409, "AlreadyExists", is_already_exists),
        (Reply(409, status(409, "Conflict")), 409, "Conflict", is_conflict),
        (Reply(404, status(404, "NotFound")), 404, "NotFound", is_not_found),
        (Reply(403, status(403, "Forbidden")), 403, "Forbidden", is_forbidden),
        (Reply(500, ["not", "a", "status"]), 500, "InternalError", None),
    ],
)
def test_errors_become_api_errors(
    api: tuple[FakeApiServer, Client], reply: Reply, status_code: int, reason: str, check: Any
) -> None:
    server, client = api
    server.replies.append(reply)
    before = requests("create", "pods", str(status_code))
    with pytest.raises(ApiError) as caught:
        client.create(PODS, {"metadata": {"name": "p", "namespace": "ns"}})
    assert (caught.value.status, caught.value.reason) == (status_code, reason)
    if check is not None:
        assert check(caught.value)
        assert caught.value.message == f"{reason} message"
    assert requests("create", "pods", str(status_code)) == before + 1


def test_no_server_is_status_zero_and_counted() -> None:
    client = Client(Configuration(host="http://127.0.0.1:1"), qps=0)
    before = requests("get", "pods", "<error>")
    with pytest.raises(ApiError) as caught:
        client.get(PODS, "p", "ns")
    assert caught.value.status == 0
    assert requests("get", "pods", "<error>") == before + 1
    client.close()


def test_client_side_throttling_uses_the_token_bucket(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    clock = FakeClock(monotonic=0.0, auto_advance=True)
    slow = Client(client.configuration, qps=2, burst=1, clock=clock)
    for _ in range(3):
        server.replies.append(Reply(body={}))
        slow.get(PODS, "p", "ns")
    assert clock.monotonic() == pytest.approx(1.0)  # burst 1, then 0.5 s per request
    slow.close()


def test_a_group_with_a_budget_of_its_own_does_not_wait_for_the_others(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    clock = FakeClock(monotonic=0.0, auto_advance=True)
    slow = Client(
        client.configuration, qps=2, burst=1, own_budget_groups=["kubeflow.org"], clock=clock
    )
    for resource in (PODS, MPIJOBS, MPIJOBS, PODS):
        server.replies.append(Reply(body={}))
        slow.get(resource, "p", "ns")
    # One token each at once; the second request of each group waits 0.5 s for its own.
    assert clock.monotonic() == pytest.approx(0.5)
    # A client made from it (leader election's) keeps the same split, with fresh buckets.
    derived = slow.with_options(user_agent="other")
    for resource in (PODS, MPIJOBS):
        server.replies.append(Reply(body={}))
        derived.get(resource, "p", "ns")
    assert clock.monotonic() == pytest.approx(0.5)
    slow.close()
    derived.close()


def event_line(kind: str, name: str, rv: str) -> bytes:
    obj = {"kind": "Pod", "metadata": {"name": name, "resourceVersion": rv}}
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def test_watch_parses_events_across_chunk_boundaries(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    one, two, three = (
        event_line("ADDED", "a", "1"),
        event_line("MODIFIED", "a", "2"),
        event_line("BOOKMARK", "", "3"),
    )
    server.replies.append(Reply(chunks=[one[:10], one[10:] + two, three]))
    stream = client.watch(PODS, "ns", resource_version="0", timeout_seconds=300,
                          label_selector="app=x")  # fmt: skip
    events = [(kind, obj["metadata"]["resourceVersion"]) for kind, obj in stream]
    assert events == [("ADDED", "1"), ("MODIFIED", "2"), ("BOOKMARK", "3")]
    assert dict(server.seen[0].query) == {
        "watch": "true",
        "resourceVersion": "0",
        "timeoutSeconds": "300",
        "allowWatchBookmarks": "true",
        "labelSelector": "app=x",
    }


def test_stream_lines_yields_text_lines_as_sent_blank_ones_included(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    server.replies.append(Reply(chunks=[b"rank 0: pi is app", b"rox 3.14\r\n\nrank 1", b": done"]))
    lines = client.stream_lines(PODS, "pi-launcher-x", "ns", "log", query=[("follow", "true")])
    assert list(lines) == ["rank 0: pi is approx 3.14", "", "rank 1: done"]
    seen = server.seen[0]
    assert seen.path == "/api/v1/namespaces/ns/pods/pi-launcher-x/log"
    assert seen.query == [("follow", "true")]
    assert seen.headers["accept"] == ["text/plain, */*"]


def test_watch_close_from_another_thread_ends_a_blocked_read(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    hold = threading.Event()
    server.replies.append(Reply(chunks=[event_line("ADDED", "a", "1")], hold=hold))
    stream = client.watch(PODS, timeout_seconds=300)
    received: list[str] = []
    first = threading.Event()
    finished = threading.Event()

    def read() -> None:
        for kind, _ in stream:
            received.append(kind)
            first.set()
        finished.set()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        # The reader has the first event and then blocks on the socket: the server holds.
        assert first.wait(5)
        stream.close()
        assert finished.wait(5), "close() did not interrupt the blocked read"
        assert received == ["ADDED"]
        assert stream.closed
    finally:
        hold.set()
        reader.join(5)


def test_watch_http_error_raises(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    server.replies.append(Reply(410, status(410, "Expired")))
    with pytest.raises(ApiError) as caught:
        client.watch(PODS, resource_version="1")
    assert is_gone(caught.value)


def test_kubeconfig_file_points_the_client_anywhere(
    api: tuple[FakeApiServer, Client], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, client = api
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": client.host}}],
                "users": [{"name": "u", "user": {"token": "from-kubeconfig"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    monkeypatch.delenv("KUBECONFIG", raising=False)
    explicit = Client.from_kubeconfig(str(kubeconfig), qps=0)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    from_env = Client.from_kubeconfig(qps=0, user_agent="env-agent")
    for each in (explicit, from_env):
        server.replies.append(Reply(body={"kind": "Namespace"}))
        each.get(NAMESPACES, "default")
        each.close()
    assert [s.headers["authorization"] for s in server.seen] == [["Bearer from-kubeconfig"]] * 2
    assert server.seen[1].headers["user-agent"] == ["env-agent"]
    assert server.seen[0].path == "/api/v1/namespaces/default"


def test_the_environments_proxy_is_read_once_when_the_settings_are_made(
    api: tuple[FakeApiServer, Client], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, client = api
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": "http://api.invalid:6443"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", client.host)  # the fake server stands in for the proxy
    configuration = load_configuration(str(kubeconfig))
    assert configuration.proxy == client.host
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")
    proxied = Client(configuration, qps=0)
    server.replies.append(Reply(body={"kind": "Pod"}))
    try:
        assert proxied.get(PODS, "p", "ns") == {"kind": "Pod"}
    finally:
        proxied.close()
    assert server.seen[-1].headers["host"] == ["api.invalid:6443"]
    assert server.seen[-1].headers["authorization"] == ["Bearer t"]


def test_informer_over_http_lists_watches_and_stops_promptly(
    api: tuple[FakeApiServer, Client],
) -> None:
    server, client = api
    hold = threading.Event()
    server.replies.append(
        Reply(body={"items": [{"metadata": {"name": "a", "namespace": "ns",
                                            "resourceVersion": "5", "managedFields": [{}]}}],
                    "metadata": {"resourceVersion": "5"}})
    )  # fmt: skip
    modified = {"type": "MODIFIED", "object": {"kind": "Pod", "metadata": {
        "name": "a", "namespace": "ns", "resourceVersion": "6"}}}  # fmt: skip
    server.replies.append(Reply(chunks=[json.dumps(modified).encode() + b"\n"], hold=hold))
    informer = Informer.for_resource(client, PODS, namespace="ns", label_selector="app=x")
    updated = threading.Event()
    informer.add_event_handler(on_update=lambda old, new: updated.set())
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        assert updated.wait(5)
        cached = informer.store.get("ns/a")
        assert cached is not None
        assert cached["metadata"]["resourceVersion"] == "6"
        assert cached["kind"] == "Pod"
        assert informer.stop(timeout=5), "stop() waited for the server to end the watch"
    finally:
        hold.set()
    list_query, watch_query = (dict(s.query) for s in server.seen)
    assert list_query == {"labelSelector": "app=x", "limit": "500"}
    assert watch_query["resourceVersion"] == "5"
    assert watch_query["allowWatchBookmarks"] == "true"
    assert 300 <= int(watch_query["timeoutSeconds"]) <= 600
    assert server.seen[1].path == "/api/v1/namespaces/ns/pods"


def test_leader_election_over_http_creates_the_lease(api: tuple[FakeApiServer, Client]) -> None:
    server, client = api
    server.replies.append(Reply(404, status(404, "NotFound")))
    server.replies.append(Reply(201, {"kind": "Lease", "metadata": {"name": "lock",
                                      "namespace": "ops", "resourceVersion": "1"},
                                      "spec": {"holderIdentity": "me"}}))  # fmt: skip
    lease_client: LeaseClient = client
    elector = LeaderElector(
        LeaderElectionConfig(name="lock", namespace="ops", identity="me"),
        lease_client,
        on_started_leading=lambda stopped: None,
        clock=FakeClock(),
    )
    assert elector.try_acquire_or_renew()
    assert [(s.method, s.path) for s in server.seen] == [
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/ops/leases/lock"),
        ("POST", "/apis/coordination.k8s.io/v1/namespaces/ops/leases"),
    ]
    body = server.seen[1].body
    assert body["spec"]["holderIdentity"] == "me"
    assert body["spec"]["leaseDurationSeconds"] == 15
