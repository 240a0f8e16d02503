"""The Flyte tasks serialize.py turns into task templates: what a Flyte user writes for MPI
with flytekitplugins-kfmpi. Imported only by the flytekit virtualenv of build.sh, never by the
project's own code (the project's virtualenv has no flytekit)."""

from flytekit import Resources, task
from flytekitplugins.kfmpi import (
    CleanPodPolicy,
    HorovodJob,
    Launcher,
    MPIJob,
    RunPolicy,
    Worker,
)

# Small requests, so the pods fit the local cluster's nodes.
REQUESTS = Resources(cpu="100m", mem="128Mi")


@task(
    task_config=MPIJob(launcher=Launcher(replicas=1), worker=Worker(replicas=2), slots=1),
    requests=REQUESTS,
)
def mpi_hello(n: int) -> int:
    return n


@task(
    task_config=MPIJob(
        launcher=Launcher(replicas=1),
        worker=Worker(replicas=2),
        slots=1,
        run_policy=RunPolicy(
            clean_pod_policy=CleanPodPolicy.ALL, backoff_limit=2, active_deadline_seconds=600
        ),
    ),
    requests=REQUESTS,
)
def mpi_run_policy(n: int) -> int:
    return n


@task(
    task_config=HorovodJob(launcher=Launcher(replicas=1), worker=Worker(replicas=2), slots=1),
    requests=REQUESTS,
)
def horovod_hello(n: int) -> int:
    return n
