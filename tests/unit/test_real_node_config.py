"""What a real node of the local cluster is configured with: the settings this kind of
machine needs, and a pod network from which nothing leaves the machine."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from hack.cluster import realnodes

NETWORK = realnodes.Network("mpi0123456789", "10.250.7.0/24")
CLUSTER = Path("/cache/clusters/c")
PATHS = realnodes.node_paths(CLUSTER, "real-node-0")


def test_pod_network_has_no_gateway_role_no_masquerade_and_no_route_out() -> None:
    conflist = realnodes.cni_conflist(NETWORK, CLUSTER)
    bridge = conflist["plugins"][0]
    assert bridge["type"] == "bridge" and bridge["bridge"] == "mpi0123456789"
    assert bridge["isGateway"] is False
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["routes"] == []
    # Addresses below .32 are the service range; its first is the bridge's (the API server's).
    assert bridge["ipam"]["ranges"] == [
        [{"subnet": "10.250.7.0/24", "gateway": "10.250.7.1", "rangeStart": "10.250.7.32"}]
    ]
    assert NETWORK.service_range == "10.250.7.0/27"
    assert bridge["ipam"]["dataDir"] == str(CLUSTER / "cni-ipam")


def test_containerd_keeps_everything_under_the_node_directory() -> None:
    config = tomllib.loads(realnodes.containerd_config(PATHS))
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["netns_mounts_under_state_dir"] is True
    assert cri["sandbox_image"] == realnodes.PAUSE_IMAGE
    assert cri["stream_server_address"] == "127.0.0.1"
    runc = cri["containerd"]["runtimes"]["runc"]["options"]
    assert runc["Root"] == str(PATHS.runc_root)
    owned = [config["root"], config["state"], config["grpc"]["address"], cri["cni"]["conf_dir"]]
    assert all(path.startswith(str(PATHS.root) + "/") for path in owned), owned
    assert "io.containerd.internal.v1.opt" in config["disabled_plugins"]


def test_kubelet_fits_this_machine_and_resolves_through_the_bridge() -> None:
    config = realnodes.kubelet_config(PATHS, NETWORK, 10250, 10248, Path("/pki/ca.crt"))
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupsPerQOS"] is False
    assert config["failCgroupV1"] is False
    assert config["failSwapOn"] is False
    assert config["enforceNodeAllocatable"] == []
    assert config["evictionHard"] == {}
    assert config["makeIPTablesUtilChains"] is False
    assert config["clusterDNS"] == ["10.250.7.1"]
    assert config["resolvConf"] == ""
    assert config["address"] == "10.250.7.1"
    assert config["healthzBindAddress"] == "127.0.0.1"
    assert config["authentication"]["anonymous"] == {"enabled": False}
    assert config["authentication"]["x509"] == {"clientCAFile": "/pki/ca.crt"}


def test_coredns_serves_the_cluster_domain_on_the_bridge_and_forwards_nothing() -> None:
    corefile = realnodes.corefile(NETWORK, "/k/kubeconfig", 9153)
    assert "bind 10.250.7.1" in corefile
    assert "kubernetes cluster.local" in corefile
    assert "kubeconfig /k/kubeconfig" in corefile
    assert "forward" not in corefile


@pytest.mark.parametrize("cluster", ["a", "e2e-default-real", "x" * 200])
def test_bridge_name_fits_an_interface_name(cluster: str) -> None:
    name = realnodes.bridge_name(cluster)
    assert len(name) <= 15 and name.startswith("mpi")
    assert name != realnodes.bridge_name(cluster + "-other")


def test_a_socket_path_too_long_for_unix_sockets_is_refused(tmp_path: Path) -> None:
    deep = realnodes.node_paths(tmp_path / ("d" * 120), "real-node-0")
    with pytest.raises(realnodes.RealNodeError, match="longer than"):
        realnodes.write_node_files(deep, NETWORK, tmp_path, 1, 2, Path("/ca"))
    assert not deep.root.exists()


def test_a_node_whose_kubelet_socket_would_not_fit_is_refused() -> None:
    # containerd's socket fits below this cluster directory; the kubelet's deepest does not.
    cluster = Path("/" + "d" * 70)
    deep = realnodes.node_paths(cluster, "real-node-0")
    assert len(str(deep.socket)) <= realnodes.MAX_SOCKET_PATH
    with pytest.raises(realnodes.RealNodeError, match="the kubelet's socket path"):
        realnodes.write_node_files(deep, NETWORK, cluster, 1, 2, Path("/ca"))
    assert not deep.root.exists()


def test_the_longest_e2e_cluster_name_fits_under_roots_default_cache() -> None:
    cluster = Path("/root/.cache/mpi-operator/clusters/e2e-scheduler-plugins-real")
    paths = realnodes.node_paths(cluster, "real-node-1")
    assert paths.root == cluster / "nodes" / "1"
    socket = paths.kubelet_root / realnodes.KUBELET_DEEPEST_SOCKET
    assert len(str(socket)) <= realnodes.MAX_UNIX_SOCKET_PATH
