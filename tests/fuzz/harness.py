"""One fuzz example through ``mpi-operator render`` and through the operator's sync, classified.

Outcomes:

- ``valid-rendered``: exit 0, and the oracle finds nothing the API server would refuse;
- ``refused``: exit 2, nothing on stdout, one ``field.path: message`` line per problem;
- ``traceback``: an exception escaped (or a refusal broke the one-line format);
- ``hang``: the example ran past its time limit;
- ``accepted-but-invalid``: exit 0 (or a sync that writes), but the oracle finds a problem,
  or a field of the job that the CRD does not declare;
- ``cache-differs``: a sync whose job comes from the operator's admission cache, warmed by the
  same job under another status, plans otherwise than one that admits the job afresh.

The operator's path gets the document as the API server would hand it over (JSON), so only
examples whose YAML has a JSON form reach it.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import signal
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from gang import select_gang_scheduler
from mpi_operator.api.cluster import ClusterFacts, rendering_flag_problems
from mpi_operator.cli import main
from mpi_operator.controller.admission import AdmissionCache
from mpi_operator.controller.plan import Plan, SyncContext, plan_sync
from mpi_operator.desired.transports.ssh import SSHKeyPair
from mpi_operator.manifest import ManifestError, read_documents
from mpi_operator.testing.view import MemoryView

from .jobs import Example
from .oracle import grant_problems, problems, unknown_mpijob_fields

VALID = "valid-rendered"
REFUSED = "refused"
TRACEBACK = "traceback"
HANG = "hang"
ACCEPTED_BUT_INVALID = "accepted-but-invalid"
CACHE_DIFFERS = "cache-differs"
CATEGORIES = (VALID, REFUSED, TRACEBACK, HANG, ACCEPTED_BUT_INVALID, CACHE_DIFFERS)
FAILURES = (TRACEBACK, HANG, ACCEPTED_BUT_INVALID, CACHE_DIFFERS)

# A field path, then ": ", then the message; no control characters anywhere.
REFUSAL_LINE = re.compile(r"[^\s:][^\x00-\x1f\x7f]*?: [^\x00-\x1f\x7f]+")
USAGE_LINE = re.compile(r"mpi-operator render: [^\x00-\x1f\x7f]+")
# Rendering generates one key pair per job otherwise, which dominates the run time.
KEY = SSHKeyPair("-----BEGIN EC PRIVATE KEY-----\nx\n-----END EC PRIVATE KEY-----\n", "k\n")


class ExampleTimeoutError(Exception):
    """The example ran past its time limit."""


@dataclass
class Outcome:
    path: str  # "render" or "operator"
    category: str
    detail: str = ""


@dataclass
class Tally:
    counts: Counter[str] = field(default_factory=Counter)
    by_path: Counter[tuple[str, str]] = field(default_factory=Counter)
    failures: list[tuple[Example, Outcome]] = field(default_factory=list)

    def add(self, example: Example, outcome: Outcome) -> None:
        self.counts[outcome.category] += 1
        self.by_path[(outcome.path, outcome.category)] += 1
        if outcome.category in FAILURES:
            self.failures.append((example, outcome))


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ExampleTimeout in the main thread once ``seconds`` have passed."""

    def expired(signum: int, frame: Any) -> None:
        raise ExampleTimeoutError

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_example(example: Example, seconds: float) -> list[Outcome]:
    """The example's outcome through render and, when it has a JSON form, the operator."""
    outcomes = [_guarded("render", lambda: _render(example), seconds)]
    document = _json_document(example.text)
    if document is not None:
        outcomes.append(_guarded("operator", lambda: _sync(document, example), seconds))
    return outcomes


def _guarded(path: str, run: Any, seconds: float) -> Outcome:
    try:
        with time_limit(seconds):
            outcome: Outcome = run()
            return outcome
    except ExampleTimeoutError:
        return Outcome(path, HANG, f"over {seconds} s")
    except BaseException as error:  # classifying every escape is the point
        if isinstance(error, KeyboardInterrupt):
            raise
        return Outcome(path, TRACEBACK, "".join(traceback.format_exception(error))[-2000:])


