"""The hostfile, discover_hosts.sh and their ConfigMap, string for string as upstream."""

from __future__ import annotations

import pytest

from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.desired.config import discover_hosts_script, hostfile, new_config_map
from mpi_operator.testing.wrappers import MPIJobWrapper, child_labels, owner_references

NO_DOMAIN = ClusterFacts()
CLUSTER_LOCAL = ClusterFacts(cluster_domain="cluster.local")


# Upstream's TestNewConfigMap cases. "zero explicit workers" is a launcher-only job here:
# the worker count comes from the job, and a Worker spec with 0 replicas is invalid.
@pytest.mark.parametrize(
    ("job", "facts", "expected"),
    [
        (
            MPIJobWrapper("openmpi-without-slots", "tenant-a").run_launcher_as_worker().workers(2),
            NO_DOMAIN,
            "openmpi-without-slots-launcher.openmpi-without-slots.tenant-a.svc slots=1\n"
            "openmpi-without-slots-worker-0.openmpi-without-slots.tenant-a.svc slots=1\n"
            "openmpi-without-slots-worker-1.openmpi-without-slots.tenant-a.svc slots=1\n",
        ),
        (
            MPIJobWrapper("openmpi-without-slots", "tenant-a").run_launcher_as_worker().workers(2),
            CLUSTER_LOCAL,
            "openmpi-without-slots-launcher.openmpi-without-slots.tenant-a.svc.cluster.local"
            " slots=1\n"
            "openmpi-without-slots-worker-0.openmpi-without-slots.tenant-a.svc.cluster.local"
            " slots=1\n"
            "openmpi-without-slots-worker-1.openmpi-without-slots.tenant-a.svc.cluster.local"
            " slots=1\n",
        ),
        (
            MPIJobWrapper("openmpi-without-slots", "tenant-a").run_launcher_as_worker(),
            NO_DOMAIN,
            "openmpi-without-slots-launcher.openmpi-without-slots.tenant-a.svc slots=1\n",
        ),
        (
            MPIJobWrapper("openmpi-without-slots", "tenant-a").workers(2),
            NO_DOMAIN,
            "openmpi-without-slots-worker-0.openmpi-without-slots.tenant-a.svc slots=1\n"
            "openmpi-without-slots-worker-1.openmpi-without-slots.tenant-a.svc slots=1\n",
        ),
        (
            MPIJobWrapper("openmpi-with-slots", "tenant-a").slots_per_worker(10).workers(1),
            NO_DOMAIN,
            "openmpi-with-slots-worker-0.openmpi-with-slots.tenant-a.svc slots=10\n",
        ),
        (
            MPIJobWrapper("openmpi-with-slots", "tenant-a").slots_per_worker(10).workers(1),
            CLUSTER_LOCAL,
            "openmpi-with-slots-worker-0.openmpi-with-slots.tenant-a.svc.cluster.local slots=10\n",
        ),
        (
            MPIJobWrapper("intelmpi-with-slots", "project-x")
            .implementation(c.INTEL_MPI)
            .slots_per_worker(10)
            .workers(1),
            NO_DOMAIN,
            "intelmpi-with-slots-worker-0.intelmpi-with-slots.project-x.svc:10\n",
        ),
        (
            MPIJobWrapper("intelmpi-with-slots", "project-x")
            .implementation(c.INTEL_MPI)
            .slots_per_worker(10)
            .workers(1),
            CLUSTER_LOCAL,
            "intelmpi-with-slots-worker-0.intelmpi-with-slots.project-x.svc.cluster.local:10\n",
        ),
        (
            MPIJobWrapper("mpich-with-slots", "project-x")
            .implementation(c.MPICH)
            .slots_per_worker(10)
            .workers(1),
            NO_DOMAIN,
            "mpich-with-slots-worker-0.mpich-with-slots.project-x.svc:10\n",
        ),
        (
            MPIJobWrapper("mpich-with-slots", "project-x")
            .implementation(c.MPICH)
            .slots_per_worker(10)
            .workers(1),
            CLUSTER_LOCAL,
            "mpich-with-slots-worker-0.mpich-with-slots.project-x.svc.cluster.local:10\n",
        ),
    ],
    ids=[
        "OpenMPI without slots, enable launcher as worker",
        "OpenMPI with cluster domain, enable launcher as worker",
        "OpenMPI without slots, zero explicit workers",
        "OpenMPI without slots, disable launcher as worker",
        "OpenMPI with slots",
        "OpenMPI with cluster domain",
        "IntelMPI with slots",
        "IntelMPI with cluster domain",
        "MPICH with slots",
        "MPICH with cluster domain",
    ],
)
def test_hostfile_lists_hosts_in_the_implementation_format(
    job: MPIJobWrapper, facts: ClusterFacts, expected: str
) -> None:
    assert hostfile(job.job(), facts, {}) == expected


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (MPIJobWrapper("pi", "ns"), ""),
        (
            MPIJobWrapper("pi", "ns").slots_per_worker(0).workers(1),
            "pi-worker-0.pi.ns.svc slots=0\n",
        ),
        (
            MPIJobWrapper("pi", "ns").implementation(c.MPICH).run_launcher_as_worker().workers(1),
            "pi-launcher.pi.ns.svc:1\npi-worker-0.pi.ns.svc:1\n",
        ),
    ],
    ids=[
        "no workers and launcher not a worker: empty hostfile",
        "zero slots are written as zero",
        "MPICH launcher as worker comes first with the same slots",
    ],
)
def test_hostfile_edge_cases(job: MPIJobWrapper, expected: str) -> None:
    assert hostfile(job.job(), NO_DOMAIN, {}) == expected


