"""Flyte's MPI tasks on this operator, as Flyte runs them: flytekit serializes the tasks,
flyteplugins' own BuildResource turns each into a kubeflow.org/v1 MPIJob, which is applied
unchanged but for the image and the program; pi is computed in real pods over kubectl exec,
and flyteplugins' own GetTaskPhase judges every status the job passes through.

Flyte's pods run as root with no security context, so these run in an ordinary namespace.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from .clusters import E2ECluster
from .flyte import TaskPhase, build_mpijob, judged_until, task_templates
from .operator import GROUP, PLURAL, OperatorProcess
from .realpods import assert_pi, launcher_log, rank_hosts

pytestmark = [pytest.mark.e2e, pytest.mark.realnodes]

IMAGE = "mpioperator/mpi-pi:openmpi"
PI = "/home/mpiuser/pi"
# How long after creation GetTaskPhase takes a job without status.startTime as an error:
# Flyte's default is a minute; shorter, so a slow first status write cannot hide.
START_TIMEOUT = "20s"
# Where Flyte's MPI template starts the task's own program in mpirun's arguments.
PROGRAM_START = "python"


def with_program(job: dict[str, Any], program: Callable[[list[str]], list[str]]) -> None:
    """Every container runs our image, and ``program`` gives its new args from Flyte's."""
    for spec in job["spec"]["mpiReplicaSpecs"].values():
        for container in spec["template"]["spec"]["containers"]:
            container["image"] = IMAGE
            container["args"] = program(container["args"])


def mpirun_of(program: list[str]) -> Callable[[list[str]], list[str]]:
    """Flyte's mpirun with all its flags, running ``program`` instead of pyflyte-execute."""

    def replace(args: list[str]) -> list[str]:
        return [*args[: args.index(PROGRAM_START)], *program]

    return replace


def horovod_style(args: list[str]) -> list[str]:
    """horovodrun's discovery without Horovod: wait until discover_hosts.sh lists both
    workers, then start one rank on each host it lists, in its ``host:slots`` form."""
    assert args[0] == "horovodrun" and "/etc/mpi/discover_hosts.sh" in args, args
    discover = "/etc/mpi/discover_hosts.sh"
    return [
        "sh",
        "-c",
        f"until [ $({discover} | wc -l) -ge 2 ]; do sleep 1; done; "
        f"exec mpirun --allow-run-as-root -np 2 -H $({discover} | paste -sd, -) {PI}",
    ]


def judged(
    cluster: E2ECluster,
    namespace: str,
    name: str,
    done: Callable[[TaskPhase], bool],
    operator: OperatorProcess,
) -> list[TaskPhase]:
    def read() -> dict[str, Any]:
        job: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
            GROUP, "v1", namespace, PLURAL, name
        )
        return job

    try:
        return judged_until(read, done, timeout=300, start_timeout=START_TIMEOUT)
    except BaseException:
        sys.stderr.write(f"--- {operator.name} log ---\n{operator.log_tail()}\n")
        raise


def submit(
    cluster: E2ECluster, namespace: str, template: str, program: Callable[[list[str]], list[str]]
) -> str:
    """What Flyte's propeller creates for an execution of ``template``, with our program; the
    job's name, generated as Flyte's are."""
    name = f"f{uuid.uuid4().hex[:10]}-n0-0"
    job = build_mpijob(
        task_templates()[template], name=name, namespace=namespace, service_account="default"
    )
    assert job["apiVersion"] == f"{GROUP}/v1"
    with_program(job, program)
    cluster.custom.create_namespaced_custom_object(GROUP, "v1", namespace, PLURAL, job)
    return name


def phases(judged: list[TaskPhase]) -> list[str]:
    """The phases in order, each once."""
    return [p for i, p in enumerate(x.phase for x in judged) if i == 0 or judged[i - 1].phase != p]


@pytest.mark.parametrize(
    ("template", "program"),
    [
        pytest.param("mpi", mpirun_of([PI]), id="open-mpi"),
        pytest.param("horovod", horovod_style, id="horovod-discovery"),
    ],
)
def test_a_flyte_mpi_task_computes_pi_and_flyte_reads_success(
    real_cluster: E2ECluster,
    namespace_factory: Callable[..., str],
    real_operator: OperatorProcess,
    template: str,
    program: Callable[[list[str]], list[str]],
) -> None:
    namespace = namespace_factory(real_cluster)
    name = submit(real_cluster, namespace, template, program)
    try:
        judged_run = judged(
            real_cluster, namespace, name, lambda p: p.phase == "Success", real_operator
        )
    finally:
        sys.stderr.write(f"--- launcher ---\n{launcher_log(real_cluster, namespace, name)}\n")
    assert phases(judged_run)[-1] == "Success"
    assert set(phases(judged_run)) <= {"Queued", "Running", "Success"}, phases(judged_run)
    log = launcher_log(real_cluster, namespace, name)
    assert_pi(log)
    assert rank_hosts(log) == [f"{name}-worker-0", f"{name}-worker-1"], log


def test_a_flyte_task_whose_launcher_fails_ends_in_a_failure_phase(
    real_cluster: E2ECluster,
    namespace_factory: Callable[..., str],
    real_operator: OperatorProcess,
) -> None:
    namespace = namespace_factory(real_cluster)
    # The template with a run policy: backoffLimit 2, so the launcher's retries end soon.
    name = submit(real_cluster, namespace, "mpi-run-policy", mpirun_of(["/bin/false"]))
    judged_run = judged(
        real_cluster, namespace, name, lambda p: p.phase.endswith("Failure"), real_operator
    )
    final = judged_run[-1]
    assert final.phase == "RetryableFailure", judged_run
    assert "Job failed" in final.message, final
