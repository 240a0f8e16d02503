"""Flyte's own code, run for the tests: flytekit (from PyPI) serializes MPI tasks into task
templates as Flyte registers them, and flyteplugins' MPI plugin (Go, the code propeller runs)
builds the kubeflow.org/v1 MPIJob from a template and reads a phase from an MPIJob.

Both come from hack/flyte/build.sh, which builds them into the cache if missing (about 4
minutes cold; `.ci/run` builds them before the tests): the ``flyte-mpi`` harness
(hack/flyte/main.go) and a virtualenv with flytekit that runs hack/flyte/serialize.py.

    templates = task_templates()            # {"mpi": {...}, "mpi-run-policy": ..., "horovod": ...}
    job = build_mpijob(templates["mpi"], name="f1-n0-0", namespace=ns, service_account="default")
    # ... create `job`, let the operator run it, read it back ...
    assert task_phase(read_back).phase == "Success"
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "flyte" / "build.sh"
SERIALIZE_SCRIPT = REPO / "hack" / "flyte" / "serialize.py"

# A cold build: the Go harness about 3 minutes, the virtualenv about 1, longer while other
# builds share the 2 cores.
BUILD_TIMEOUT = 1200.0
SERIALIZE_TIMEOUT = 120.0
HARNESS_TIMEOUT = 60.0
# The exit status of `flyte-mpi build` when BuildResource returns an error.
BUILD_REFUSED = 3


class FlyteHarnessError(RuntimeError):
    """The harness or the serializer could not be built or run."""


class BuildRefusedError(FlyteHarnessError):
    """flyteplugins' BuildResource returned an error for the template (``error`` is its text)."""

    def __init__(self, error: str) -> None:
        super().__init__(f"BuildResource refused the task template: {error}")
        self.error = error


