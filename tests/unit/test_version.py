"""One version, written once (mpi_operator/__init__.py), and every place that shows it agrees:
the package metadata, the chart's version and appVersion, the operator image's name and label,
the overlays' image tag and the kubectl-delivery image the operator asks for by default."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import yaml

from mpi_operator import __version__

REPO = Path(__file__).resolve().parents[2]


def test_the_package_reads_its_version_from_the_one_place() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "mpi_operator/__init__.py"
    assert metadata.version("mpi-operator") == __version__


def test_the_chart_version_and_app_version_are_the_operators() -> None:
    chart = yaml.safe_load((REPO / "charts" / "mpi-operator" / "Chart.yaml").read_text())
    assert chart["version"] == __version__
    assert chart["appVersion"] == __version__


def test_the_licence_is_apache_2_0_in_the_metadata_and_the_file() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("                                 Apache License\n")
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
