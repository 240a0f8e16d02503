"""The service accounts a job's pods may not run as: those whose rights the operator lends.

A kubeflow.org/v1 launcher runs as ``<job>-launcher``, an account the operator creates with
the right to exec into that job's workers, and the operator itself runs as an account that
may create and exec into pods and read Secrets everywhere. A pod naming either account gets
its token, so a template that names one is refused: an MPIJob's author may hold none of those
rights. Only a role whose account the transport sets is exempt (the KubectlExec launcher's:
the operator replaces it with the job's own; Flyte names the execution's account there).

The API server runs a pod as ``serviceAccountName``, or as the deprecated ``serviceAccount``
when that is empty; both fields are checked, so neither spelling lends an account.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from mpi_operator.api import constants as c
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.transport_checks import TransportChecks
from mpi_operator.field_errors import FieldError, quoted

LAUNCHER_ACCOUNT_SUFFIX: Final = "-launcher"
"""How ``names.launcher_access_name`` ends: every job's launcher account, whatever the job."""

ACCOUNT_FIELDS: Final = ("serviceAccountName", "serviceAccount")
"""The pod spec's fields that name its account, the second deprecated."""


def named_accounts(path: str, template: object) -> Iterator[tuple[str, str]]:
    """(field path, account) of each account field the template sets to a name; ``path`` is
    the template's."""
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(pod_spec, dict):
        return
    for field in ACCOUNT_FIELDS:
        account = pod_spec.get(field)
        if isinstance(account, str) and account:
            yield f"{path}.spec.{field}", account


def launcher_account_errors(path: str, template: object) -> Iterator[FieldError]:
    """A template naming an account of a kubeflow.org/v1 launcher, any job's."""
    for where, account in named_accounts(path, template):
        if account.endswith(LAUNCHER_ACCOUNT_SUFFIX):
            yield FieldError(
                where,
                f"{quoted(account)} is reserved: accounts named <job>{LAUNCHER_ACCOUNT_SUFFIX} "
                "belong to kubeflow.org/v1 launchers and carry their exec rights",
            )


def operator_account_errors(
    job: DefaultedMPIJob, facts: ClusterFacts, transport: TransportChecks
) -> Iterator[FieldError]:
    """A template, in the operator's namespace, naming the operator's own account; ``transport``
    is the job's."""
    if facts.operator_account is None:
        return
    namespace, name = facts.operator_account
    if job.namespace != namespace:
        return
    for role in c.REPLICA_TYPES:
        spec = job.replica_spec(role)
        if spec is None or transport.replaces_account(role):
            continue
        path = f"spec.mpiReplicaSpecs[{role}].template"
        for where, account in named_accounts(path, spec.template):
            if account == name:
                yield FieldError(
                    where,
                    f"{quoted(account)} is reserved: the operator runs as this account, and "
                    "its rights are not its jobs' to use",
                )
