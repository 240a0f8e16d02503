"""The container images of hack/images: valid OCI layouts under the names the examples use,
and inside them pi computed by real mpirun, and sshd serving mpiuser on port 2222.

The images come from the build cache (`make images`); a cold cache builds them first. Running
programs in an image needs root: each run gets private mount, PID and network namespaces, so
every mount and process it makes ends with it.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hack.cluster import bin_dir, kubectl_delivery_image

from .layout import ImageLayout, extract_layers, read_layout

pytestmark = pytest.mark.images

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "hack" / "images" / "build.py"
FLAVOURS = ["openmpi", "openmpi5", "mpich", "intel"]
PI_IMAGES = {flavour: f"docker.io/mpioperator/mpi-pi:{flavour}" for flavour in FLAVOURS}
# The images the examples name, as containerd normalises them.
EXAMPLE_IMAGES = {
    "examples/pi/pi.yaml": PI_IMAGES["openmpi"],
    "examples/pi/pi-mpich.yaml": PI_IMAGES["mpich"],
    "examples/pi/pi-intel.yaml": PI_IMAGES["intel"],
}
WITH_ENTRYPOINT = {"mpich", "intel"}
KUBECTL_DELIVERY = kubectl_delivery_image()


@pytest.fixture(scope="module")
def image_tars() -> dict[str, Path]:
    """Image name -> layout tar, built (or found in the cache) by the project's tool."""
    subprocess.run([sys.executable, str(BUILD)], check=True, stdout=subprocess.DEVNULL)
    listing = subprocess.run(
        [sys.executable, str(BUILD), "--list"], check=True, capture_output=True, text=True
    ).stdout
    return {name: Path(path) for name, path in (line.split() for line in listing.splitlines())}


@pytest.fixture(scope="module")
def layouts(image_tars: dict[str, Path]) -> dict[str, ImageLayout]:
    diff_ids: dict[str, str] = {}
    return {name: read_layout(path, diff_ids) for name, path in image_tars.items()}


def test_every_layout_is_named_for_containerd(layouts: dict[str, ImageLayout]) -> None:
    for name, layout in layouts.items():
        assert layout.name == name
        assert layout.ref_name == name.rsplit(":", 1)[1]
        assert layout.config["rootfs"]["diff_ids"] == layout.diff_ids
        assert (layout.config["os"], layout.config["architecture"]) == ("linux", "amd64")


def test_examples_name_built_images(layouts: dict[str, ImageLayout]) -> None:
    for example, expected in EXAMPLE_IMAGES.items():
        images = set(re.findall(r"image:\s*(\S+)", (REPO / example).read_text()))
        assert {f"docker.io/{image}" for image in images} == {expected}
        assert expected in layouts


def test_pause_image_runs_its_static_program_unprivileged(
    layouts: dict[str, ImageLayout],
) -> None:
    (pause,) = [layout for name, layout in layouts.items() if name.startswith("localhost/pause:")]
    assert pause.config["config"]["Entrypoint"] == ["/pause"]
    assert pause.config["config"]["User"] == "65535:65535"
    assert len(pause.layer_digests) == 1


