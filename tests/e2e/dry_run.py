"""Rendering with the CLI and asking a real API server about the result (server-side dry run)."""

from __future__ import annotations

import contextlib
import copy
import io
import sys
from collections.abc import Iterator
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from mpi_operator.cli import main

from .clusters import REPO

PI = REPO / "examples" / "pi" / "pi.yaml"


def pi_job() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(PI.read_text())
    return job


def rendered(job: dict[str, Any] | None = None, *flags: str) -> list[dict[str, Any]]:
    """Every object ``mpi-operator render`` prints for ``job`` (the pi example by default)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), stdin(yaml.safe_dump(job or pi_job())):
        assert main(["render", "-f", "-", *flags]) == 0
    return [obj for obj in yaml.safe_load_all(out.getvalue()) if obj]


@contextlib.contextmanager
def stdin(text: str) -> Iterator[None]:
    previous, sys.stdin = sys.stdin, io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = previous


def dry_run_create(dynamic: DynamicClient, namespace: str, obj: dict[str, Any]) -> str | None:
    """None when the API server would create ``obj`` in ``namespace``; else its refusal."""
    body = copy.deepcopy(obj)
    body["metadata"]["namespace"] = namespace
    resource = dynamic.resources.get(api_version=body["apiVersion"], kind=body["kind"])
    try:
        resource.create(body=body, namespace=namespace, dry_run="All")
    except ApiException as error:
        return f"{error.status}: {error.body}"
    return None
