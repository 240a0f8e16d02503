"""Estimate pi on two workers, submitted from Python: the job of examples/pi/pi.yaml, in code.

`python examples/sdk/pi.py` submits it to $KUBECONFIG's cluster, waits for it and prints the
launcher's log; `--render` prints what the operator would create, without a cluster.
"""

from __future__ import annotations

import argparse
import sys

from mpi_operator import sdk
from mpi_operator.cli import dump_objects

IMAGE = "mpioperator/mpi-pi:openmpi"


def pi_job(name: str = "pi", workers: int = 2) -> sdk.JobBuilder:
    """OpenMPI as an unprivileged user, within the restricted Pod Security Standard and on a
    read-only root filesystem (mpirun writes only to /tmp): sshd on 2222 from a config in the
    user's home, and the job's SSH keys mounted into that home instead of /root/.ssh."""
    return (
        sdk.JobBuilder(name)
        .image(IMAGE)
        .launcher(
            command=["mpirun"], args=["-n", str(workers), "/home/mpiuser/pi"], cpu=1, memory="1Gi"
        )
        .workers(
            workers,
            command=["/usr/sbin/sshd"],
            args=["-De", "-f", "/home/mpiuser/.sshd_config"],
            cpu=1,
            memory="1Gi",
        )
        .run_as_user(1000)
        .restricted()
        .read_only_root("/tmp")
        .slots_per_worker(1)
        .ssh_auth_mount_path("/home/mpiuser/.ssh")
        .clean_pod_policy("Running")
        .ttl_seconds_after_finished(60)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, else in-cluster")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--name", default="pi")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for the job")
    parser.add_argument("--render", action="store_true", help="print the objects; no cluster")
    args = parser.parse_args(argv)

    try:
        job = pi_job(args.name, args.workers).build()
    except sdk.InvalidJobError as invalid:
        for error in invalid.errors:
            print(error, file=sys.stderr)
        return 2
    if args.render:
        sys.stdout.write(dump_objects(sdk.render(job)))
        return 0

    with sdk.MPIJobClient(args.kubeconfig, namespace=args.namespace) as jobs:
        jobs.submit(job)
        print(f"submitted MPIJob {args.namespace}/{args.name}")
        try:
            done = jobs.wait(args.name, "Succeeded", timeout=args.timeout)
        except (sdk.JobFailedError, sdk.WaitTimeoutError) as error:
            print(error, file=sys.stderr)
            return 1
        print(f"MPIJob {args.namespace}/{args.name}: {sdk.phase(done)}")
        try:
            for line in jobs.logs(args.name):
                print(line)
        except sdk.LogsUnavailableError as error:
            print(f"no launcher log: {error}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
