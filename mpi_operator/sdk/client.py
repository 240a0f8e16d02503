"""MPIJobs on a cluster: submit, read, wait for, follow, suspend and delete them.

Requests go through ``runtime.client`` with the operator's own configuration loading
(kubeconfig, in-cluster service account, exec plugins, client certificates); what comes back is
parsed into the typed :class:`~mpi_operator.api.models.MPIJob`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.api.validation import parse_mpijob
from mpi_operator.runtime.client import PODS, ApiError, Client, LineStream, Resource
from mpi_operator.sdk.errors import (
    JobFailedError,
    LogsUnavailableError,
    NotFoundError,
    WaitTimeoutError,
    from_api_error,
)
from mpi_operator.sdk.offline import JobLike, checked
from mpi_operator.sdk.state import condition, has_condition, phase

MPIJOBS: Final = Resource(*c.MPIJOB_RESOURCE, namespaced=True, kind=c.KIND)
USER_AGENT: Final = "mpi-operator-sdk"
# A watch is reopened at least this often, so a silently dropped connection costs little.
_WATCH_SECONDS: Final = 60

Until = str | Callable[[MPIJob], bool]
"""What :meth:`MPIJobClient.wait` waits for: a condition type that must be True, or a test."""


class MPIJobClient:
    """MPIJobs of one cluster; ``namespace`` is the default for every call.

    ``MPIJobClient()`` reads ``$KUBECONFIG`` (or runs in-cluster); ``kubeconfig``/``context``
    pick another; ``api`` reuses an existing ``runtime.client.Client``.
    """

    def __init__(
        self,
        kubeconfig: str | None = None,
        *,
        context: str | None = None,
        namespace: str = "default",
        api: Client | None = None,
    ) -> None:
        self.namespace = namespace
        self._owns_api = api is None
        self._api = api or Client.from_kubeconfig(
            kubeconfig, context=context, user_agent=USER_AGENT, qps=20, burst=40
        )

    def close(self) -> None:
        if self._owns_api:
            self._api.close()

    def __enter__(self) -> MPIJobClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the verbs -----------------------------------------------------------------------------

    def submit(self, job: JobLike, *, namespace: str | None = None) -> MPIJob:
        """Validate as the operator would, then create; returns the job as stored."""
        valid = checked(job).to_dict()
        namespace = namespace or valid["metadata"].get("namespace") or self.namespace
        valid["metadata"]["namespace"] = namespace
        return self._call(lambda: self._api.create(MPIJOBS, valid, namespace))

    def get(self, name: str, *, namespace: str | None = None) -> MPIJob:
        return self._call(lambda: self._api.get(MPIJOBS, name, self._ns(namespace)))

    def list(
        self,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        label_selector: str | None = None,
    ) -> list[MPIJob]:
        scope = None if all_namespaces else self._ns(namespace)
        try:
            items = self._api.list(MPIJOBS, scope, label_selector=label_selector).items
        except ApiError as error:
            raise from_api_error(error) from None
        return [parse_mpijob(item) for item in items]

    def delete(
        self, name: str, *, namespace: str | None = None, wait: bool = False, timeout: float = 60
    ) -> None:
        """Delete the job; its pods and other children go with it (garbage collection).

        ``wait=True`` returns only once the job is gone (children may still be finishing)."""
        namespace = self._ns(namespace)
        try:
            self._api.delete(MPIJOBS, name, namespace, propagation_policy="Background")
        except ApiError as error:
            raise from_api_error(error) from None
        if wait:
            self._wait_gone(name, namespace, timeout)

    def suspend(self, name: str, *, namespace: str | None = None) -> MPIJob:
        """Stop the job's pods and keep the job; :meth:`resume` starts it again."""
        return self._set_suspend(name, namespace, True)

    def resume(self, name: str, *, namespace: str | None = None) -> MPIJob:
        return self._set_suspend(name, namespace, False)

    def wait(
        self,
        name: str,
        until: Until = c.CONDITION_SUCCEEDED,
        *,
        namespace: str | None = None,
        timeout: float = 600,
        fail_on: Sequence[str] = (c.CONDITION_FAILED,),
    ) -> MPIJob:
        """Block until ``until`` holds (a condition type that is True, or a test of the job).

        Raises ``JobFailedError`` as soon as a condition of ``fail_on`` is True (unless it is
        the one awaited), ``WaitTimeoutError`` after ``timeout`` seconds, ``NotFoundError``
        when the job is deleted meanwhile."""
        namespace = self._ns(namespace)
        reached = _predicate(until)
        stop_on = [kind for kind in fail_on if kind != until]
        deadline = time.monotonic() + timeout
        while True:
            raw = self._raw_get(name, namespace)
            job = parse_mpijob(raw)
            if _done(job, reached, stop_on):
                return job
            for event_type, obj in self._changes(name, namespace, raw, deadline):
                if event_type == "DELETED":
                    raise NotFoundError(404, "NotFound", f"MPIJob {namespace}/{name} was deleted")
                job = parse_mpijob(obj)
                if _done(job, reached, stop_on):
                    return job
            if time.monotonic() >= deadline:
                raise WaitTimeoutError(
                    f"MPIJob {namespace}/{name} did not reach {_describe(until)} within "
                    f"{timeout:g}s (now {phase(job)})",
                    job,
                )

    def logs(
        self,
        name: str,
        *,
        namespace: str | None = None,
        follow: bool = False,
        container: str | None = None,
    ) -> Iterator[str]:
        """The lines of the launcher pod's log (its latest try); ``follow`` keeps streaming
        until the launcher ends. Raises ``LogsUnavailableError`` at once when there is no
        launcher pod yet or its node does not serve logs."""
        namespace = self._ns(namespace)
        pod = self._launcher_pod(name, namespace)
        query = [("follow", "true")] if follow else []
        if container:
            query.append(("container", container))
        try:
            stream = self._api.stream_lines(PODS, pod, namespace, "log", query=query)
        except ApiError as error:
            raise LogsUnavailableError(
                f"the log of launcher pod {namespace}/{pod} is not available: "
                f"{error.status} {error.reason}: {error.message}"
            ) from None
        return _closing(stream)

    # -- plumbing ------------------------------------------------------------------------------

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    def _call(self, request: Callable[[], dict[str, Any]]) -> MPIJob:
        try:
            return parse_mpijob(request())
        except ApiError as error:
            raise from_api_error(error) from None

    def _raw_get(self, name: str, namespace: str) -> dict[str, Any]:
        try:
            return self._api.get(MPIJOBS, name, namespace)
        except ApiError as error:
            raise from_api_error(error) from None

    def _changes(
        self, name: str, namespace: str, raw: dict[str, Any], deadline: float
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Watch events of one job until the deadline; ends early (the caller reads the job
        again) when the watch expires or breaks."""
        resource_version = str(raw.get("metadata", {}).get("resourceVersion") or "")
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                stream = self._api.watch(
                    MPIJOBS,
                    namespace,
                    resource_version=resource_version,
                    timeout_seconds=max(1, math.ceil(min(remaining, _WATCH_SECONDS))),
                    allow_bookmarks=False,
                    field_selector=f"metadata.name={name}",
                )
            except ApiError:
                return
            with stream:
                try:
                    for event_type, obj in stream:
                        if event_type == "ERROR":
                            return
                        resource_version = str(obj["metadata"].get("resourceVersion") or "")
                        yield event_type, obj
                        if time.monotonic() >= deadline:
                            return
                except ApiError:
                    return

    def _wait_gone(self, name: str, namespace: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self._api.get(MPIJOBS, name, namespace)
            except ApiError as error:
                if error.status == 404:
                    return
                raise from_api_error(error) from None
            time.sleep(0.5)
        raise WaitTimeoutError(
            f"MPIJob {namespace}/{name} still exists after {timeout:g}s",
            self.get(name, namespace=namespace),
        )

    def _set_suspend(self, name: str, namespace: str | None, suspended: bool) -> MPIJob:
        patch = {"spec": {"runPolicy": {"suspend": suspended}}}
        return self._call(lambda: self._api.patch(MPIJOBS, name, patch, self._ns(namespace)))

    def _launcher_pod(self, name: str, namespace: str) -> str:
        selector = f"{c.LABEL_JOB_NAME}={name},{c.LABEL_JOB_ROLE}={c.ROLE_LAUNCHER}"
        try:
            pods = self._api.list(PODS, namespace, label_selector=selector).items
        except ApiError as error:
            raise from_api_error(error) from None
        if not pods:
            raise LogsUnavailableError(f"MPIJob {namespace}/{name} has no launcher pod (yet)")
        newest = max(pods, key=lambda pod: str(pod["metadata"].get("creationTimestamp") or ""))
        return str(newest["metadata"]["name"])


def _closing(stream: LineStream[str]) -> Iterator[str]:
    with stream:
        yield from stream


def _predicate(until: Until) -> Callable[[MPIJob], bool]:
    if isinstance(until, str):
        return lambda job: has_condition(job, until)
    return until


def _describe(until: Until) -> str:
    return f"{until}=True" if isinstance(until, str) else "the awaited state"


def _done(job: MPIJob, reached: Callable[[MPIJob], bool], stop_on: Sequence[str]) -> bool:
    """Whether the wait is over; raises ``JobFailedError`` when it can never succeed."""
    if reached(job):
        return True
    for kind in stop_on:
        found = condition(job, kind)
        if found is not None and found.status == "True":
            raise JobFailedError(job, found)
    return False
