"""What the operator imports before it holds the Lease: the process, its client and the
election, none of the leader's work (the models, the controller, the caches)."""

import subprocess
import sys

# Each loads only once leading: the MPIJob models (pydantic), the sync and its caches.
LEADER_ONLY = (
    "pydantic",
    "mpi_operator.api.v2beta1",
    "mpi_operator.controller.plan",
    "mpi_operator.operator.caches",
    "mpi_operator.operator.leading",
)


def _modules_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(done.stdout.split())


def test_the_start_imports_none_of_the_leaders_work() -> None:
    started = _modules_after("import mpi_operator.cli, mpi_operator.operator.main")
    assert "mpi_operator.runtime.leader" in started
    assert set(LEADER_ONLY) & started == set()


def test_leading_imports_them() -> None:
    leading = _modules_after("import mpi_operator.operator.leading")
    assert set(LEADER_ONLY) <= leading