def test_hostfile_follows_the_spec_not_the_running_pods() -> None:
    job = MPIJobWrapper("pi", "ns").workers(3).job()
    config_map = new_config_map(job, NO_DOMAIN, running_worker_names=["pi-worker-0"])
    assert config_map["data"]["hostfile"].count("\n") == 3
    assert config_map["data"]["discover_hosts.sh"].count("echo") == 1


RUNNING = ["pi-worker-0", "pi-worker-1"]


# Upstream's TestUpdateDiscoverHostsInConfigMap cases.
@pytest.mark.parametrize(
    ("launcher_as_worker", "facts", "running", "expected"),
    [
        (False, NO_DOMAIN, [], "#!/bin/sh\n"),
        (
            False,
            NO_DOMAIN,
            RUNNING,
            "#!/bin/sh\necho pi-worker-0.pi.ns.svc\necho pi-worker-1.pi.ns.svc\n",
        ),
        (True, NO_DOMAIN, [], "#!/bin/sh\necho pi-launcher.pi.ns.svc\n"),
        (
            True,
            NO_DOMAIN,
            RUNNING,
            "#!/bin/sh\n"
            "echo pi-launcher.pi.ns.svc\n"
            "echo pi-worker-0.pi.ns.svc\n"
            "echo pi-worker-1.pi.ns.svc\n",
        ),
        (
            False,
            CLUSTER_LOCAL,
            RUNNING,
            "#!/bin/sh\n"
            "echo pi-worker-0.pi.ns.svc.cluster.local\n"
            "echo pi-worker-1.pi.ns.svc.cluster.local\n",
        ),
        (
            True,
            CLUSTER_LOCAL,
            RUNNING,
            "#!/bin/sh\n"
            "echo pi-launcher.pi.ns.svc.cluster.local\n"
            "echo pi-worker-0.pi.ns.svc.cluster.local\n"
            "echo pi-worker-1.pi.ns.svc.cluster.local\n",
        ),
        (
            False,
            NO_DOMAIN,
            ["pi-worker-2", "pi-worker-10", "pi-worker-0", "pi-worker-1"],
            # Plain string order, as upstream: worker-10 sorts before worker-2.
            "#!/bin/sh\n"
            "echo pi-worker-0.pi.ns.svc\n"
            "echo pi-worker-1.pi.ns.svc\n"
            "echo pi-worker-10.pi.ns.svc\n"
            "echo pi-worker-2.pi.ns.svc\n",
        ),
    ],
    ids=[
        "no cluster domain, launcher as worker disabled, no running pods",
        "no cluster domain, launcher as worker disabled, with running pods",
        "no cluster domain, launcher as worker enabled, no running pods",
        "no cluster domain, launcher as worker enabled, with running pods",
        "with cluster domain, launcher as worker disabled, with running pods",
        "with cluster domain, launcher as worker enabled, with running pods",
        "pods are sorted by name",
    ],
)
def test_discover_hosts_script_lists_launcher_then_running_workers(
    launcher_as_worker: bool, facts: ClusterFacts, running: list[str], expected: str
) -> None:
    job = MPIJobWrapper("pi", "ns").run_launcher_as_worker(launcher_as_worker).workers(11).job()
    assert discover_hosts_script(job, facts, running, {}) == expected


