"""The machine check that `make demo` and `make test` run first, against described machines."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "hack" / "prerequisites.py"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prerequisites_under_test", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up while the class is made.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class FakeMachine:
    """A Debian machine with every prerequisite but ``without``; ``run`` records commands and
    an apt-get install puts its packages' files in place."""

    def __init__(self, tool: ModuleType, without: set[str], **facts: Any) -> None:
        self.files = {p.provides for p in tool.PACKAGES if p.name not in without}
        self.venv = "python3-venv" not in without
        self.commands: list[list[str]] = []
        self.tool = tool
        self.machine = tool.Machine(
            exists=self.files.__contains__,
            go_version=facts.get("go_version", "go1.26.8"),
            python=facts.get("python", (3, 11)),
            has_venv=lambda: self.venv,
            root=facts.get("root", False),
            has_apt=facts.get("has_apt", True),
        )

    def run(self, command: list[str]) -> int:
        self.commands.append(command)
        if "install" in command:
            for package in self.tool.PACKAGES:
                if package.name in command:
                    self.files.add(package.provides)
                    self.venv = self.venv or package.name == "python3-venv"
        return 0


def test_a_complete_machine_passes_without_running_anything(tool: ModuleType) -> None:
    fake = FakeMachine(tool, without=set())
    assert tool.check(fake.machine, install=True, run=fake.run) == []
    assert fake.commands == []


def test_a_missing_package_is_named_with_the_command_that_installs_it(tool: ModuleType) -> None:
    fake = FakeMachine(tool, without={"mmdebstrap"}, root=False)
    assert tool.check(fake.machine, install=True, run=fake.run) == [
        "missing Debian packages: mmdebstrap (the images real pods run); install them with: "
        "sudo apt-get install -y --no-install-recommends mmdebstrap"
    ]
    assert fake.commands == [], "nothing is installed or built without root"


def test_as_root_the_missing_packages_are_installed(tool: ModuleType) -> None:
    fake = FakeMachine(tool, without={"containerd", "runc", "python3-venv"}, root=True)
    assert tool.check(fake.machine, install=True, run=fake.run) == []
    environment = ["env", "DEBIAN_FRONTEND=noninteractive"]
    assert fake.commands == [
        [*environment, "apt-get", "update", "-qq"],
        [
            *environment,
            *("apt-get", "install", "-y", "--no-install-recommends"),
            *("python3-venv", "containerd", "runc", "-qq"),
        ],
    ]


def test_without_install_root_only_reports(tool: ModuleType) -> None:
    fake = FakeMachine(tool, without={"runc"}, root=True)
    [problem] = tool.check(fake.machine, install=False, run=fake.run)
    assert problem.endswith("install them with: apt-get install -y --no-install-recommends runc")
    assert fake.commands == []


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (
            {"go_version": None},
            "Go 1.26 or newer is required (no go command on PATH)",
        ),
        (
            {"go_version": "go1.19.8"},
            "Go 1.26 or newer is required (found go1.19.8); the cluster's Kubernetes, kwok and "
            "Volcano builds need it",
        ),
        ({"python": (3, 10)}, "Python 3.11 or newer is required (found 3.10)"),
    ],
)
def test_tools_no_package_provides_are_named(
    tool: ModuleType, facts: dict[str, Any], expected: str
) -> None:
    fake = FakeMachine(tool, without=set(), **facts)
    assert tool.check(fake.machine, install=True, run=fake.run) == [expected]


@pytest.mark.parametrize("target", ["demo", "test"])
def test_make_checks_the_machine_before_anything_else(target: str) -> None:
    """The check is the first command `make demo` and `make test` run: before the virtualenv,
    the lint, the cluster's binaries or the images."""
    # Run from `make test` itself, make would inherit its level and flags and say which
    # directory it enters.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    plan = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.splitlines()
    assert plan[0].endswith("hack/prerequisites.py --install"), plan[:3]


def test_the_machine_this_runs_on_has_everything(tool: ModuleType) -> None:
    assert tool.main([]) == 0, "make test itself checked this machine"


def test_an_unknown_flag_is_refused(tool: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert tool.main(["--now"]) == 2
    assert capsys.readouterr().err == "usage: prerequisites.py [--install]\n"
