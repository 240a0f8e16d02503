"""Transports: how the launcher's mpirun reaches the workers. Everything that differs between
them lives below this package; the rest of the operator knows the ``Transport`` protocol, its
optional capability ``WithRevocation`` and ``transport_of``.

A new transport is one module here and one entry in ``_TRANSPORTS`` (docs/transports.md,
"Adding a transport"). Which API's rules a job follows is another question (``api.rules``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final, Protocol, runtime_checkable

from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.transport_checks import TransportChecks
from mpi_operator.desired.kinds import Child
from mpi_operator.desired.transports.kubectl_exec import KubectlExec
from mpi_operator.desired.transports.ssh import SSH
from mpi_operator.field_errors import FieldError


class Transport(TransportChecks, Protocol):
    """What a transport decides; what the job's checks ask of it first (``TransportChecks``:
    its rules of the job's name and fields, the mount paths it reserves, the accounts it
    sets). ``role`` is a replica type (``Launcher`` or ``Worker``)."""

    @property
    def name(self) -> str:
        """The value of ``spec.transport`` that selects it."""
        ...

    @property
    def before_workers(self) -> Sequence[Child]:
        """The children created before the workers, in order; the ConfigMap among them (the
        launcher mounts its hostfile)."""
        ...

    @property
    def after_workers(self) -> Sequence[Child]:
        """The children created after the workers and before the launcher; a suspended job
        has none of them."""
        ...

    def set_host_identity(
        self, template: dict[str, Any], job: DefaultedMPIJob, facts: ClusterFacts
    ) -> None:
        """Make a pod's hostname, already set, what ``host_name`` reaches."""
        ...

    def host_name(self, job: DefaultedMPIJob, pod_name: str, facts: ClusterFacts) -> str:
        """The pod's host in the hostfile."""
        ...

    def discovered_host(self, job: DefaultedMPIJob, pod_name: str, facts: ClusterFacts) -> str:
        """The pod's line in discover_hosts.sh, after ``echo``."""
        ...

    def config_scripts(self, job: DefaultedMPIJob) -> dict[str, str]:
        """ConfigMap entries besides the hostfile and discover_hosts.sh, each mounted in the
        launcher's /etc/mpi as an executable."""
        ...

    def launcher_env(self, implementation: str) -> Sequence[tuple[str, str]]:
        """The variables that tell the MPI implementation's launcher how to reach the hosts."""
        ...

    def prepare_worker(self, template: dict[str, Any], job: DefaultedMPIJob) -> None:
        """What a worker's main container runs while it waits for the launcher."""
        ...

    def decorate(
        self, template: dict[str, Any], job: DefaultedMPIJob, role: str, facts: ClusterFacts
    ) -> None:
        """The role's volumes, mounts, accounts and init containers for the transport."""
        ...

    def errors(self, job: DefaultedMPIJob, facts: ClusterFacts) -> Iterator[FieldError]:
        """Problems of a valid job that its transport's objects would meet at the API server."""
        ...


@runtime_checkable
class WithRevocation(Protocol):
    """A transport that grants rights while the job runs and takes them back when it no
    longer does (finished, suspended, or without a worker to reach)."""

    def revoked(self, job: DefaultedMPIJob) -> Sequence[tuple[str, str]]:
        """The (plural, name) of each object deleted then, in order."""
        ...


_TRANSPORTS: Final[dict[str, Transport]] = {
    transport.name: transport for transport in (SSH(), KubectlExec())
}


def transport_of(job: DefaultedMPIJob) -> Transport:
    """The job's transport; SSH for a value validation refuses, as for none."""
    return _TRANSPORTS.get(job.spec.transport or "", _TRANSPORTS[c.TRANSPORT_SSH])


def revocation_of(transport: Transport) -> WithRevocation | None:
    return transport if isinstance(transport, WithRevocation) else None
