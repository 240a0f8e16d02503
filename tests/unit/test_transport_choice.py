"""The transport is chosen in one place: no module outside ``desired/transports/`` branches on
``spec.transport``. ``api/rules.py`` reads it for another question (which API created the job,
as the CRD records it), and the CRD's own rules (``api/crd.py``) are text for the API server.

Branching, in the syntax tree: a comparison with ``<x>.transport`` or a ``TRANSPORT_*``
constant (but for ``is None``, which asks whether it is set, not which it is), a ``match``
on it, a table looked up by it, or ``uses_ssh``."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
PACKAGES: Final = (ROOT / "mpi_operator", ROOT / "gang")
TRANSPORTS: Final = ROOT / "mpi_operator" / "desired" / "transports"
WHICH_API: Final = ROOT / "mpi_operator" / "api" / "rules.py"
CONSTANTS: Final = frozenset({"TRANSPORT_SSH", "TRANSPORT_KUBECTL_EXEC"})


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.FunctionDef):
        return node.name
    return None


def _names_transport(node: ast.AST) -> bool:
    return any(_name_of(part) in {"transport", *CONSTANTS} for part in ast.walk(node))


def _compares_transport(node: ast.Compare) -> bool:
    operands = [node.left, *node.comparators]
    asks_if_set = all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops) and any(
        isinstance(operand, ast.Constant) and operand.value is None for operand in operands
    )
    return not asks_if_set and any(_names_transport(operand) for operand in operands)


def _is_branch(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare):
        return _compares_transport(node)
    if isinstance(node, ast.Match):
        return _names_transport(node.subject)
    if isinstance(node, ast.Subscript):
        return _names_transport(node.slice)
    if isinstance(node, ast.Call):
        looked_up = _name_of(node.func) == "get" and isinstance(node.func, ast.Attribute)
        return looked_up and bool(node.args) and _names_transport(node.args[0])
    return _name_of(node) == "uses_ssh"


def _branches(tree: ast.AST) -> Iterator[int]:
    """The line of each branch on the transport in ``tree``."""
    for node in ast.walk(tree):
        if _is_branch(node):
            yield getattr(node, "lineno", 0)


def _branches_in(source: str) -> list[int]:
    return sorted(set(_branches(ast.parse(source))))


def _modules() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted(package.rglob("*.py"))


def test_no_module_but_the_transports_branches_on_the_transport() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _modules()
        if not path.is_relative_to(TRANSPORTS) and path != WHICH_API
        for line in _branches_in(path.read_text())
    ]
    assert found == []


def test_the_transports_package_is_where_the_choice_is_made() -> None:
    chooser = (TRANSPORTS / "__init__.py").read_text()
    assert _branches_in(chooser) != []


def test_each_way_of_branching_is_seen() -> None:
    assert _branches_in("if job.uses_ssh:\n    pass\n") == [1]
    assert _branches_in("ssh = job.spec.transport == c.TRANSPORT_SSH\n") == [1]
    assert _branches_in("ssh = TRANSPORT_SSH != mode\n") == [1]
    assert _branches_in("ssh = transport in (c.TRANSPORT_KUBECTL_EXEC,)\n") == [1]
    assert _branches_in("match job.spec.transport:\n    case _:\n        pass\n") == [1]
    assert _branches_in("mounts = MOUNTS[job.spec.transport]\n") == [1]
    assert _branches_in("mounts = MOUNTS.get(job.spec.transport, ())\n") == [1]
    assert _branches_in("if spec.transport is None:\n    spec.transport = default\n") == []
    assert _branches_in("yield from one_of(spec.transport, c.TRANSPORTS)\n") == []
