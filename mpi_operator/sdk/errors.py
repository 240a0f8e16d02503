"""What the SDK raises: every error says which field, or what the API server answered.

A job that breaks the operator's rules raises :class:`InvalidJobError` before anything is sent,
with one ``FieldError(path, message)`` per problem (the same lines ``mpi-operator render``
prints). A refused request raises :class:`ApiServerError` with the server's status, reason and
message, and the field paths of its ``details.causes`` when it names any (CRD schema and CEL
rules do).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mpi_operator.api.errors import InvalidMPIJobError
from mpi_operator.api.models import JobCondition, MPIJob
from mpi_operator.field_errors import FieldError
from mpi_operator.runtime.client import ApiError

InvalidJobError = InvalidMPIJobError
"""The job breaks the operator's rules; ``.errors`` lists every ``FieldError``."""


class MPIJobError(Exception):
    """Base of the SDK's own errors (an invalid job raises :data:`InvalidJobError`)."""


class ApiServerError(MPIJobError):
    """The API server refused a request, or could not be reached (``status`` 0)."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        causes: list[FieldError] | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else f"{reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.causes = list(causes or [])


class NotFoundError(ApiServerError):
    """No such MPIJob (or the CRD is not installed)."""


class AlreadyExistsError(ApiServerError):
    """An MPIJob of that name already exists in the namespace."""


class JobFailedError(MPIJobError):
    """A wait ended because the job reached a condition it cannot come back from."""

    def __init__(self, job: MPIJob, condition: JobCondition) -> None:
        super().__init__(
            f"MPIJob {job.namespace}/{job.name} is {condition.type}: "
            f"{condition.reason or ''} {condition.message or ''}".rstrip()
        )
        self.job = job
        self.condition = condition


class WaitTimeoutError(MPIJobError, TimeoutError):
    """The job did not reach the awaited state in time; ``job`` is the last state seen."""

    def __init__(self, message: str, job: MPIJob) -> None:
        super().__init__(message)
        self.job = job


class LogsUnavailableError(MPIJobError):
    """The launcher's logs cannot be read: no launcher pod yet, or its node serves no logs."""


def from_api_error(error: ApiError) -> ApiServerError:
    """The SDK's error for a failed call of the runtime client."""
    kind: type[ApiServerError] = ApiServerError
    if error.status == 404:
        kind = NotFoundError
    elif error.status == 409 and error.reason == "AlreadyExists":
        kind = AlreadyExistsError
    return kind(error.status, error.reason, error.message, _causes(error.body))


def _causes(status: Mapping[str, Any]) -> list[FieldError]:
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    if not isinstance(causes, list):
        return []
    return [
        FieldError(str(cause.get("field") or ""), str(cause.get("message") or ""))
        for cause in causes
        if isinstance(cause, Mapping)
    ]