def test_kubectl_delivery_copies_the_built_kubectl_as_any_non_root_user(
    image_tars: dict[str, Path], layouts: dict[str, ImageLayout], tmp_path: Path
) -> None:
    """Run as an init container runs it: the image's entrypoint and environment, no command,
    as the image's user and as others, with umask 077, into a directory anyone may write to
    (an emptyDir is 0777). Each run leaves the kubectl build.sh built, mode 0755, owned by the
    uid that ran, replacing the last; another user runs it. A directory the user cannot
    write to fails the run."""
    if os.geteuid() != 0:
        pytest.fail("running images needs root (chroot)")
    layout = layouts[KUBECTL_DELIVERY]
    assert len(layout.layer_digests) == 2
    config = layout.config["config"]
    root = tmp_path / "root"
    root.mkdir()
    root.chmod(0o755)
    extract_layers(image_tars[KUBECTL_DELIVERY], root)
    env = dict(entry.split("=", 1) for entry in config["Env"])
    target = root / env["TARGET_DIR"].removeprefix("/")
    target.mkdir(parents=True)
    target.chmod(0o777)

    chroot = shutil.which("chroot")
    assert chroot is not None

    def run(user: str, *command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [chroot, f"--userspec={user}", str(root), *command],
            env=env,
            capture_output=True,
            text=True,
            umask=0o077,
        )

    built = (bin_dir(build=False) / "kubectl").read_bytes()
    for user in (config["User"], "1000:1000", "4242:4242"):
        done = run(user, *config["Entrypoint"])
        assert done.returncode == 0, done.stderr
        copied = target / "kubectl"
        status = copied.stat()
        assert (status.st_uid, stat.S_IMODE(status.st_mode)) == (int(user.split(":")[0]), 0o755)
        assert copied.read_bytes() == built
        assert sorted(p.name for p in target.iterdir()) == ["kubectl"]
    version = run("1000:1000", f"{env['TARGET_DIR']}/kubectl", "version", "--client")
    assert f"Client Version: {KUBECTL_DELIVERY.rsplit(':', 1)[1]}\n" in version.stdout

    target.chmod(0o755)
    refused = run(config["User"], *config["Entrypoint"])
    assert refused.returncode != 0
    assert "is not a directory this user can write to" in refused.stderr


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_pi_image_is_its_base_plus_one_layer(layouts: dict[str, ImageLayout], flavour: str) -> None:
    pi = layouts[PI_IMAGES[flavour]]
    (base,) = [
        layout
        for name, layout in layouts.items()
        if name.startswith("docker.io/mpioperator/") and name.endswith(f"/{flavour}:latest")
    ]
    assert pi.layer_digests[:-1] == base.layer_digests
    config = pi.config["config"]
    assert config["WorkingDir"] == "/home/mpiuser"
    assert config["Cmd"] == ["bash"]
    assert config.get("Entrypoint") == (["/entrypoint.sh"] if flavour in WITH_ENTRYPOINT else None)


def test_images_share_the_ssh_base_layer(layouts: dict[str, ImageLayout]) -> None:
    openmpi5 = layouts[PI_IMAGES["openmpi5"]].layer_digests
    intel = layouts[PI_IMAGES["intel"]].layer_digests
    assert openmpi5[0] == intel[0]
    assert len({openmpi5[1], intel[1], openmpi5[2], intel[2]}) == 4


def test_a_rebuild_from_the_cache_is_byte_identical(
    image_tars: dict[str, Path], tmp_path: Path
) -> None:
    """Layers, configs and layout tars depend only on the inputs, not on when they were made:
    one image (a Debian root filesystem made a base, a wheel, a compiled program) is written
    again into a fresh cache from the same downloaded and compiled inputs."""
    image = PI_IMAGES["openmpi5"]
    cache = Path(
        subprocess.run(
            [sys.executable, str(BUILD), "--print-dir"], check=True, capture_output=True, text=True
        ).stdout.strip()
    )
    (tmp_path / "images").mkdir()
    for shared in ("rootfs", "prefixes", "wheels", "debs", "programs"):
        (tmp_path / "images" / shared).symlink_to(cache.parent / shared)
    rebuilt = subprocess.run(
        [sys.executable, str(BUILD), "--image", image],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "MPI_OPERATOR_CACHE": str(tmp_path)},
    ).stdout.split()
    assert rebuilt == [str(tmp_path / "images" / cache.name / image_tars[image].name)]
    assert _same_file(image_tars[image], Path(rebuilt[0]))


def _same_file(a: Path, b: Path) -> bool:
    with a.open("rb") as left, b.open("rb") as right:
        while True:
            chunk = left.read(1 << 20)
            if chunk != right.read(1 << 20):
                return False
            if not chunk:
                return True


# ---- running the images ------------------------------------------------------------------


