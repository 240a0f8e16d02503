"""Pydantic models of the MPIJob: kubeflow.org/v2beta1 and v1 through the same objects.

These models are the single source of truth for the CRD schema (see ``crd.py``):
descriptions, enums, minimums, admission rules and API-server defaults are declared
here, next to the field they describe. The CRD serves v2beta1 (stored) and v1 with the
same fields, the union of both APIs, so no field is lost when a job written through one
version is read or patched through the other; ``by_version`` holds what differs.

Two rules keep users' objects intact:
- every model allows unknown fields, so a job written for a newer API round-trips;
- pod templates stay plain dicts, never typed models, so no pod field is ever lost.

Enum-like fields are plain strings: an unsupported value must reach validation and
produce an error that names the field, not fail parsing.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from mpi_operator.api import constants as c

# Keys of these fields are user data, shown as `field[key]` in error paths.
MAP_FIELDS = frozenset({"mpiReplicaSpecs", "minResources", "replicaStatuses"})

ResourceList = dict[str, int | str]


# The range of each integer format, as the Go types of upstream's API hold them. The API
# server does not enforce `format` on custom resources, so the CRD states the maximum too.
FORMAT_MAXIMUM: Final = {"int32": 2**31 - 1, "int64": 2**63 - 1}

MAX_WORKERS: Final = 20_000
"""The most workers a job may have. The job's ConfigMap holds the hostfile and, once every
worker runs, discover_hosts.sh listing them all; from 20,204 workers on, even the shortest
of these (one-letter job and namespace names, Intel MPI's ``host:slots`` lines) exceed the
1 MiB the API server allows a ConfigMap. A job that large could never run, so it is refused
up front rather than after building tens of thousands of pods; 20,000 is the round number
below that point. Longer names reach the limit sooner, which ``desired`` checks."""


def _schema(**extra: Any) -> dict[str, Any]:
    """CRD schema keywords for a field, read by the CRD generator. ``by_version`` maps an API
    version to keywords that replace the others in that version's schema."""
    return {"x-crd": extra}


def crd_keywords(field: FieldInfo) -> dict[str, Any]:
    """The ``_schema`` keywords of a field; empty when it has none."""
    extra = field.json_schema_extra
    crd = extra.get("x-crd") if isinstance(extra, dict) else None
    return dict(crd) if isinstance(crd, dict) else {}


def integer_maximum(keywords: dict[str, Any]) -> int | None:
    """A field's maximum: its own, else its format's range."""
    maximum = keywords.get("maximum", FORMAT_MAXIMUM.get(str(keywords.get("format"))))
    return maximum if isinstance(maximum, int) else None


class APIModel(BaseModel):
    """Base for every API object: camelCase wire names, strict types, unknown fields kept."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        strict=True,
        validate_assignment=False,
    )


class Topology(APIModel):
    """The network domain the job's workers are placed in: the nodes sharing one value of a
    node label (a rack, a block)."""

    key: str | None = Field(
        default=None,
        description=(
            "The node label whose value names the domain, e.g. topology.kubernetes.io/zone "
            "or a rack label. Workers are placed on nodes with one value of it, and the "
            "hostfile lists them domain by domain."
        ),
    )
    mode: str | None = Field(
        default=None,
        description=(
            "Required (the gang waits until one domain holds every worker) or Preferred (one "
            "domain when it can, several when it cannot). Defaults to Required."
        ),
        json_schema_extra=_schema(enum=list(c.TOPOLOGY_MODES)),
    )


class SchedulingPolicy(APIModel):
    """Gang-scheduling parameters passed to the PodGroup."""

    min_available: int | None = Field(
        default=None,
        description=(
            "Minimal number of pods that must be schedulable together; becomes the "
            "PodGroup's minMember. Defaults to the number of workers plus one (the launcher); "
            "with launcherCreationPolicy WaitForWorkersReady, to the number of workers, since "
            "the launcher is created only once they are ready."
        ),
        json_schema_extra=_schema(minimum=0, format="int32"),
    )
    queue: str | None = Field(
        default=None,
        description=(
            "Volcano queue of the PodGroup. Defaults to the MPIJob annotation "
            "scheduling.volcano.sh/queue-name. Ignored by the coscheduling plugin."
        ),
    )
    min_resources: ResourceList | None = Field(
        default=None,
        description=(
            "Minimal resources the gang needs before any pod is placed. Computed from the "
            "pod templates, highest priority first, when unset."
        ),
        json_schema_extra=_schema(resource_list=True),
    )
    priority_class: str | None = Field(
        default=None,
        description=(
            "PriorityClass of the Volcano PodGroup. Defaults to the launcher's, then the "
            "worker's priorityClassName. Ignored by the coscheduling plugin."
        ),
    )
    schedule_timeout_seconds: int | None = Field(
        default=None,
        description=(
            "Seconds the coscheduling plugin waits for the whole gang before rejecting it; "
            "0 means the scheduler's own default. Ignored by Volcano."
        ),
        json_schema_extra=_schema(minimum=0, format="int32"),
    )
    topology: Topology | None = Field(
        default=None,
        description=(
            "Place every worker in one network domain, a value of a node label, and list "
            "them in the hostfile domain by domain. Without it, the workers' Kueue "
            "annotation kueue.x-k8s.io/podset-required-topology (or -preferred-) stands in."
        ),
    )


class RunPolicy(APIModel):
    """How the job runs, is retried, suspended and cleaned up."""

    clean_pod_policy: str | None = Field(
        default=None,
        description=(
            "Which worker pods to delete when the job finishes: All, Running (running and "
            "pending ones) or None. Defaults to None."
        ),
        json_schema_extra=_schema(enum=list(c.CLEAN_POD_POLICIES)),
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None,
        description="Seconds after the job finishes before the launcher Job is deleted.",
        json_schema_extra=_schema(minimum=0, format="int32"),
    )
    active_deadline_seconds: int | None = Field(
        default=None,
        description="Seconds the launcher may run before the job fails with DeadlineExceeded.",
        json_schema_extra=_schema(minimum=0, format="int64"),
    )
    backoff_limit: int | None = Field(
        default=None,
        description="Retries of the launcher before the job fails. Kubernetes defaults it to 6.",
        json_schema_extra=_schema(minimum=0, format="int32"),
    )
    scheduling_policy: SchedulingPolicy | None = Field(
        default=None,
        description="Gang-scheduling parameters, used when the operator runs a gang scheduler.",
    )
    suspend: bool | None = Field(
        default=None,
        description=(
            "Suspend the job: no workers run and the launcher Job is suspended. Resuming "
            "re-creates the workers."
        ),
        json_schema_extra=_schema(default=False),
    )
    managed_by: str | None = Field(
        default=None,
        description=(
            "Controller that reconciles this job: kubeflow.org/mpi-operator (default) or "
            "kueue.x-k8s.io/multikueue. Immutable."
        ),
        json_schema_extra=_schema(
            enum=list(c.MANAGED_BY_VALUES),
            max_length=63,
            validations=[
                {
                    "rule": "self == oldSelf",
                    "message": "managedBy is immutable",
                }
            ],
        ),
    )


class ReplicaSpec(APIModel):
    """One role of the job: the launcher or the workers."""

    replicas: int | None = Field(
        default=None,
        description=(
            f"Number of pods: exactly 1 for the Launcher, 1 to {MAX_WORKERS} for Workers."
        ),
        json_schema_extra=_schema(
            minimum=0,
            maximum=MAX_WORKERS,
            maximum_reason=(
                "the hostfile of more workers cannot fit in a ConfigMap (1 MiB at most)"
            ),
            format="int32",
        ),
    )
    template: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Pod template of this role. Kept as written: fields the operator does not own "
            "reach the pods unchanged."
        ),
        json_schema_extra=_schema(pod_template=True, required=True),
    )
    restart_policy: str | None = Field(
        default=None,
        description=(
            "Restart policy of the pods, overriding the template's: OnFailure (launcher "
            "default) or Never (worker default). Through kubeflow.org/v1 also Always and "
            "ExitCode, and Never is the launcher's default too."
        ),
        json_schema_extra=_schema(
            enum=list(c.RESTART_POLICIES),
            by_version={c.VERSION_V1: {"enum": list(c.V1_RESTART_POLICIES)}},
        ),
    )


class MPIJobSpec(APIModel):
    """Desired state of an MPIJob."""

    slots_per_worker: int | None = Field(
        default=None,
        description="Slots (MPI processes) per worker in the hostfile.",
        json_schema_extra=_schema(minimum=0, format="int32", default=c.DEFAULT_SLOTS_PER_WORKER),
    )
    run_launcher_as_worker: bool | None = Field(
        default=None,
        description="Also run MPI processes in the launcher: it becomes the first hostfile entry.",
        json_schema_extra=_schema(default=False),
    )
    run_policy: RunPolicy | None = Field(
        default=None,
        description="Retries, deadlines, suspension, cleanup and gang-scheduling policy.",
    )
    mpi_replica_specs: dict[str, ReplicaSpec] | None = Field(
        default=None,
        description="The Launcher and Worker roles.",
        json_schema_extra=_schema(replica_specs=True, required=True),
    )
    ssh_auth_mount_path: str | None = Field(
        default=None,
        description="Where the SSH keys are mounted in the first container of every pod.",
        json_schema_extra=_schema(default=c.DEFAULT_SSH_AUTH_MOUNT_PATH, min_length=1),
    )
    launcher_creation_policy: str | None = Field(
        default=None,
        description=(
            "When the launcher is created: AtStartup, or WaitForWorkersReady (once every "
            "worker is Ready)."
        ),
        json_schema_extra=_schema(
            enum=list(c.LAUNCHER_CREATION_POLICIES), default=c.LAUNCHER_CREATION_AT_STARTUP
        ),
    )
    mpi_implementation: str | None = Field(
        default=None,
        description="MPI implementation of the images: OpenMPI, Intel or MPICH.",
        json_schema_extra=_schema(enum=list(c.MPI_IMPLEMENTATIONS), default=c.OPENMPI),
    )
    transport: str | None = Field(
        default=None,
        description=(
            "How the launcher starts processes on the workers: SSH (keys in a Secret, sshd in "
            "the workers, a headless Service) or KubectlExec (kubectl exec into the workers, "
            "which sleep unless they have a command, as training-operator runs kubeflow.org/v1 "
            "jobs). Defaults to the creating API version's: SSH for v2beta1, KubectlExec for "
            "v1. Immutable."
        ),
        json_schema_extra=_schema(
            enum=list(c.TRANSPORTS),
            by_version={
                version: {"default": transport}
                for version, transport in c.DEFAULT_TRANSPORT.items()
            },
            validations=[{"rule": "self == oldSelf", "message": "transport is immutable"}],
        ),
    )
    main_container: str | None = Field(
        default=None,
        description=(
            "kubeflow.org/v1: the worker container the launcher execs processes in "
            "(KubectlExec). Defaults to the first container."
        ),
    )
    clean_pod_policy: str | None = Field(
        default=None,
        description=(
            "kubeflow.org/v1, deprecated: runPolicy.cleanPodPolicy, which wins when both are set."
        ),
        json_schema_extra=_schema(enum=list(c.CLEAN_POD_POLICIES)),
    )


class JobCondition(APIModel):
    """One observed condition of the job."""

    type: str = Field(description="Type of the condition, such as Created or Succeeded.")
    status: str = Field(
        description="True, False or Unknown.",
        json_schema_extra=_schema(enum=["True", "False", "Unknown"]),
    )
    reason: str | None = Field(default=None, description="Machine-readable cause.")
    message: str | None = Field(default=None, description="Human-readable details.")
    last_update_time: str | None = Field(
        default=None,
        description="Last time the condition was updated.",
        json_schema_extra=_schema(format="date-time"),
    )
    last_transition_time: str | None = Field(
        default=None,
        description="Last time the status changed.",
        json_schema_extra=_schema(format="date-time"),
    )


class ReplicaStatus(APIModel):
    """Pod counts of one role."""

    active: int | None = Field(
        default=None, description="Running pods.", json_schema_extra=_schema(format="int32")
    )
    succeeded: int | None = Field(
        default=None, description="Succeeded pods.", json_schema_extra=_schema(format="int32")
    )
    failed: int | None = Field(
        default=None, description="Failed pods.", json_schema_extra=_schema(format="int32")
    )
    label_selector: dict[str, Any] | None = Field(
        default=None,
        description="Deprecated: selector of the role's pods.",
        json_schema_extra=_schema(opaque=True),
    )
    selector: str | None = Field(default=None, description="Selector of the role's pods.")


class JobStatus(APIModel):
    """Observed state of an MPIJob."""

    conditions: list[JobCondition] | None = Field(
        default=None,
        description="Observed conditions, at most one per type.",
        json_schema_extra=_schema(list_map_keys=["type"]),
    )
    replica_statuses: dict[str, ReplicaStatus] | None = Field(
        default=None, description="Pod counts of the Launcher and Worker roles."
    )
    start_time: str | None = Field(
        default=None,
        description="When the job started running (reset on resume).",
        json_schema_extra=_schema(format="date-time"),
    )
    completion_time: str | None = Field(
        default=None,
        description="When the job finished.",
        json_schema_extra=_schema(format="date-time"),
    )
    last_reconcile_time: str | None = Field(
        default=None,
        description="Last time the job was reconciled.",
        json_schema_extra=_schema(format="date-time"),
    )


class MPIJob(APIModel):
    """An allreduce-style distributed training job: one launcher and N workers."""

    api_version: str | None = Field(
        default=None,
        description="Versioned schema of this object: kubeflow.org/v2beta1 or kubeflow.org/v1.",
    )
    kind: str | None = Field(default=None, description="Kind of this object: MPIJob.")
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: MPIJobSpec | None = Field(
        default=None,
        description="Desired state of the job.",
        json_schema_extra=_schema(
            required=True,
            validations=[
                {
                    # The field's own rule only sees changes of a value that exists on both
                    # sides; adding or removing managedBy is caught here.
                    "rule": (
                        "(has(self.runPolicy) && has(self.runPolicy.managedBy)) == "
                        "(has(oldSelf.runPolicy) && has(oldSelf.runPolicy.managedBy))"
                    ),
                    "message": "managedBy is immutable: it can only be set when the job is created",
                    "fieldPath": ".runPolicy.managedBy",
                }
            ],
        ),
    )
    status: JobStatus | None = Field(default=None, description="Observed state of the job.")

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace") or "default")

    @property
    def uid(self) -> str:
        return str(self.metadata.get("uid", ""))

    @property
    def annotations(self) -> dict[str, str]:
        return dict(self.metadata.get("annotations") or {})

    def replica_spec(self, replica_type: str) -> ReplicaSpec | None:
        specs = self.spec.mpi_replica_specs if self.spec else None
        return (specs or {}).get(replica_type)

    def replicas(self, replica_type: str) -> int:
        """Replicas of a role; 0 when the role is absent."""
        spec = self.replica_spec(replica_type)
        return spec.replicas or 0 if spec else 0

    def to_dict(self) -> dict[str, Any]:
        """The wire form, with exactly the fields that were set."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")
