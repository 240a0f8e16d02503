"""What a job's checks ask its transport. The transports are built above ``api``
(``desired.transports``), so validation and the account checks take the job's as this protocol,
and nothing here asks which transport a job has."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.field_errors import FieldError, quoted


class TransportChecks(Protocol):
    """``role`` is a replica type (``Launcher`` or ``Worker``)."""

    def name_errors(self, job: DefaultedMPIJob) -> Iterator[FieldError]:
        """Problems of the job's name, a non-empty string, as the transport's objects and
        host names carry it."""
        ...

    def spec_errors(self, job: DefaultedMPIJob) -> Iterator[FieldError]:
        """Problems of the spec's fields that only this transport reads."""
        ...

    def operator_mounts(self, job: DefaultedMPIJob, role: str) -> tuple[str, ...]:
        """Where the transport mounts its volumes in the role's first container: no template
        may mount anything there."""
        ...

    def replaces_account(self, role: str) -> bool:
        """The transport sets the role's account itself, so whatever its template names is
        ignored (and lends nothing)."""
        ...


def invalid_name(job: DefaultedMPIJob, problems: Iterable[str], use: str) -> Iterator[FieldError]:
    """Each of ``problems`` of the job's name, saying after the name the ``use`` the transport
    puts it to."""
    for problem in problems:
        yield FieldError("metadata.name", f"invalid value {quoted(job.name)}{use}: {problem}")
