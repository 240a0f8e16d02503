"""Which API's rules a job follows: kubeflow.org/v2beta1's, as kubeflow/mpi-operator applies
them, or kubeflow.org/v1's, as training-operator does. This is not how the launcher reaches
the workers (the transport, ``desired.transports``), though each API defaults its own.

The CRD keys its per-version rules on the version a request is served at (``by_version``), and
stores every version as kubeflow.org/v2beta1 without conversion: what the operator reads back
no longer says which version admitted it. So:

- the restart policies a replica may name are those of the version a document declares, as
  the API server checks a request; a stored object passed the check of the version it was
  written at, which may have been either;
- what the API that created a job does with it afterwards (the launcher's default restart
  policy, the TTL, the GangScheduled condition) follows the one record the CRD keeps of that
  version: the transport it defaults per version (``constants.DEFAULT_TRANSPORT``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob


@dataclass(frozen=True)
class APIRules:
    version: str
    # What a request served at this version may set as a replica's restartPolicy.
    restart_policies: tuple[str, ...]
    # What a launcher without one restarts with.
    launcher_restart_policy: str
    # The TTL deletes the finished MPIJob itself; otherwise only its launcher Job.
    ttl_deletes_the_job: bool
    # Its readers know the GangScheduled condition (kubeflow.org/v1's, Flyte, take the newest
    # True condition for the job's phase).
    shows_gang_scheduled: bool


V2BETA1_RULES: Final = APIRules(
    version=c.VERSION,
    restart_policies=c.RESTART_POLICIES,
    launcher_restart_policy=c.RESTART_POLICY_ON_FAILURE,
    ttl_deletes_the_job=False,
    shows_gang_scheduled=True,
)
V1_RULES: Final = APIRules(
    version=c.VERSION_V1,
    restart_policies=c.V1_RESTART_POLICIES,
    launcher_restart_policy=c.RESTART_POLICY_NEVER,
    ttl_deletes_the_job=True,
    shows_gang_scheduled=False,
)
RULES_BY_VERSION: Final = {rules.version: rules for rules in (V2BETA1_RULES, V1_RULES)}

STORED: Final = tuple(RULES_BY_VERSION)
"""The versions a stored object may have been admitted at: any served one."""


def declared_versions(job: MPIJob) -> tuple[str, ...]:
    """The version the job's document names, whose rules the API server checks it against (an
    unknown one is refused by name before any rule)."""
    version = (job.api_version or "").rpartition("/")[2]
    return (version,) if version in RULES_BY_VERSION else (c.VERSION,)


def restart_policies(versions: Iterable[str]) -> tuple[str, ...]:
    """The restart policies a request at any of ``versions`` may name, in a stable order."""
    allowed = {
        policy for version in versions for policy in RULES_BY_VERSION[version].restart_policies
    }
    return tuple(sorted(allowed))


def creating_api(job: MPIJob) -> APIRules:
    """The rules of the API that created ``job``, as the CRD recorded it: the version whose
    default transport the job has (kubeflow.org/v2beta1's for a transport no version
    defaults)."""
    transport = job.spec.transport if job.spec is not None else None
    for version, default in c.DEFAULT_TRANSPORT.items():
        if transport == default:
            return RULES_BY_VERSION[version]
    return V2BETA1_RULES
