"""The kubectl-delivery image as hack/images declares it, without building it: tagged with the
version of the kubectl the cluster tooling builds, and a config that runs it as
training-operator runs kubeflow/kubectl-delivery: with no command, as a non-root user, into
$TARGET_DIR. kubeflow.org/v1 launchers ask for the operator's own image by default; this one
stands for the images that run the same way."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from hack.cluster import kubectl_delivery_image
from hack.cluster.images import images_tool
from mpi_operator.api import constants as c
from mpi_operator.operator.options import Options

REPO = Path(__file__).resolve().parents[2]
VERSIONS = REPO / "hack" / "cluster" / "versions.env"
SHELL_WORDS = {":", "[", "echo", "else", "exit", "fi", "if", "set", "then", "trap"}


@pytest.fixture(scope="module")
def image() -> Any:
    return images_tool().Spec.load().kubectl_delivery.image()


def test_the_name_is_tagged_with_the_kubernetes_version_of_versions_env() -> None:
    match = re.search(r"^K8S_VERSION=(v\d+\.\d+\.\d+)$", VERSIONS.read_text(), re.MULTILINE)
    assert match, VERSIONS
    expected = f"docker.io/library/mpi-operator-kubectl-delivery:{match.group(1)}"
    assert kubectl_delivery_image() == expected


def test_the_operator_asks_for_its_own_image_by_default() -> None:
    """An install that runs the operator has its kubectl-delivery image: the same one, which
    the real nodes import too (nothing is pulled). This image stands for training-operator's,
    which runs with no command as well."""
    operator_image = images_tool().Spec.load().operator.name
    assert operator_image == c.DEFAULT_KUBECTL_DELIVERY_IMAGE
    assert Options().static_facts().kubectl_delivery_image == operator_image


def test_it_runs_its_entrypoint_with_no_command_as_a_numeric_non_root_user(image: Any) -> None:
    assert image.entrypoint == ["/deliver-kubectl.sh"]
    assert image.cmd is None
    uid, gid = (int(part) for part in image.user.split(":"))
    assert uid == gid != 0
    env = dict(entry.split("=", 1) for entry in image.env)
    assert env == {"PATH": "/bin", "TARGET_DIR": "/opt/kube"}


def test_the_entrypoint_copies_the_images_kubectl_with_busybox_applets() -> None:
    tool = images_tool()
    script = (tool.FILES / tool.DELIVER_KUBECTL.removeprefix("/")).read_text()
    assert script.startswith("#!/bin/sh\n")
    assert f"cp {tool.IMAGE_KUBECTL} " in script
    # The image has nothing but busybox's applets the build links: the interpreter and the
    # first word of every line that is no shell keyword, builtin or assignment.
    words = {
        line.split()[0]
        for line in script.splitlines()[1:]
        if line.strip() and not line.lstrip().startswith("#")
    }
    commands = {"sh", *(word for word in words - SHELL_WORDS if "=" not in word)}
    assert commands <= set(tool.BUSYBOX_APPLETS), commands - set(tool.BUSYBOX_APPLETS)
