"""Hostile manifests end in one line per problem, in bounded time and memory, never a traceback.

Each case broke ``render`` before these limits existed: alias bombs grew without bound in the
writer, recursive anchors and deep nesting raised RecursionError, YAML-only values (NaN,
binary) reached the quantity code or the JSON writer.
"""

from __future__ import annotations

import io
import sys
from typing import Any

import pytest
import yaml

from mpi_operator.api.bounds import MAX_DEPTH, MAX_VALUES, document_errors
from mpi_operator.api.errors import InvalidMPIJobError
from mpi_operator.api.validation import parse_mpijob
from mpi_operator.cli import main
from mpi_operator.manifest import MAX_BYTES, MAX_YAML_DEPTH, ManifestError, read_documents
from mpi_operator.testing.wrappers import MPIJobWrapper

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 10)}]\n"
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def render_stderr(monkeypatch: pytest.MonkeyPatch, capsys: Any, text: str) -> list[str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert main(["render", "-f", "-"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    return err.splitlines()


def job_text_with(template_extra: str) -> str:
    """The default test job as YAML, with text added under the launcher's pod spec."""
    text = yaml.safe_dump(MPIJobWrapper().obj(), sort_keys=False)
    marker = "        spec:\n"
    assert marker in text
    return text.replace(marker, marker + template_extra, 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            ALIAS_BOMB,
            f"more than {MAX_VALUES} values (YAML aliases counted at every use)",
            id="alias bomb",
        ),
        pytest.param(
            nested(MAX_YAML_DEPTH + 1),
            f"nested more than {MAX_YAML_DEPTH} levels",
            id="nesting beyond the parser's limit",
        ),
        pytest.param(
            nested(100_000),
            f"nested more than {MAX_YAML_DEPTH} levels",
            id="nesting a hundred thousand levels",
        ),
        pytest.param(
            "a: " + "x" * MAX_BYTES, f"a manifest may have at most {MAX_BYTES}", id="too large"
        ),
    ],
)
def test_manifests_beyond_the_limits_are_refused_while_reading(text: str, expected: str) -> None:
    with pytest.raises(ManifestError, match=r".*") as refused:
        read_documents(text)
    assert expected in str(refused.value)


@pytest.mark.parametrize(
    ("template_extra", "expected"),
    [
        pytest.param(
            "          loop: &loop [*loop]\n",
            "spec.mpiReplicaSpecs[Launcher].template.spec.loop[0]: contains itself",
            id="recursive anchor",
        ),
        pytest.param(
            "          overhead: {cpu: .nan}\n",
            "spec.mpiReplicaSpecs[Launcher].template.spec.overhead.cpu: must be a finite number",
            id="NaN",
        ),
        pytest.param(
            "          overhead: {cpu: 1.0e+309}\n",
            "spec.mpiReplicaSpecs[Launcher].template.spec.overhead.cpu: must be a finite number",
            id="a float beyond double precision",
        ),
        pytest.param(
            "          priority: 123456789012345678901234567890\n",
            "spec.mpiReplicaSpecs[Launcher].template.spec.priority: "
            "must be an integer that fits in 64 bits",
            id="an integer beyond 64 bits",
        ),
        pytest.param(
            "          blob: !!binary aGVsbG8=\n",
            "spec.mpiReplicaSpecs[Launcher].template.spec.blob: must be a string, number, "
            "boolean, list or object; YAML type bytes has no JSON form",
            id="binary",
        ),
        pytest.param(
            "          1: one\n",
            "spec.mpiReplicaSpecs[Launcher].template.spec: keys must be strings, found 1",
            id="a number as key",
        ),
        pytest.param(
            f"          deep: {nested(MAX_DEPTH)}\n",
            f"nested more than {MAX_DEPTH} levels deep",
            id="nesting beyond the document limit",
        ),
    ],
)
def test_documents_beyond_the_limits_name_the_field(
    monkeypatch: pytest.MonkeyPatch, capsys: Any, template_extra: str, expected: str
) -> None:
    lines = render_stderr(monkeypatch, capsys, job_text_with(template_extra))
    assert len(lines) == 1
    assert expected in lines[0]


def test_an_alias_bomb_in_the_operators_input_is_refused_by_path() -> None:
    # The operator gets documents, not text: the same limit applies to the shared structure.
    leaf = ["x"] * 10
    for _ in range(8):
        leaf = [leaf] * 10
    obj = MPIJobWrapper().pod_spec_field("Launcher", "bomb", leaf).obj()
    errors = document_errors(obj)
    assert [str(error) for error in errors] == [
        f"<root>: has more than {MAX_VALUES} values (YAML aliases counted at every use); "
        "an MPIJob is far smaller"
    ]


def test_deep_nesting_in_the_operators_input_never_recurses() -> None:
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(sys.getrecursionlimit() * 3):
        inner["k"] = {}
        inner = inner["k"]
    obj = MPIJobWrapper().obj()
    obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["deep"] = deep
    with pytest.raises(InvalidMPIJobError) as refused:
        parse_mpijob(obj)
    [error] = refused.value.errors
    assert error.message == f"nested more than {MAX_DEPTH} levels deep"


def test_a_lone_surrogate_from_json_is_refused_by_path() -> None:
    # libyaml refuses "\ud800" in a manifest; JSON from the API server decodes it.
    obj = MPIJobWrapper().pod_spec_field("Launcher", "hostname", "\ud800").obj()
    assert [str(error) for error in document_errors(obj)] == [
        "spec.mpiReplicaSpecs[Launcher].template.spec.hostname: "
        "must be valid Unicode text (it contains a lone surrogate)"
    ]
