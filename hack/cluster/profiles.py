"""The Kubernetes versions a local cluster's control plane can run.

Every cluster runs etcd, kwok, kubectl and the kubelet of real nodes from the first profile's
build (``K8S_VERSION`` of versions.env). A second profile replaces kube-apiserver,
kube-controller-manager and kube-scheduler with their build at a newer version
(``build.sh --kubernetes MINOR``) and switches on what it exists for.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from hack.cluster.binaries import versions
from hack.cluster.state import HERE, ClusterError, log


@dataclass(frozen=True)
class ControlPlane:
    """kube-apiserver, kube-controller-manager and kube-scheduler: where they are, their
    version, and the feature gates and API versions all three are started with."""

    bins: Path
    version: str
    feature_gates: tuple[str, ...] = ()
    runtime_config: tuple[str, ...] = ()


@dataclass(frozen=True)
class KubernetesProfile:
    """A control plane newer than the first profile's."""

    # What `build.sh --kubernetes` and `up --kubernetes` take.
    minor: str
    feature_gates: tuple[str, ...]
    runtime_config: tuple[str, ...]

    def control_plane(self, build: bool) -> ControlPlane:
        """Its binaries, built first if missing and allowed."""
        script = HERE / "build.sh"
        option = ["--kubernetes", self.minor]
        out = subprocess.run(
            ["bash", str(script), "--print", *option], capture_output=True, text=True, timeout=60
        )
        if out.returncode != 0:
            raise ClusterError(f"build.sh --print {' '.join(option)} failed: {out.stderr.strip()}")
        bins = Path(out.stdout.strip())
        if not (bins / ".complete").is_file():
            if not build:
                raise ClusterError(
                    f"Kubernetes {self.minor} is not built in {bins}; "
                    f"run `bash {script} {' '.join(option)}`"
                )
            log(f"Kubernetes {self.minor} missing in {bins}; building (cold: about 15 minutes)")
            subprocess.run(["bash", str(script), *option], check=True, stdout=sys.stderr)
        return ControlPlane(
            bins=bins,
            version=versions(bins)["K8S_VERSION"],
            feature_gates=self.feature_gates,
            runtime_config=self.runtime_config,
        )


PROFILES: dict[str, KubernetesProfile] = {
    profile.minor: profile
    for profile in (
        # Kubernetes' own gang scheduling: GenericWorkload (beta, off by default) serves
        # Workload and PodGroup, lets pods join one through spec.schedulingGroup, runs the
        # PodGroup protection controller and adds the GangScheduling plugin to the default
        # scheduler profile; the API server serves scheduling.k8s.io/v1beta1, a beta API
        # version, only when asked to. TopologyAwareWorkloadScheduling (alpha, off by default)
        # keeps a PodGroup's spec.schedulingConstraints (dropped without it) and adds the
        # TopologyPlacementGenerator plugin, which places a gang in one domain of a node label.
        KubernetesProfile(
            "1.37",
            feature_gates=("GenericWorkload=true", "TopologyAwareWorkloadScheduling=true"),
            runtime_config=("scheduling.k8s.io/v1beta1=true",),
        ),
    )
}


def control_plane(kubernetes: str | None, bins: Path, build: bool) -> ControlPlane:
    """The control plane of profile ``kubernetes`` (None: the first one, whose binaries are
    ``bins``)."""
    if kubernetes is None:
        return ControlPlane(bins=bins, version=versions(bins)["K8S_VERSION"])
    profile = PROFILES.get(kubernetes)
    if profile is None:
        raise ClusterError(
            f"unknown Kubernetes profile {kubernetes!r}; choose one of {tuple(PROFILES)}"
        )
    return profile.control_plane(build)
