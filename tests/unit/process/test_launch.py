"""The command line the e2e tests, the benchmarks and the demo start the operator with."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from mpi_operator.operator.options import LOG_FORMATS, Options
from mpi_operator.testing.launch import operator_command

from .test_options import parse


@pytest.fixture(autouse=True)
def no_namespace_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBEFLOW_NAMESPACE", raising=False)


def other_than(default: object) -> object:
    """A value the operator accepts for an option, and not its default."""
    if default in LOG_FORMATS:
        return next(other for other in LOG_FORMATS if other != default)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int | float):
        return default + 1
    return "changed"


def test_every_option_changed_from_its_default_reaches_the_operator() -> None:
    # Built from Options' own fields, so an option added later is covered too; a flag spelled
    # unlike its option makes the parser exit.
    defaults = Options()
    changed = {field.name: other_than(getattr(defaults, field.name)) for field in fields(Options)}
    options = replace(defaults, **changed)
    argv = operator_command(options, python="py")
    assert argv[:3] == ["py", "-m", "mpi_operator"]
    assert len(argv) == 3 + len(changed)
    assert parse(*argv[3:]) == options


def test_options_at_their_defaults_pass_no_flag() -> None:
    assert operator_command(Options(), python="py") == ["py", "-m", "mpi_operator"]


def test_extra_args_come_last_and_win() -> None:
    argv = operator_command(Options(leader_elect=False), ["--leader-elect=true"])
    assert argv[-2:] == ["--leader-elect=false", "--leader-elect=true"]
    assert parse(*argv[3:]).leader_elect is True
