"""Whether a sync may act on a job, and the job it acts on: parsed, defaulted and checked.

Admission reads everything of the stored object but its status, and a job's syncs mostly see
one spec under a new status and resourceVersion (each sync's status write makes one).
:class:`AdmissionCache` therefore keeps each job's last admission and, while the object's
other fields stay equal, only attaches the new status and resourceVersion: parsing, defaulting
and validating the spec was the largest share of a sync's CPU (docs/performance.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from pydantic import ValidationError

from gang import GangScheduler
from mpi_operator.api import constants as c
from mpi_operator.api.bounds import MAX_VALUES, values_within_bounds
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.errors import InvalidMPIJobError
from mpi_operator.api.models import JobStatus
from mpi_operator.api.rules import STORED
from mpi_operator.desired.validation import job_errors
from mpi_operator.field_errors import FieldError

DEFAULT_CACHE_SIZE: Final = 4096
"""Jobs whose admission is kept, the most recently synced. A job's syncs can be tens of seconds
apart while its pods start (the scheduler, the nodes and the Job controller each have a queue),
so this covers every job in flight at thousands of jobs; it bounds the memory at about 6 KiB a
job of 2 workers (the parsed job; the object's fields are the cache's own)."""
# The metadata a status write changes without changing what admission reads.
_RESOURCE_VERSION: Final = "resourceVersion"
_ABSENT: Final = object()


@dataclass(frozen=True)
class Admission:
    """``job`` to sync; or, when it is None, ``errors`` to report (none: the job is not this
    operator's to sync, being managed elsewhere or being deleted)."""

    job: DefaultedMPIJob | None
    errors: Sequence[FieldError] = ()


def admit(
    obj: object, facts: ClusterFacts, gang: GangScheduler | None, *, within_bounds: bool = False
) -> Admission:
    """``within_bounds``: the caller found ``obj`` within the document limits."""
    try:
        # The cache holds the stored object, which passed the rules of the version it was
        # written at.
        job, errors = job_errors(obj, facts, gang, within_bounds=within_bounds, admitted_at=STORED)
    except InvalidMPIJobError as error:
        return Admission(None, error.errors)
    managed_by = job.spec.run_policy.managed_by
    if (managed_by and managed_by != c.CONTROLLER_NAME) or job.metadata.get("deletionTimestamp"):
        return Admission(None)
    return Admission(None, errors) if errors else Admission(job)


@dataclass(frozen=True)
class _Admitted:
    """One job's admission, with what it was computed from (the object without its status)."""

    fields: dict[str, Any]
    metadata: dict[str, Any]
    facts: ClusterFacts
    gang: GangScheduler | None
    admission: Admission
    values: int | None
    """How many values the object without its status holds; None: over a limit."""


class AdmissionCache:
    """:func:`admit`, remembered per job while all but its status stays the same.

    Safe for concurrent syncs of different jobs; objects are compared by value (``==``), so a
    changed field, label or annotation, new cluster facts or another scheduler admit anew."""

    def __init__(self, size: int = DEFAULT_CACHE_SIZE) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[str, str], _Admitted] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, obj: object, facts: ClusterFacts, gang: GangScheduler | None) -> Admission:
        if not isinstance(obj, Mapping) or not isinstance(obj.get("metadata"), Mapping):
            return admit(obj, facts, gang)
        metadata = _stable_metadata(obj["metadata"])
        fields = {key: value for key, value in obj.items() if key not in ("status", "metadata")}
        key = (str(metadata.get("namespace")), str(metadata.get("name")))
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and _same(entry, fields, metadata, facts, gang):
            # Kept with the stored object's values, so an older version is not held.
            entry = replace(entry, fields=fields, metadata=metadata)
        else:
            without_status = {**fields, "metadata": metadata}
            values = values_within_bounds(without_status)
            admission = admit(without_status, facts, gang, within_bounds=values is not None)
            entry = _Admitted(fields, metadata, facts, gang, admission, values)
        self._remember(key, entry)
        status = _parsed_status(obj, entry.values)
        if isinstance(status, _Unparsed):
            # What is wrong with the whole object is for admit() to report, as it would.
            return admit(obj, facts, gang)
        job = entry.admission.job
        if job is None:
            return entry.admission
        update: dict[str, Any] = {"metadata": _versioned(job.metadata, obj["metadata"])}
        if "status" in obj:
            update["status"] = status
        return Admission(job.model_copy(update=update))

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._entries.pop((namespace, name), None)

    def _remember(self, key: tuple[str, str], entry: _Admitted) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)


def _stable_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in metadata.items() if key != _RESOURCE_VERSION}


def _same(
    entry: _Admitted,
    fields: dict[str, Any],
    metadata: dict[str, Any],
    facts: ClusterFacts,
    gang: GangScheduler | None,
) -> bool:
    return (
        entry.gang is gang
        and entry.facts == facts
        and entry.metadata == metadata
        and entry.fields == fields
    )


class _Unparsed:
    """An object that only parsing as a whole tells what is wrong with."""


def _parsed_status(obj: Mapping[str, Any], values: int | None) -> JobStatus | _Unparsed | None:
    """The status, as parsing the whole object gives it, when the rest of it (``values``
    values, within bounds) and the status are each within bounds, and together too."""
    if values is None:
        return _Unparsed()
    version = obj["metadata"].get(_RESOURCE_VERSION, _ABSENT)
    if version is not _ABSENT:
        path = ("metadata", _RESOURCE_VERSION)
        counted = values_within_bounds(version, path, MAX_VALUES - values)
        if counted is None:
            return _Unparsed()
        values += counted
    if "status" not in obj:
        return None
    status = obj["status"]
    if values_within_bounds(status, ("status",), MAX_VALUES - values) is None:
        return _Unparsed()
    if status is None:
        return None
    try:
        return JobStatus.model_validate(status, by_alias=True)
    except ValidationError:
        return _Unparsed()


def _versioned(admitted: Mapping[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """The admitted job's metadata with the stored object's resourceVersion, in its order."""
    return {key: stored[key] if key == _RESOURCE_VERSION else admitted[key] for key in stored}