def test_discover_hosts_script_accepts_any_iterable_once() -> None:
    job = MPIJobWrapper("pi", "ns").workers(2).job()
    names = iter(["pi-worker-1", "pi-worker-0"])
    assert discover_hosts_script(job, NO_DOMAIN, names, {}) == (
        "#!/bin/sh\necho pi-worker-0.pi.ns.svc\necho pi-worker-1.pi.ns.svc\n"
    )


def test_config_map_object_is_owned_labelled_and_holds_both_files() -> None:
    job = MPIJobWrapper("pi", "ns").workers(1).job()
    assert new_config_map(job, NO_DOMAIN) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "pi-config",
            "namespace": "ns",
            "labels": child_labels("pi"),
            "ownerReferences": owner_references("pi"),
        },
        "data": {
            "hostfile": "pi-worker-0.pi.ns.svc slots=1\n",
            "discover_hosts.sh": "#!/bin/sh\n",
        },
    }


# -- topology order: domain, then node, once every worker is placed ----------------------------

RACKS = {
    "pi-worker-0": ("rack-b", "node-b1"),
    "pi-worker-1": ("rack-a", "node-a2"),
    "pi-worker-2": ("rack-b", "node-b1"),
    "pi-worker-3": ("rack-a", "node-a1"),
}


def test_placed_workers_are_listed_by_domain_then_node_then_index() -> None:
    job = MPIJobWrapper("pi", "ns").workers(4).job()
    lines = hostfile(job, NO_DOMAIN, RACKS).splitlines()
    assert [line.split(".")[0] for line in lines] == [
        "pi-worker-3",
        "pi-worker-1",
        "pi-worker-0",
        "pi-worker-2",
    ]


def test_the_order_waits_until_every_worker_is_placed() -> None:
    job = MPIJobWrapper("pi", "ns").workers(4).job()
    some = {name: placement for name, placement in RACKS.items() if name != "pi-worker-2"}
    assert hostfile(job, NO_DOMAIN, some) == hostfile(job, NO_DOMAIN, {})


def test_a_launcher_that_works_too_stays_first() -> None:
    job = MPIJobWrapper("pi", "ns").workers(4).run_launcher_as_worker().job()
    lines = hostfile(job, NO_DOMAIN, RACKS).splitlines()
    assert [line.split(".")[0] for line in lines][:2] == ["pi-launcher", "pi-worker-3"]


def test_discover_hosts_lists_running_workers_in_topology_order() -> None:
    job = MPIJobWrapper("pi", "ns").workers(4).job()
    script = discover_hosts_script(job, NO_DOMAIN, ["pi-worker-0", "pi-worker-1"], RACKS)
    hosts = [line.split()[1].split(".")[0] for line in script.splitlines()[1:]]
    assert hosts == ["pi-worker-1", "pi-worker-0"]