def _render(example: Example) -> Outcome:
    stdin, stdout, stderr = io.StringIO(example.text), io.StringIO(), io.StringIO()
    with (
        _stdin(stdin),
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
        _fixed_key(),
    ):
        code = main(["render", "-f", "-", *example.flags()])
    out, err = stdout.getvalue(), stderr.getvalue()
    if code == 2:
        lines = err.splitlines()
        bad = [
            line
            for line in lines
            if not (REFUSAL_LINE.fullmatch(line) or USAGE_LINE.fullmatch(line))
        ]
        if out or not lines or bad or not err.endswith("\n"):
            return Outcome("render", TRACEBACK, f"malformed refusal: out={out[:200]!r} err={err!r}")
        return Outcome("render", REFUSED)
    if code != 0 or err:
        return Outcome("render", TRACEBACK, f"exit {code}: {err[-2000:]}")
    rendered = yaml.load_all(out, Loader=yaml.CSafeLoader)
    found = [f"MPIJob: {p}" for p in unknown_mpijob_fields(_json_document(example.text))]
    found += [f"{obj.get('kind')}: {p}" for obj in rendered for p in _judged(obj)]
    if found:
        return Outcome("render", ACCEPTED_BUT_INVALID, "; ".join(found)[:2000])
    return Outcome("render", VALID)


def _sync(document: dict[str, Any], example: Example) -> Outcome:
    context = SyncContext(
        facts=ClusterFacts(cluster_domain=example.cluster_domain),
        gang=select_gang_scheduler(example.gang_scheduling or None),
        now="2026-01-01T00:00:00Z",
        new_key_pair=lambda: KEY,
    )
    if not _operator_would_start(example):
        return Outcome("operator", REFUSED)
    plan = plan_sync(document, MemoryView(), context)
    if _cached_plan(document, context) != plan:
        return Outcome("operator", CACHE_DIFFERS, "admission cache changed the sync's plan")
    bodies = [a.body for a in plan.actions if a.verb == "create" and a.body is not None]
    found = [f"MPIJob: {p}" for p in unknown_mpijob_fields(document) if bodies]
    found += [f"{body.get('kind')}: {p}" for body in bodies for p in _judged(body)]
    if found:
        return Outcome("operator", ACCEPTED_BUT_INVALID, "; ".join(found)[:2000])
    if not bodies:
        return Outcome("operator", REFUSED)
    return Outcome("operator", VALID)


def _judged(obj: dict[str, Any]) -> list[str]:
    """What the API server would refuse in ``obj``, and what it would take but grant too
    widely."""
    return [*problems(obj), *grant_problems(obj)]


def _cached_plan(document: dict[str, Any], context: SyncContext) -> Plan:
    """The plan from a job the admission cache gives, after the job was synced with an older
    status and resourceVersion."""
    cache = AdmissionCache()
    metadata = document.get("metadata")
    earlier = {**document, "status": {"startTime": "2025-01-01T00:00:00Z"}}
    if isinstance(metadata, dict):
        earlier["metadata"] = {**metadata, "resourceVersion": "1"}
    cached = replace(context, admit=cache.admit)
    plan_sync(earlier, MemoryView(), cached)
    return plan_sync(document, MemoryView(), cached)


def _operator_would_start(example: Example) -> bool:
    """The operator refuses to start with the flags render refuses; same check."""
    return not list(rendering_flag_problems(example.gang_scheduling, example.cluster_domain))


def _json_document(text: str) -> dict[str, Any] | None:
    """The manifest as the API server would store it, when it has a JSON form.

    Read with the product's bounded reader: kubectl could not send an alias bomb or a
    document nested thousands of levels deep either, and expanding one here would hang the
    harness rather than the product.
    """
    try:
        documents = read_documents(text)
        if len(documents) != 1:
            return None
        encoded = json.dumps(documents[0], allow_nan=False)
    except (ManifestError, ValueError, TypeError, RecursionError):
        return None
    decoded = json.loads(encoded)
    if not isinstance(decoded, dict):
        return None
    metadata = decoded.get("metadata")
    if isinstance(metadata, dict):
        # What the API server fills in on every object it stores.
        if metadata.get("namespace") in (None, ""):
            metadata["namespace"] = "default"
        if metadata.get("uid") in (None, ""):
            metadata["uid"] = "0d9a7e2c-0000-4000-8000-000000000000"
        if metadata.get("resourceVersion") in (None, ""):
            metadata["resourceVersion"] = "2"
    return decoded


@contextlib.contextmanager
def _stdin(replacement: io.StringIO) -> Iterator[None]:
    import sys

    previous = sys.stdin
    sys.stdin = replacement
    try:
        yield
    finally:
        sys.stdin = previous


@contextlib.contextmanager
def _fixed_key() -> Iterator[None]:
    import mpi_operator.desired.objects as objects

    previous = objects.generate_ssh_key_pair
    objects.generate_ssh_key_pair = lambda: KEY
    try:
        yield
    finally:
        objects.generate_ssh_key_pair = previous
