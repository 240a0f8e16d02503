"""Store: keys, secondary indexes kept current through updates, and relist diffs."""

from __future__ import annotations

from typing import Any

import pytest

from mpi_operator.runtime.objects import object_key, split_key
from mpi_operator.runtime.store import (
    INDEX_CONTROLLER_UID,
    Store,
    index_by_controller_uid,
    index_by_namespaced_label,
)


def pod(
    name: str,
    namespace: str = "ns",
    rv: str = "1",
    owner: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "resourceVersion": rv}
    if owner:
        meta["ownerReferences"] = [
            {"uid": "not-controller", "controller": False},
            {"uid": owner, "controller": True},
        ]
    if labels:
        meta["labels"] = labels
    return {"kind": "Pod", "metadata": meta}


def store() -> Store:
    return Store(
        {
            INDEX_CONTROLLER_UID: index_by_controller_uid,
            "role": index_by_namespaced_label("role"),
            "job": index_by_namespaced_label("job"),
        }
    )


@pytest.mark.parametrize(
    ("obj", "key"),
    [
        ({"metadata": {"name": "a", "namespace": "ns"}}, "ns/a"),
        ({"metadata": {"name": "cluster-wide"}}, "cluster-wide"),
    ],
)
def test_keys(obj: dict[str, Any], key: str) -> None:
    assert object_key(obj) == key
    assert split_key(key) == (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def test_split_key_rejects_two_slashes() -> None:
    with pytest.raises(ValueError):
        split_key("a/b/c")


def test_get_list_and_indexes() -> None:
    s = store()
    s.upsert(pod("w0", owner="job-1", labels={"role": "worker", "job": "pi"}))
    s.upsert(pod("w1", owner="job-1", labels={"role": "worker", "job": "pi"}))
    s.upsert(pod("l0", owner="job-2", labels={"role": "launcher", "job": "pi"}))
    s.upsert(pod("x", namespace="other", labels={"job": "pi"}))

    assert s.get("ns/w0") is not None
    assert s.get("ns/missing") is None
    assert len(s) == 4
    assert sorted(p["metadata"]["name"] for p in s.list()) == ["l0", "w0", "w1", "x"]
    assert [p["metadata"]["name"] for p in s.by_index(INDEX_CONTROLLER_UID, "job-1")] == [
        "w0",
        "w1",
    ]
    assert s.by_index(INDEX_CONTROLLER_UID, "not-controller") == []
    assert s.index_keys("role", "ns/launcher") == ["ns/l0"]
    assert s.index_keys("job", "ns/pi") == ["ns/l0", "ns/w0", "ns/w1"]
    assert s.index_keys("job", "other/pi") == ["other/x"]
    with pytest.raises(KeyError):
        s.by_index("nope", "x")


def test_update_refiles_and_delete_unfiles() -> None:
    s = store()
    s.upsert(pod("w0", labels={"role": "worker"}))
    old = s.upsert(pod("w0", rv="2", labels={"role": "launcher"}))
    assert old is not None and old["metadata"]["resourceVersion"] == "1"
    assert s.index_keys("role", "ns/worker") == []
    assert s.index_keys("role", "ns/launcher") == ["ns/w0"]
    assert "ns/worker" not in s.index_values("role")

    assert s.delete("ns/w0") is not None
    assert s.delete("ns/w0") is None
    assert s.index_values("role") == []
    assert s.index_values(INDEX_CONTROLLER_UID) == []


def test_indexer_added_later_files_existing_objects() -> None:
    s = Store()
    s.upsert(pod("a", labels={"role": "worker"}))
    s.add_indexer("role", index_by_namespaced_label("role"))
    assert s.index_keys("role", "ns/worker") == ["ns/a"]
    with pytest.raises(ValueError):
        s.add_indexer("role", index_by_namespaced_label("role"))


def test_replace_reports_added_updated_and_deleted() -> None:
    s = store()
    assert not s.has_synced()
    s.upsert(pod("kept", rv="1"))
    s.upsert(pod("changed", rv="1", labels={"role": "worker"}))
    s.upsert(pod("gone", rv="1", owner="uid-9"))

    diff = s.replace(
        [pod("kept", rv="1"), pod("changed", rv="2", labels={"role": "launcher"}), pod("new")],
        resource_version="42",
    )

    assert [o["metadata"]["name"] for o in diff.added] == ["new"]
    assert [(a["metadata"]["resourceVersion"], b["metadata"]["resourceVersion"]) for a, b in
            diff.updated] == [("1", "2")]  # fmt: skip
    assert [o["metadata"]["name"] for o in diff.deleted] == ["gone"]
    assert sorted(s.keys()) == ["ns/changed", "ns/kept", "ns/new"]
    # Indexes were rebuilt from the new list.
    assert s.by_index(INDEX_CONTROLLER_UID, "uid-9") == []
    assert s.index_keys("role", "ns/launcher") == ["ns/changed"]
    assert s.index_keys("role", "ns/worker") == []
    assert s.has_synced()
    assert s.wait_for_sync(0)
    assert s.resource_version == "42"
