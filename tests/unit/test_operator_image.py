"""The operator image two ways: the Dockerfile (for Docker users) and hack/images (built here
without a container engine) must put the same things in the image's config, and the pinned
dependencies of the second must be what pyproject.toml asks for."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from hack.cluster.images import images_tool
from mpi_operator import __version__

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Stage:
    """What one Dockerfile stage sets, in the order the image config records it."""

    base: str
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    user: str = ""
    working_dir: str = "/"
    ports: list[str] = field(default_factory=list)
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    run: list[str] = field(default_factory=list)
    copies: list[str] = field(default_factory=list)


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined: list[str] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    return [
        (word.upper(), rest.strip()) for word, _, rest in (j.strip().partition(" ") for j in joined)
    ]


def _pairs(arguments: str) -> dict[str, str]:
    return dict(word.split("=", 1) for word in shlex.split(arguments))


def parse_dockerfile(text: str) -> Stage:
    """The final stage, with global ARG defaults substituted into its FROM."""
    args: dict[str, str] = {}
    stage: Stage | None = None
    for instruction, arguments in _instructions(text):
        if instruction == "ARG" and stage is None:
            args.update(_pairs(arguments))
        elif instruction == "FROM":
            base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], arguments.split()[0])
            stage = Stage(base)
        elif stage is None:
            raise AssertionError(f"{instruction} before FROM")
        elif instruction == "ENV":
            stage.env.update(_pairs(arguments))
        elif instruction == "LABEL":
            stage.labels.update(_pairs(arguments))
        elif instruction == "USER":
            stage.user = arguments
        elif instruction == "WORKDIR":
            stage.working_dir = arguments
        elif instruction == "EXPOSE":
            stage.ports += [p if "/" in p else f"{p}/tcp" for p in arguments.split()]
        elif instruction == "ENTRYPOINT":
            stage.entrypoint = json.loads(arguments)
        elif instruction == "CMD":
            stage.cmd = json.loads(arguments)
        elif instruction == "RUN":
            stage.run.append(arguments)
        elif instruction == "COPY":
            stage.copies.append(arguments)
    assert stage is not None, "no FROM"
    return stage


@pytest.fixture(scope="module")
def docker() -> Stage:
    return parse_dockerfile((REPO / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def spec() -> Any:
    return images_tool().Spec.load()


@pytest.fixture(scope="module")
def image(spec: Any) -> Any:
    return spec.operator.image()


def test_both_run_the_same_python_minor_version(docker: Stage, spec: Any) -> None:
    match = re.fullmatch(r"python:(\d+\.\d+)-slim(-\w+)?", docker.base)
    assert match, f"the Dockerfile's base {docker.base!r} is not python:X.Y-slim"
    assert match.group(1) == spec.operator.python
    assert f"python{spec.operator.python}" in spec.rootfs["operator"]
    # The host Python writes the image's bytecode, which only the same minor version reads.
    assert spec.operator.site_packages.endswith(f"/python{spec.operator.python}/site-packages")


@pytest.mark.parametrize(
    ("what", "from_dockerfile", "from_spec"),
    [
        ("user", lambda d: d.user, lambda i: i.user),
        ("entrypoint", lambda d: d.entrypoint, lambda i: i.entrypoint),
        ("working directory", lambda d: d.working_dir, lambda i: i.working_dir),
        ("exposed ports", lambda d: sorted(d.ports), lambda i: sorted(i.ports)),
        ("labels", lambda d: d.labels, lambda i: i.labels),
        # Docker drops the base image's CMD when a stage sets ENTRYPOINT.
        ("command", lambda d: d.cmd, lambda i: i.cmd),
    ],
)
def test_image_configs_agree(
    docker: Stage, image: Any, what: str, from_dockerfile: Any, from_spec: Any
) -> None:
    assert from_dockerfile(docker) == from_spec(image), what


def test_environments_agree(docker: Stage, image: Any, spec: Any) -> None:
    built = dict(entry.split("=", 1) for entry in image.env)
    assert docker.env.pop("PATH") == f"{spec.operator.venv}/bin:$PATH"
    assert built.pop("PATH").startswith(f"{spec.operator.venv}/bin:")
    assert docker.env == built


def test_both_name_the_same_unprivileged_user(docker: Stage, spec: Any) -> None:
    operator = spec.operator
    assert docker.user == f"{operator.uid}:{operator.uid}"
    (setup,) = [run for run in docker.run if "useradd" in run]
    assert f"groupadd --system --gid {operator.uid} {operator.user}" in setup
    assert f"useradd --system --uid {operator.uid} --gid {operator.uid}" in setup
    assert setup.rstrip().endswith(f" {operator.user}")
    assert operator.uid != 0


def test_both_install_into_the_same_virtual_environment(docker: Stage, spec: Any) -> None:
    venv = spec.operator.venv
    assert f"--from=builder {venv} {venv}" in docker.copies
    assert spec.operator.entrypoint[0] == f"{venv}/bin/python"


def test_the_deployment_runs_the_image_as_its_user() -> None:
    deployment = yaml.safe_load((REPO / "deploy" / "base" / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    operator = images_tool().Spec.load().operator
    assert pod["securityContext"]["runAsUser"] == operator.uid
    assert pod["securityContext"]["runAsGroup"] == operator.uid
    container = pod["containers"][0]
    ports = sorted(f"{p['containerPort']}/tcp" for p in container["ports"])
    assert ports == sorted(f"{port}/tcp" for port in operator.ports)
    assert "command" not in container, "the image's entrypoint starts the operator"


def test_the_image_is_named_as_deploy_names_it(image: Any) -> None:
    kustomization = (REPO / "deploy" / "base" / "kustomization.yaml").read_text()
    (entry,) = yaml.safe_load(kustomization)["images"]
    assert f"docker.io/library/{entry['name']}:{entry['newTag']}" == image.name
    assert image.name == f"docker.io/library/mpi-operator:{__version__}"


def test_both_label_the_image_with_the_version(docker: Stage, image: Any) -> None:
    assert docker.labels["org.opencontainers.image.version"] == __version__
    assert image.labels["org.opencontainers.image.version"] == __version__


def test_both_carry_the_kubectl_of_the_pinned_kubernetes_release(spec: Any) -> None:
    """The image is kubeflow.org/v1 launchers' kubectl-delivery image: `mpi-operator
    deliver-kubectl` copies the kubectl it finds on $PATH."""
    text = (REPO / "Dockerfile").read_text()
    match = re.search(r"^ARG KUBECTL_IMAGE=registry\.k8s\.io/kubectl:(\S+)$", text, re.MULTILINE)
    assert match, "the Dockerfile names no registry.k8s.io/kubectl image"
    assert match.group(1) == images_tool().kubernetes_version()
    docker = parse_dockerfile(text)
    assert f"--from=kubectl /bin/kubectl {spec.operator.kubectl}" in docker.copies
    image = spec.operator.image()
    assert "operator-kubectl" in image.layers
    path_dirs = dict(entry.split("=", 1) for entry in image.env)["PATH"].split(":")
    assert str(Path(spec.operator.kubectl).parent) in path_dirs


def test_pinned_wheels_satisfy_the_project_dependencies(spec: Any) -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    pins = {canonicalize_name(name): version for name, version in spec.operator.wheels.items()}
    assert len(pins) == len(spec.operator.wheels), "a package is pinned twice"
    # The image installs the extra `curl` too (the Dockerfile's `mpi-operator[curl]`).
    installed = [
        *pyproject["project"]["dependencies"],
        *pyproject["project"]["optional-dependencies"]["curl"],
    ]
    for line in installed:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not pinned in spec.toml [operator.wheels]"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{requirement.name}=={pins[name]} is outside pyproject.toml's {requirement.specifier}"
        )


@pytest.mark.parametrize(
    ("dockerfile", "message"),
    [
        ("USER 0\n", "USER before FROM"),
        ("FROM x\nENTRYPOINT [oops]\n", "Expecting value"),
    ],
)
def test_the_dockerfile_parser_refuses_what_it_cannot_read(dockerfile: str, message: str) -> None:
    with pytest.raises((AssertionError, ValueError), match=re.escape(message)):
        parse_dockerfile(dockerfile)
