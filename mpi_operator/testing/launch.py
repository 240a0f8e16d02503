"""The operator's command line, for the programs that start it as a process: the e2e tests,
the benchmarks and the demo.

``python -m mpi_operator`` imports the package from the working directory before the installed
one, so a caller that runs the command in a source tree runs that tree's operator.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import fields
from typing import Final

from mpi_operator.operator.options import Options, flag_name

# Probes and metrics that only this machine reads.
LOOPBACK: Final = "127.0.0.1"


def operator_command(
    options: Options, extra_args: Sequence[str] = (), python: str = sys.executable
) -> list[str]:
    """The command that runs the operator with ``options``: a flag for each option that differs
    from the operator's default (an empty ``namespace`` is left to ``$KUBEFLOW_NAMESPACE``), then
    ``extra_args``, last so that they win."""
    defaults = Options()
    flags = [
        f"--{flag_name(field.name)}={_flag_value(value)}"
        for field in fields(options)
        if (value := getattr(options, field.name)) != getattr(defaults, field.name)
    ]
    return [python, "-m", "mpi_operator", *flags, *extra_args]


def _flag_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
