"""Koordinator's scheduler (koord-scheduler) in the local cluster, as a second scheduler.

koord-scheduler is kube-scheduler with Koordinator's plugins compiled in. Only its gang
plugin (Coscheduling) is turned on here; every other Koordinator plugin needs the node agent
(koordlet) or the manager's CRDs, which the local cluster does not run. Its informers still
watch three kinds whatever the profile says (found by running it: without their CRDs it
keeps failing to list them), so those CRDs are installed from the pinned module
(build-koordinator.sh copies them into its cache), with the ClusterNetworkTopology CRD and
nothing else of Koordinator. Coscheduling is network-topology aware here
(``awareNetworkTopology``) and the scheduler runs its topology manager
(``--enable-network-topology-manager``), which builds its tree of domains from the
ClusterNetworkTopology named ``default`` every 10 seconds: both are off by default in v1.7.0,
and without the manager a gang whose pods name a layer is turned down.

The scheduler serves plain HTTP (healthz, metrics, its debug services) on 127.0.0.1; the
secure port is off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SCHEDULER_NAME = "koord-scheduler"
PLUGIN = "Coscheduling"
# The CRD files (under the module's config/crd/bases) of the kinds koord-scheduler's
# informers list at start: the scheduler-plugins PodGroup it shares, Reservation and Device,
# and the ClusterNetworkTopology its topology manager reads.
CRD_FILES = (
    "scheduling.sigs.k8s.io_podgroups.yaml",
    "scheduling.koordinator.sh_reservations.yaml",
    "scheduling.koordinator.sh_devices.yaml",
    "scheduling.koordinator.sh_clusternetworktopologies.yaml",
)
LOOPBACK = "127.0.0.1"


def configuration(kubeconfig: str) -> dict[str, Any]:
    """A KubeSchedulerConfiguration with one profile, ``koord-scheduler``: the default
    plugins plus Coscheduling at every extension point Koordinator's own deployment enables
    it at. No leader election, so a restarted scheduler takes over at once."""
    enabled = {"enabled": [{"name": PLUGIN}]}
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig},
        "leaderElection": {"leaderElect": False},
        "profiles": [
            {
                "schedulerName": SCHEDULER_NAME,
                "plugins": {
                    "preEnqueue": enabled,
                    "preFilter": enabled,
                    # Coscheduling's PostFilter rejects the whole gang when one member does
                    # not fit; it runs before preemption, as in Koordinator's deployment.
                    "postFilter": {
                        "disabled": [{"name": "*"}],
                        "enabled": [{"name": PLUGIN}, {"name": "DefaultPreemption"}],
                    },
                    "reserve": enabled,
                    "permit": enabled,
                    "postBind": enabled,
                },
                "pluginConfig": [
                    {
                        "name": PLUGIN,
                        "args": {
                            "apiVersion": "kubescheduler.config.k8s.io/v1",
                            "kind": "CoschedulingArgs",
                            # A gang's network-topology-spec places it in one domain of the
                            # layer it names (FindOneNode); without it the spec is not read.
                            "awareNetworkTopology": True,
                        },
                    }
                ],
            }
        ],
    }


def command(binary: Path, config: Path, http_port: int) -> list[str]:
    """koord-scheduler's command line: plain HTTP on loopback at ``http_port`` (its
    deprecated --address/--port pair, which otherwise binds 0.0.0.0:10251), no secure port."""
    return [
        str(binary),
        f"--config={config}",
        f"--address={LOOPBACK}",
        f"--port={http_port}",
        "--secure-port=0",
        # The ClusterNetworkTopology's tree, without which a gang naming a layer never binds.
        "--enable-network-topology-manager=true",
        "-v=2",
    ]


def crd_paths(directory: Path) -> list[Path]:
    """The CRDs to install, from build-koordinator.sh's cache ``directory``."""
    return [directory / "crd" / name for name in CRD_FILES]
