"""The ``mpi-operator`` command.

``mpi-operator render -f JOB.yaml`` prints what the operator would create for a job, without a
cluster; ``mpi-operator version`` prints the version; ``mpi-operator deliver-kubectl`` is what
the operator's image runs as a kubeflow.org/v1 launcher's kubectl-delivery init container.
Anything that is not a known command is the operator's own command line (see
``operator/options.py``): upstream's
binary takes its flags (``--namespace``, ``--gang-scheduling``, ...) with no subcommand, and
deployments that pass them must keep working, so commands only ever claim a bare first word.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, BinaryIO, Final, NoReturn, TextIO

import gang
from mpi_operator import __version__
from mpi_operator.api.cluster import STANDARD_OPERATOR_ACCOUNT
from mpi_operator.field_errors import one_line
from mpi_operator.operator.options import (
    OptionsError,
    add_operator_flags,
    ignored_flags,
    options_from,
)

PROG: Final = "mpi-operator"
USAGE_ERROR: Final = 2
# What a shell reports for a process killed by SIGPIPE (128 + 13).
BROKEN_PIPE: Final = 141
_INT32: Final = range(-(2**31), 2**31)
_INTEGER: Final = re.compile(r"^[+-]?[0-9]+$")


class UsageError(Exception):
    """A problem with the command line or its input, reported as one line on stderr."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage block: scripts read stderr line by line.
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if not args and os.environ.get(TARGET_DIR):
            # How a launcher runs a kubectl-delivery image: no command, no arguments, and
            # $TARGET_DIR naming where kubectl goes. The operator itself never has $TARGET_DIR.
            return _deliver_kubectl([])
        if args and args[0] in COMMANDS:
            return COMMANDS[args[0]](args[1:])
        if args and not args[0].startswith("-"):
            raise UsageError(
                f"{PROG}: unknown command {args[0]!r}; commands: {', '.join(COMMANDS)} "
                f"(see {PROG} --help)"
            )
        return _operator(args)
    except UsageError as error:
        print(one_line(str(error)), file=sys.stderr)
        return USAGE_ERROR
    except SystemExit as done:  # --help and --version
        return done.code if isinstance(done.code, int) else 0
    except BrokenPipeError:
        # The reader went away (`render ... | head`): stop quietly, as a Unix filter does, and
        # keep the interpreter's final flush from failing on the closed pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE


# -- the operator ----------------------------------------------------------------------------


