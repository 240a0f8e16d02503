"""How the local cluster runs koord-scheduler: a second scheduler on loopback with only
Koordinator's gang plugin turned on."""

from __future__ import annotations

from pathlib import Path

import pytest

from hack.cluster import koordinator

CONFIG = koordinator.configuration("/tmp/kubeconfig.yaml")
PROFILE = CONFIG["profiles"][0]


def test_one_profile_named_koord_scheduler_without_leader_election() -> None:
    assert [p["schedulerName"] for p in CONFIG["profiles"]] == ["koord-scheduler"]
    assert CONFIG["leaderElection"] == {"leaderElect": False}
    assert CONFIG["clientConnection"] == {"kubeconfig": "/tmp/kubeconfig.yaml"}


@pytest.mark.parametrize(
    "point", ["preEnqueue", "preFilter", "postFilter", "reserve", "permit", "postBind"]
)
def test_the_gang_plugin_is_on_at(point: str) -> None:
    assert {"name": "Coscheduling"} in PROFILE["plugins"][point]["enabled"]


def test_the_gang_is_rejected_before_preemption_is_tried() -> None:
    post_filter = PROFILE["plugins"]["postFilter"]
    assert post_filter["disabled"] == [{"name": "*"}]
    assert [p["name"] for p in post_filter["enabled"]] == ["Coscheduling", "DefaultPreemption"]


def test_only_coscheduling_is_added_to_the_default_plugins() -> None:
    added = {p["name"] for point in PROFILE["plugins"].values() for p in point.get("enabled", [])}
    assert added == {"Coscheduling", "DefaultPreemption"}


def test_serves_plain_http_on_loopback_only() -> None:
    argv = koordinator.command(Path("/bin/koord-scheduler"), Path("/c.yaml"), 4242)
    assert argv[0] == "/bin/koord-scheduler"
    assert {"--config=/c.yaml", "--address=127.0.0.1", "--port=4242", "--secure-port=0"} <= set(
        argv
    )


def test_crds_are_read_from_the_build_cache() -> None:
    paths = koordinator.crd_paths(Path("/cache/koordinator/v1.7.0"))
    assert [p.parent for p in paths] == [Path("/cache/koordinator/v1.7.0/crd")] * 4
    assert {p.name for p in paths} == {
        "scheduling.sigs.k8s.io_podgroups.yaml",
        "scheduling.koordinator.sh_reservations.yaml",
        "scheduling.koordinator.sh_devices.yaml",
        "scheduling.koordinator.sh_clusternetworktopologies.yaml",
    }


def test_gangs_are_placed_in_the_network_topology_layer_they_name() -> None:
    # Both off by default in v1.7.0: the plugin's FindOneNode, and the tree it reads.
    assert PROFILE["pluginConfig"] == [
        {
            "name": "Coscheduling",
            "args": {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "CoschedulingArgs",
                "awareNetworkTopology": True,
            },
        }
    ]
    argv = koordinator.command(Path("/bin/koord-scheduler"), Path("/c.yaml"), 4242)
    assert "--enable-network-topology-manager=true" in argv
