"""What the operator imports before it holds the Lease, and before its caches list: the process,
its client and the election first; the caches next; the sync's modules (the MPIJob models, the
controller) only while the caches list."""

import subprocess
import sys

# The sync's own modules: pydantic and the models, the plan.
SYNC_ONLY = ("pydantic", "mpi_operator.api.models", "mpi_operator.controller.plan")


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
    leaders = {"mpi_operator.operator.leading", "mpi_operator.operator.caches", *SYNC_ONLY}
    assert leaders & started == set()


def test_the_caches_start_before_the_sync_modules_load() -> None:
    leading = _modules_after("import mpi_operator.operator.leading")
    assert "mpi_operator.operator.caches" in leading
    assert set(SYNC_ONLY) & leading == set()