@dataclass(frozen=True)
class TaskPhase:
    """The PhaseInfo GetTaskPhase returned. ``phase`` is the name of the plugin phase (Queued,
    Running, Success, RetryableFailure, PermanentFailure, Undefined, ...); ``message`` and
    ``code`` are its execution error's, if it has one; ``error`` is the Go error GetTaskPhase
    returned with it (propeller then fails the round), None if it returned none; ``logs`` are
    the log links' URIs."""

    phase: str
    reason: str
    message: str
    error: str | None
    code: str = ""
    version: int = 0
    logs: tuple[str, ...] = ()


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _run(
    argv: list[str], what: str, timeout: float, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
    except subprocess.TimeoutExpired as e:
        raise FlyteHarnessError(f"{what} did not finish within {timeout:.0f} s") from e


@functools.cache
def harness_dir() -> Path:
    """The directory hack/flyte/build.sh prints (``bin/flyte-mpi``, ``venv/``), built first if
    missing."""
    done = _run(["bash", str(BUILD_SCRIPT)], "hack/flyte/build.sh", BUILD_TIMEOUT)
    if done.returncode != 0:
        raise FlyteHarnessError(
            f"hack/flyte/build.sh failed (exit {done.returncode}):\n{_tail(done.stderr)}"
        )
    path = Path(done.stdout.strip().splitlines()[-1])
    if not (path / "bin" / "flyte-mpi").is_file() or not (path / "venv" / "bin").is_dir():
        raise FlyteHarnessError(f"hack/flyte/build.sh printed {path}, which has no build in it")
    return path


@functools.cache
def _serialized() -> dict[str, str]:
    python = harness_dir() / "venv" / "bin" / "python"
    with tempfile.TemporaryDirectory(prefix="flyte-templates-") as out:
        done = _run(
            [str(python), str(SERIALIZE_SCRIPT), out], "hack/flyte/serialize.py", SERIALIZE_TIMEOUT
        )
        if done.returncode != 0:
            raise FlyteHarnessError(
                f"hack/flyte/serialize.py failed (exit {done.returncode}):\n{_tail(done.stderr)}"
            )
        return {path.stem: path.read_text() for path in sorted(Path(out).glob("*.json"))}


def task_templates() -> dict[str, dict[str, Any]]:
    """flytekit's TaskTemplates of hack/flyte/mpi_tasks.py as protobuf JSON, by file name
    (``mpi``, ``mpi-run-policy``, ``horovod``): serialized once per test run, a fresh copy on
    every call."""
    return {name: json.loads(text) for name, text in _serialized().items()}


def _harness(args: list[str], stdin: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    binary = harness_dir() / "bin" / "flyte-mpi"
    return _run([str(binary), *args], f"flyte-mpi {args[0]}", HARNESS_TIMEOUT, json.dumps(stdin))


def _answer(
    done: subprocess.CompletedProcess[str], what: str, expect_status: int = 0
) -> dict[str, Any]:
    if done.returncode != expect_status:
        raise FlyteHarnessError(f"{what} failed (exit {done.returncode}):\n{_tail(done.stderr)}")
    try:
        answer: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise FlyteHarnessError(f"{what} printed no JSON: {done.stdout[:500]!r}") from e
    return answer


def build_mpijob(
    template: dict[str, Any],
    *,
    name: str,
    namespace: str,
    service_account: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The MPIJob flyteplugins' BuildResource makes of ``template``, with the metadata
    propeller adds (``name``, DNS-1123-fixed as propeller does; ``namespace``; the execution's
    ``labels`` and ``annotations`` merged with the template's), without the owner reference to a
    FlyteWorkflow. ``service_account`` is the execution's. Raises BuildRefusedError when the plugin
    returns an error."""
    stdin = {
        "taskTemplate": template,
        "name": name,
        "namespace": namespace,
        "serviceAccount": service_account,
        "labels": labels or {},
        "annotations": annotations or {},
    }
    done = _harness(["build"], stdin)
    if done.returncode == BUILD_REFUSED:
        raise BuildRefusedError(str(_answer(done, "flyte-mpi build", BUILD_REFUSED)["error"]))
    return _answer(done, "flyte-mpi build")


def task_phase(mpijob: dict[str, Any], *, timeout: str | None = None) -> TaskPhase:
    """What flyteplugins' GetTaskPhase reads from ``mpijob`` (a kubeflow.org/v1 MPIJob as the
    API server returns it, with metadata.creationTimestamp and status). ``timeout`` overrides
    plugins.kf-operator.timeout (a Go duration, default 1m): how long after creation a job
    without status.startTime is an error."""
    args = ["phase"] + ([f"-timeout={timeout}"] if timeout else [])
    out = _answer(_harness(args, mpijob), "flyte-mpi phase")
    return TaskPhase(
        phase=str(out["phase"]),
        reason=str(out["reason"]),
        message=str(out["message"]),
        error=None if out["error"] is None else str(out["error"]),
        code=str(out["code"]),
        version=int(out["version"]),
        logs=tuple(str(log["uri"]) for log in out["logs"]),
    )


def judged_until(
    read: Callable[[], dict[str, Any]],
    done: Callable[[TaskPhase], bool],
    *,
    timeout: float,
    start_timeout: str = "20s",
) -> list[TaskPhase]:
    """GetTaskPhase of every version of a kubeflow.org/v1 MPIJob ``read`` returns, polled
    until one is ``done``. Each must be a phase Flyte acts on: an error or an Undefined phase
    (propeller fails the task on either) fails at once. ``start_timeout`` is how soon after
    creation the job must have status.startTime (Flyte's default is a minute)."""
    seen: dict[str, TaskPhase] = {}
    deadline = time.monotonic() + timeout
    while True:
        job = read()
        version = str(job["metadata"]["resourceVersion"])
        if version not in seen:
            phase = task_phase(job, timeout=start_timeout)
            if phase.error is not None or phase.phase == "Undefined":
                raise AssertionError(f"Flyte cannot act on {phase}: status {job.get('status')}")
            seen[version] = phase
            if done(phase):
                return list(seen.values())
        if time.monotonic() > deadline:
            raise TimeoutError(f"no awaited phase in {timeout:.0f} s: {list(seen.values())}")
        time.sleep(0.5)
