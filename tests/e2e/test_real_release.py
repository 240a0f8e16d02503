"""A release, installed as its user installs it: a cluster whose real nodes imported the
release's image tar (and the pause and pi images the jobs run, nothing else), the release's
install YAML applied and nothing from the checkout, then pi through kubeflow.org/v1 (the
launcher's kubectl delivered by the operator's own image, named by digest) and through
kubeflow.org/v2beta1, each to Succeeded.

The release is written by hack/release.py (what `make release` runs) into a temporary
directory. The one change to the install: the Deployment's CPU request goes, as in
test_real_install.py, because a pi job asks for three whole CPUs of the two nodes' four.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.cluster.images import images_tool

from .clusters import REPO, ClusterProvider, E2ECluster, wait_until
from .installs import images_build, kubectl, operator_pods, ready
from .operator import GROUP, PLURAL, pods_of, wait_for_condition
from .realpods import assert_pi, launcher_log

pytestmark = [pytest.mark.e2e, pytest.mark.realnodes]

NAMESPACE = "mpi-operator"
# What the jobs' pods run: the sandbox and the examples' image.
JOB_IMAGES = ("localhost/pause:1", "docker.io/mpioperator/mpi-pi:openmpi")
EXAMPLES = {
    "v1": REPO / "examples" / "v1" / "pi.yaml",
    "v2beta1": REPO / "examples" / "pi" / "pi.yaml",
}
ROLLOUT_TIMEOUT = 240
JOB_TIMEOUT = 300


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, str(REPO / "hack" / "release.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    checked = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return out


@pytest.fixture(scope="module")
def version() -> str:
    return str(images_tool().project_version())


@pytest.fixture(scope="module")
def release_image(dist: Path, version: str) -> str:
    """``<repository>@sha256:...`` as the release's image tar names it."""
    with tarfile.open(dist / f"mpi-operator-{version}.oci.tar") as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
    names = [m["annotations"]["io.containerd.image.name"] for m in index["manifests"]]
    (by_digest,) = [name for name in names if "@sha256:" in name]
    return str(by_digest)


@pytest.fixture(scope="module")
def images_dir(dist: Path, version: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release's image tar and the jobs' images, and nothing else, for the nodes."""
    directory = tmp_path_factory.mktemp("images")
    (directory / "mpi-operator.tar").symlink_to(dist / f"mpi-operator-{version}.oci.tar")
    built = images_build("--no-kubectl")
    tars = dict(line.split(" ", 1) for line in images_build("--list").splitlines())
    for index, name in enumerate(JOB_IMAGES):
        assert tars[name] in built, (name, built)
        (directory / f"job-{index}.tar").symlink_to(tars[name])
    return directory


@pytest.fixture(scope="module")
def cluster(cluster_provider: ClusterProvider, images_dir: Path) -> E2ECluster:
    found = cluster_provider.get("default", real_nodes=True, images_dir=images_dir)
    if found.provider != "local":
        pytest.skip("the release's image tar is imported into the local cluster's real nodes")
    return found


@pytest.fixture(scope="module")
def installed(cluster: E2ECluster, dist: Path, version: str) -> dict[str, Any]:
    """The operator's pod, once the release's install YAML runs it Ready."""
    kubectl(cluster, "apply", "--server-side", "-f", str(dist / f"mpi-operator-{version}.yaml"))
    kubectl(
        cluster,
        "patch",
        f"--namespace={NAMESPACE}",
        "deployment/mpi-operator",
        "--type=json",
        "--patch",
        json.dumps(
            [{"op": "remove", "path": "/spec/template/spec/containers/0/resources/requests/cpu"}]
        ),
    )

    def one_ready() -> dict[str, Any] | None:
        pods = operator_pods(cluster, NAMESPACE)
        if len(pods) != 1 or not ready(pods[0]):
            return None
        if pods[0]["spec"]["containers"][0]["resources"].get("requests", {}).get("cpu"):
            return None  # the rollout's first pod, still asking for CPU
        return pods[0]

    pod: dict[str, Any] = wait_until(
        one_ready,
        ROLLOUT_TIMEOUT,
        interval=1,
        message=lambda: (
            f"the operator Ready: {json.dumps(operator_pods(cluster, NAMESPACE))[:2000]}"
        ),
    )
    return pod


def test_the_install_runs_the_release_image_by_digest(
    installed: dict[str, Any], release_image: str
) -> None:
    (container,) = installed["spec"]["containers"]
    assert container["image"] == release_image
    assert {e["name"]: e.get("value") for e in container["env"]}[
        "KUBECTL_DELIVERY_IMAGE"
    ] == release_image
    (status,) = installed["status"]["containerStatuses"]
    assert status["imageID"].rsplit("@", 1)[-1] == release_image.rsplit("@", 1)[-1], status
    assert status["restartCount"] == 0


@pytest.mark.parametrize("api_version", ["v1", "v2beta1"])
def test_pi_succeeds(
    cluster: E2ECluster,
    installed: dict[str, Any],
    release_image: str,
    namespace_factory: Callable[..., str],
    api_version: str,
) -> None:
    namespace = namespace_factory(cluster, restricted=True)
    job = yaml.safe_load(EXAMPLES[api_version].read_text())
    name = job["metadata"]["name"]
    # The job stays to be read after it finished (the v1 example's TTL would delete it).
    job["spec"]["runPolicy"].pop("ttlSecondsAfterFinished", None)
    cluster.custom.create_namespaced_custom_object(GROUP, api_version, namespace, PLURAL, job)
    try:
        done = wait_for_condition(cluster, namespace, name, "Succeeded", timeout=JOB_TIMEOUT)
    except BaseException:
        sys.stderr.write(
            kubectl(cluster, "logs", f"--namespace={NAMESPACE}", "deploy/mpi-operator")
        )
        raise
    assert_pi(launcher_log(cluster, namespace, name))
    launchers = pods_of(cluster, namespace, name, "launcher")
    assert launchers, name
    init = [c.to_dict() for c in launchers[0].spec.init_containers or []]
    if api_version == "v1":
        assert done["spec"]["transport"] == "KubectlExec"
        (delivery,) = [c for c in init if c["name"] == "kubectl-delivery"]
        assert delivery["image"] == release_image
    else:
        assert done["spec"]["transport"] == "SSH"
        assert not [c for c in init if c["name"] == "kubectl-delivery"]
    # Finished pods free their CPUs for the next job.
    wait_until(
        lambda: (
            not [
                p
                for p in cluster.list_pods(namespace)
                if p.get("status", {}).get("phase") in ("Pending", "Running")
            ]
        ),
        120,
        interval=1,
        message=lambda: f"the pods of {name} to stop",
    )