def _operator_parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description="Kubernetes operator for kubeflow.org/v2beta1 and v1 MPIJobs.",
        epilog=(
            "commands:\n"
            "  render           print the objects the operator would create for a job "
            "(see mpi-operator render --help)\n"
            "  version          print the version\n"
            "  deliver-kubectl  copy this image's kubectl to $TARGET_DIR (a kubeflow.org/v1 "
            "launcher's init container)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    parser.add_argument("--help", action="help", help="show this help and exit")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    # Go's flag package, which upstream uses, also accepts a single dash.
    parser.add_argument("-h", "-help", action="help", help=argparse.SUPPRESS)
    parser.add_argument(
        "-version", action="version", version=f"{PROG} {__version__}", help=argparse.SUPPRESS
    )
    add_operator_flags(parser)
    return parser


def _operator(argv: list[str]) -> int:
    args = _operator_parser().parse_args(argv)
    try:
        options = options_from(args)
    except OptionsError as error:
        raise UsageError(f"{PROG}: {error}") from None
    # Imported here: rendering must not pay for the operator's runtime.
    from mpi_operator.operator.main import run

    return run(options, ignored_flags(args))


# -- render ----------------------------------------------------------------------------------


def _render_parser() -> _Parser:
    parser = _Parser(
        prog=f"{PROG} render",
        description=(
            "Print every object the operator would create for an MPIJob, in creation order, "
            "as a YAML stream. Nothing is sent to a cluster. An invalid job prints one "
            "'<field path>: <message>' line per problem on stderr and exits 2."
        ),
    )
    parser.add_argument(
        "-f",
        "--filename",
        required=True,
        metavar="JOB.yaml",
        help="the MPIJob manifest (YAML or JSON); '-' reads standard input",
    )
    parser.add_argument(
        "--gang-scheduling",
        metavar="NAME",
        default="",
        help=f"as the operator's flag: {gang.flag_help()}",
    )
    parser.add_argument(
        "--priority-class",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help=(
            "a PriorityClass of the cluster and its value, used to order the gang's "
            "minResources; repeat for several classes"
        ),
    )
    parser.add_argument(
        "--cluster-domain",
        metavar="DOMAIN",
        default="",
        help="as the operator's flag: appended to the workers' host names in the hostfile",
    )
    parser.add_argument(
        "--operator-account",
        metavar="NAMESPACE/NAME",
        default=STANDARD_OPERATOR_ACCOUNT,
        help=(
            "the ServiceAccount the operator runs as, which no pod template in its namespace "
            "may name; empty when unknown (default: %(default)s, the standard install's)"
        ),
    )
    return parser


def _render(argv: list[str]) -> int:
    # Imported here, as the operator's runtime is for the operator: neither start pays for
    # what only the other uses.
    from mpi_operator.api.errors import InvalidMPIJobError
    from mpi_operator.sdk.offline import iter_render

    args = _render_parser().parse_args(argv)
    source = "<stdin>" if args.filename == "-" else args.filename
    try:
        objects = iter_render(
            _only_document(_read(args.filename, source), source),
            gang_scheduling=args.gang_scheduling or None,
            cluster_domain=args.cluster_domain,
            priority_classes=_priority_classes(args.priority_class),
            operator_account=args.operator_account,
        )
    except InvalidMPIJobError as invalid:
        for error in invalid.errors:
            print(error, file=sys.stderr)
        return USAGE_ERROR
    except ValueError as bad_option:
        raise UsageError(f"{PROG} render: {bad_option}") from None
    # A valid job always renders, so the objects are written as they are built: an error
    # leaves stdout empty, and thousands of worker pods are never all in memory at once.
    for obj in objects:
        sys.stdout.write(dump_objects([obj]))
    return 0


def _priority_classes(values: Sequence[str]) -> dict[str, int]:
    classes: dict[str, int] = {}
    for raw in values:
        name, equals, value = raw.partition("=")
        if not equals or not name or not _INTEGER.match(value) or int(value) not in _INT32:
            raise UsageError(
                f"{PROG} render: --priority-class {raw!r}: expected NAME=VALUE with a 32-bit "
                "integer VALUE, e.g. high=1000"
            )
        if name in classes:
            raise UsageError(f"{PROG} render: --priority-class {name!r} is given more than once")
        classes[name] = int(value)
    return classes


def _read(filename: str, source: str) -> str:
    """The manifest's text, read no further than its size limit."""
    from mpi_operator.manifest import ManifestError, read_bounded

    try:
        if filename == "-":
            stdin: TextIO = sys.stdin
            binary: BinaryIO | None = getattr(stdin, "buffer", None)
            if binary is None:  # a text stream in its place: a program running main in process
                return read_bounded(stdin)
            return read_bounded(binary).decode("utf-8")
        with open(filename, "rb") as file:
            status = os.fstat(file.fileno())
            size = status.st_size if stat.S_ISREG(status.st_mode) else None
            return read_bounded(file, size).decode("utf-8")
    except ManifestError as error:
        raise UsageError(f"{PROG} render: {source}: {error}") from None
    except OSError as error:
        raise UsageError(
            f"{PROG} render: cannot read {source}: {error.strerror or error}"
        ) from None
    except UnicodeDecodeError:
        raise UsageError(f"{PROG} render: cannot read {source}: not UTF-8 text") from None


def _only_document(text: str, source: str) -> Any:
    from mpi_operator.manifest import ManifestError, read_documents

    try:
        documents = read_documents(text)
    except ManifestError as error:
        raise UsageError(f"{PROG} render: {source}: {error}") from None
    if not documents:
        raise UsageError(f"{PROG} render: {source}: no MPIJob in the input")
    if len(documents) > 1:
        raise UsageError(
            f"{PROG} render: {source}: expected one MPIJob, found {len(documents)} YAML documents"
        )
    return documents[0]


# -- version ---------------------------------------------------------------------------------


def _version(argv: list[str]) -> int:
    _Parser(prog=f"{PROG} version", description="Print the version.").parse_args(argv)
    print(f"{PROG} {__version__}")
    return 0


# -- deliver-kubectl -------------------------------------------------------------------------

TARGET_DIR: Final = "TARGET_DIR"
KUBECTL: Final = "kubectl"


def _deliver_kubectl(argv: list[str]) -> int:
    """Copies the kubectl on $PATH to $TARGET_DIR/kubectl, mode 0755, as training-operator's
    kubectl-delivery image does, so the operator's image serves as that image too. The copy is
    renamed into place: a rerun replaces what an earlier one left, whichever user wrote it."""
    _Parser(
        prog=f"{PROG} deliver-kubectl",
        description=f"Copy kubectl from $PATH to ${TARGET_DIR}/kubectl, mode 0755.",
    ).parse_args(argv)
    target = os.environ.get(TARGET_DIR, "")
    if not target:
        raise UsageError(f"{PROG} deliver-kubectl: ${TARGET_DIR} must name a directory")
    if not os.path.isdir(target) or not os.access(target, os.W_OK):
        raise UsageError(
            f"{PROG} deliver-kubectl: {target} is not a directory this user can write to"
        )
    source = shutil.which(KUBECTL)
    if source is None:
        raise UsageError(f"{PROG} deliver-kubectl: no {KUBECTL} on $PATH in this image")
    partial = os.path.join(target, f".{KUBECTL}.partial")
    try:
        shutil.copyfile(source, partial)
        os.chmod(partial, 0o755)
        os.replace(partial, os.path.join(target, KUBECTL))
    except OSError as error:
        raise UsageError(f"{PROG} deliver-kubectl: {error}") from None
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    print(f"{PROG} deliver-kubectl: copied {source} to {os.path.join(target, KUBECTL)}")
    return 0


# -- output ----------------------------------------------------------------------------------


@functools.cache
def _manifest_dumper() -> type[Any]:
    """PyYAML's dumper for objects as a person reads them: builder key order, multi-line text
    as blocks (built on first use: the operator never writes YAML)."""
    import yaml

    class ManifestDumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            # Builders share sub-objects (owner references, labels); anchors would leak that.
            return True

    def represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
        style = "|" if "\n" in text else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)

    ManifestDumper.add_representer(str, represent_text)
    return ManifestDumper


def dump_objects(objects: Sequence[Mapping[str, Any]]) -> str:
    """A YAML stream, one ``---`` document per object, in the given order."""
    import yaml

    return yaml.dump_all(
        [dict(obj) for obj in objects],
        Dumper=_manifest_dumper(),
        explicit_start=True,
        sort_keys=False,
        default_flow_style=False,
        width=1 << 16,
    )


COMMANDS: Final[dict[str, Callable[[list[str]], int]]] = {
    "render": _render,
    "version": _version,
    "deliver-kubectl": _deliver_kubectl,
}