@pytest.fixture(scope="module")
def rootfs(image_tars: dict[str, Path]) -> Iterator[dict[str, Path]]:
    """Each pi image unpacked into a directory; removed after the module."""
    if os.geteuid() != 0:
        pytest.fail("running images needs root (chroot and namespaces)")
    with tempfile.TemporaryDirectory(prefix="mpi-operator-rootfs.") as scratch:
        roots: dict[str, Path] = {}
        for flavour in FLAVOURS:
            root = Path(scratch) / flavour
            root.mkdir()
            extract_layers(image_tars[PI_IMAGES[flavour]], root)
            roots[flavour] = root
        yield roots


NAMESPACES = ["unshare", "--mount", "--pid", "--net", "--uts", "--fork", "--kill-child"]
WORKERS = ["worker-0", "worker-1"]
# The hosts' network, inside the run's own network namespace.
SUBNET = "10.99.0"


def _as_mpiuser(
    root: str, image: dict[str, Any], command: list[str], extra_env: tuple[str, ...] = ()
) -> str:
    """A shell command running command in the image as mpiuser (uid 1000), as a runtime would:
    the image's environment, working directory and entrypoint."""
    env = [*image["Env"], "HOME=/home/mpiuser", "USER=mpiuser", *extra_env]
    inside = " ".join(
        [f"cd {shlex.quote(image['WorkingDir'])} && exec env -i"]
        + [shlex.quote(word) for word in [*env, *command]]
    )
    return f"chroot --userspec=1000:1000 {root} /bin/sh -c {shlex.quote(inside)}"


def run_in_image(
    root: Path,
    config: dict[str, Any],
    script: str,
    hostfile: tuple[str, ...] = (),
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """Runs a shell script as mpiuser on host "launcher" of the image, beside two more hosts,
    worker-0 and worker-1, that only run sshd as mpiuser the way the examples' workers do.

    Like pods, every host has its own network and UTS namespace (address, host name), joined
    by a bridge; all of them live in new mount, PID and network namespaces, so nothing
    outlives the run and no packet leaves it. The job's SSH key is made afresh in ~/.ssh, as
    the operator's Secret would provide it. With hostfile lines, the launcher runs as the
    operator's launcher does: /etc/mpi/hostfile in place and K_MPI_JOB_ROLE=launcher."""
    image = config["config"]
    r = shlex.quote(str(root))
    hosts = [f"{SUBNET}.1 launcher", "127.0.0.1 localhost"]
    workers = []
    sshd = ["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"]
    for index, worker in enumerate(WORKERS):
        address = f"{SUBNET}.{index + 2}"
        hosts.append(f"{address} {worker}")
        # The worker's namespaces exist once unshare runs; the parent then hands it a link.
        inside = f"""
while ! ip link show peer{index} >/dev/null 2>&1; do sleep 0.05; done
ip link set peer{index} name eth0 && ip addr add {address}/24 dev eth0
ip link set eth0 up && ip link set lo up && hostname {worker}
exec {_as_mpiuser(r, image, sshd)}"""
        workers.append(f"""
unshare --net --uts sh -c {shlex.quote(inside)} 2>{r}/tmp/{worker}.log &
worker=$!
while [ "$(readlink /proc/$worker/ns/net)" = "$(readlink /proc/self/ns/net)" ]; do sleep 0.02; done
ip link add host{index} type veth peer name peer{index}
ip link set peer{index} netns $worker
ip link set host{index} master br0 && ip link set host{index} up""")
    launcher = [*image.get("Entrypoint", []), "bash", "-c", script]
    setup = f"""
set -e
mount --rbind /dev {r}/dev
mount -t tmpfs tmpfs {r}/dev/shm
mount -t proc proc {r}/proc
mount -t sysfs -o ro sysfs {r}/sys
mount -t tmpfs tmpfs {r}/tmp
mkdir -p {r}/home/mpiuser/.ssh
mount -t tmpfs -o mode=0700,uid=1000,gid=1000 tmpfs {r}/home/mpiuser/.ssh
printf '%s\\n' {" ".join(shlex.quote(h) for h in hosts)} > {r}/tmp/hosts
mkdir -p {r}/etc/mpi && mount -t tmpfs tmpfs {r}/etc/mpi
printf '%s\\n' {" ".join(shlex.quote(line) for line in hostfile)} > {r}/etc/mpi/hostfile
touch {r}/etc/hosts {r}/etc/resolv.conf {r}/tmp/resolv.conf
mount --bind {r}/tmp/hosts {r}/etc/hosts
mount --bind {r}/tmp/resolv.conf {r}/etc/resolv.conf
chroot --userspec=1000:1000 {r} ssh-keygen -q -t rsa -b 2048 -N '' -f /home/mpiuser/.ssh/id_rsa
cp {r}/home/mpiuser/.ssh/id_rsa.pub {r}/home/mpiuser/.ssh/authorized_keys
ip link set lo up
ip link add br0 type bridge && ip addr add {SUBNET}.1/24 dev br0 && ip link set br0 up
{"".join(workers)}
hostname launcher
# Not exec: this shell is the namespace's init, and only it (still root) dies with unshare
# when a timeout kills that, taking every other process of the run with it.
{_as_mpiuser(r, image, launcher, ("K_MPI_JOB_ROLE=launcher",) if hostfile else ())}
"""
    command = [*NAMESPACES, "sh", "-c", setup]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        # Killing unshare ended the run; keep what it printed for the failure message.
        output = [_text(expired.stdout), _text(expired.stderr), f"timed out after {timeout}s"]
        return subprocess.CompletedProcess(command, -9, output[0], "\n".join(output[1:]))


def _text(output: bytes | str | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


PI_LINE = re.compile(r"pi is approximately (\d+\.\d+)")


def assert_pi(output: str) -> None:
    match = PI_LINE.search(output)
    assert match, output
    assert f"{float(match.group(1)):.6f}" == f"{math.pi:.6f}"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_pi_runs_under_mpirun_on_one_host(
    rootfs: dict[str, Path], layouts: dict[str, ImageLayout], flavour: str
) -> None:
    oversubscribe = "--oversubscribe " if flavour.startswith("openmpi") else ""
    result = run_in_image(
        rootfs[flavour], layouts[PI_IMAGES[flavour]].config, f"mpirun {oversubscribe}-n 2 ./pi"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ranks: 2\nrank 0 on launcher\nrank 1 on launcher\n" in result.stdout
    assert_pi(result.stdout)


# mpirun on the launcher reaching each worker through its sshd (port 2222 from the image's
# ssh_config), one rank per worker.
HOSTFILE_LINE = {
    "openmpi": "{} slots=1",
    "openmpi5": "{} slots=1",
    "mpich": "{}:1",
    "intel": "{}:1",
}
MPIRUN = {
    "openmpi": "mpirun --hostfile /etc/mpi/hostfile -n 2 ./pi",
    "openmpi5": "mpirun --hostfile /etc/mpi/hostfile -n 2 ./pi",
    "mpich": "mpirun -f /etc/mpi/hostfile -n 2 ./pi",
    # The operator sets I_MPI_PERHOST for Intel MPI, which otherwise fills the first host.
    "intel": "I_MPI_PERHOST=1 mpirun -f /etc/mpi/hostfile -n 2 ./pi",
}
ACROSS_WORKERS = """
set -e
for worker in {workers}; do
    for _ in $(seq 100); do ssh -o BatchMode=yes "$worker" true && break; sleep 0.1; done
done
env {mpirun}
"""


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_pi_runs_across_workers_over_ssh(
    rootfs: dict[str, Path], layouts: dict[str, ImageLayout], flavour: str
) -> None:
    script = ACROSS_WORKERS.format(workers=" ".join(WORKERS), mpirun=MPIRUN[flavour])
    hostfile = tuple(HOSTFILE_LINE[flavour].format(worker) for worker in WORKERS)
    config = layouts[PI_IMAGES[flavour]].config
    result = run_in_image(rootfs[flavour], config, script, hostfile)
    assert result.returncode == 0, result.stdout + result.stderr
    if flavour in WITH_ENTRYPOINT:
        # The entrypoint waited for the launcher's own name and each hostfile host.
        for host in ("launcher", *WORKERS):
            assert f"Resolved {host}\n" in result.stdout, result.stdout
    assert "ranks: 2\nrank 0 on worker-0\nrank 1 on worker-1\n" in result.stdout, result.stdout
    assert_pi(result.stdout)
