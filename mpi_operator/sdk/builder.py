"""A fluent builder of MPIJobs that reads like the job it makes.

    job = (
        JobBuilder("pi")
        .image("mpioperator/mpi-pi:openmpi")
        .launcher(command=["mpirun", "-n", "2", "/home/mpiuser/pi"], cpu="1", memory="1Gi")
        .workers(2, command=["/usr/sbin/sshd", "-De"], cpu="1", memory="1Gi")
        .clean_pod_policy("Running")
        .build()
    )

Each role gets one container (``mpi-launcher``, ``mpi-worker``); ``cpu``, ``memory`` and
``gpus`` become its limits (Kubernetes copies limits to requests). Anything the shortcuts do not
cover goes through :meth:`JobBuilder.pod_spec` or :meth:`JobBuilder.container`, which set raw
fields of the pod spec or the role's container. ``build()`` validates with the operator's own
rules and raises ``InvalidJobError`` naming every bad field.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final, Self

from mpi_operator.api import constants as c
from mpi_operator.api.models import MPIJob
from mpi_operator.sdk.offline import checked

CONTAINER_NAMES: Final = {c.LAUNCHER: "mpi-launcher", c.WORKER: "mpi-worker"}
GPU_RESOURCE: Final = "nvidia.com/gpu"


class JobBuilder:
    """Builds one ``kubeflow.org/v2beta1`` MPIJob; every method returns the builder."""

    def __init__(self, name: str, namespace: str | None = None) -> None:
        metadata: dict[str, Any] = {"name": name}
        if namespace:
            metadata["namespace"] = namespace
        self._obj: dict[str, Any] = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": metadata,
            "spec": {"mpiReplicaSpecs": {}},
        }
        self._image = ""

    # -- output --------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The wire form as built, not validated."""
        return copy.deepcopy(self._obj)

    def build(self) -> MPIJob:
        """The validated job, as it will be submitted (defaults are the server's business)."""
        return checked(self.to_dict())

    # -- metadata ------------------------------------------------------------------------------

    def label(self, key: str, value: str) -> Self:
        _set_in(self._obj["metadata"], "labels", key, value)
        return self

    def annotation(self, key: str, value: str) -> Self:
        _set_in(self._obj["metadata"], "annotations", key, value)
        return self

    # -- roles ---------------------------------------------------------------------------------

    def image(self, image: str) -> Self:
        """The image of both roles' containers (already declared ones and later ones)."""
        self._image = image
        for replica_type in self._obj["spec"]["mpiReplicaSpecs"]:
            self._container(replica_type)["image"] = image
        return self

    def launcher(
        self,
        *,
        command: Sequence[str] | None = None,
        args: Sequence[str] | None = None,
        image: str | None = None,
        cpu: str | int | None = None,
        memory: str | None = None,
        gpus: int | None = None,
    ) -> Self:
        """The launcher (always one replica): the process that runs ``mpirun``."""
        return self._role(c.LAUNCHER, 1, command, args, image, cpu, memory, gpus)

    def workers(
        self,
        replicas: int,
        *,
        command: Sequence[str] | None = None,
        args: Sequence[str] | None = None,
        image: str | None = None,
        cpu: str | int | None = None,
        memory: str | None = None,
        gpus: int | None = None,
    ) -> Self:
        """``replicas`` workers, the hosts ``mpirun`` starts ranks on."""
        return self._role(c.WORKER, replicas, command, args, image, cpu, memory, gpus)

    def env(self, name: str, value: str, *, role: str | None = None) -> Self:
        """An environment variable of one role's container, or of both when ``role`` is None."""
        for replica_type in self._roles(role):
            self._container(replica_type).setdefault("env", []).append(
                {"name": name, "value": value}
            )
        return self

    def run_as_user(self, uid: int, *, role: str | None = None) -> Self:
        """The container's ``securityContext.runAsUser`` (the pi image runs as 1000)."""
        for replica_type in self._roles(role):
            self._container(replica_type).setdefault("securityContext", {})["runAsUser"] = uid
        return self

    def restricted(self, *, role: str | None = None) -> Self:
        """What the restricted Pod Security Standard asks of the container: a non-root user,
        no privilege escalation, every capability dropped, the runtime's default seccomp
        profile. Set the user with :meth:`run_as_user` when the image's is root."""
        for replica_type in self._roles(role):
            self._container(replica_type).setdefault("securityContext", {}).update(
                runAsNonRoot=True,
                allowPrivilegeEscalation=False,
                capabilities={"drop": ["ALL"]},
                seccompProfile={"type": "RuntimeDefault"},
            )
        return self

    def read_only_root(self, *writable: str, role: str | None = None) -> Self:
        """A read-only root filesystem for the container, with an emptyDir volume mounted at
        each ``writable`` path (``/tmp`` for mpirun's session directory)."""
        for replica_type in self._roles(role):
            container = self._container(replica_type)
            container.setdefault("securityContext", {})["readOnlyRootFilesystem"] = True
            for path in writable:
                name = path.strip("/").replace("/", "-").lower()
                self._pod_spec(replica_type).setdefault("volumes", []).append(
                    {"name": name, "emptyDir": {}}
                )
                container.setdefault("volumeMounts", []).append({"name": name, "mountPath": path})
        return self

    def container(self, role: str, **fields: Any) -> Self:
        """Raw fields of the role's container, in wire (camelCase) names."""
        self._container(role).update(copy.deepcopy(fields))
        return self

    def pod_spec(self, role: str, **fields: Any) -> Self:
        """Raw fields of the role's pod spec, in wire names (e.g. ``nodeSelector``)."""
        self._pod_spec(role).update(copy.deepcopy(fields))
        return self

    def pod_annotation(self, role: str, key: str, value: str) -> Self:
        return self._pod_metadata(role, "annotations", key, value)

    def pod_label(self, role: str, key: str, value: str) -> Self:
        return self._pod_metadata(role, "labels", key, value)

    def restart_policy(self, role: str, policy: str) -> Self:
        self._replica(role)["restartPolicy"] = policy
        return self

    # -- spec ----------------------------------------------------------------------------------

    def slots_per_worker(self, slots: int) -> Self:
        return self._spec(slotsPerWorker=slots)

    def mpi_implementation(self, name: str) -> Self:
        """OpenMPI (the default), Intel or MPICH."""
        return self._spec(mpiImplementation=name)

    def ssh_auth_mount_path(self, path: str) -> Self:
        return self._spec(sshAuthMountPath=path)

    def run_launcher_as_worker(self, enabled: bool = True) -> Self:
        return self._spec(runLauncherAsWorker=enabled)

    def launcher_creation_policy(self, policy: str) -> Self:
        """AtStartup (the default) or WaitForWorkersReady."""
        return self._spec(launcherCreationPolicy=policy)

    def clean_pod_policy(self, policy: str) -> Self:
        """Which pods go when the job finishes: All, Running or None."""
        return self._run_policy(cleanPodPolicy=policy)

    def ttl_seconds_after_finished(self, seconds: int) -> Self:
        return self._run_policy(ttlSecondsAfterFinished=seconds)

    def active_deadline_seconds(self, seconds: int) -> Self:
        return self._run_policy(activeDeadlineSeconds=seconds)

    def backoff_limit(self, retries: int) -> Self:
        return self._run_policy(backoffLimit=retries)

    def suspend(self, suspended: bool = True) -> Self:
        return self._run_policy(suspend=suspended)

    def gang(
        self,
        *,
        queue: str | None = None,
        min_available: int | None = None,
        priority_class: str | None = None,
        schedule_timeout_seconds: int | None = None,
        min_resources: Mapping[str, str] | None = None,
    ) -> Self:
        """``runPolicy.schedulingPolicy``: what the gang scheduler is told about the job."""
        fields = {
            "queue": queue,
            "minAvailable": min_available,
            "priorityClass": priority_class,
            "scheduleTimeoutSeconds": schedule_timeout_seconds,
            "minResources": dict(min_resources) if min_resources is not None else None,
        }
        policy = self._obj["spec"].setdefault("runPolicy", {}).setdefault("schedulingPolicy", {})
        policy.update({k: v for k, v in fields.items() if v is not None})
        return self

    # -- plumbing ------------------------------------------------------------------------------

    def _role(
        self,
        role: str,
        replicas: int,
        command: Sequence[str] | None,
        args: Sequence[str] | None,
        image: str | None,
        cpu: str | int | None,
        memory: str | None,
        gpus: int | None,
    ) -> Self:
        self._replica(role)["replicas"] = replicas
        main = self._container(role)
        if image:
            main["image"] = image
        if command is not None:
            main["command"] = list(command)
        if args is not None:
            main["args"] = list(args)
        limits = {"cpu": cpu, "memory": memory, GPU_RESOURCE: gpus}
        if any(v is not None for v in limits.values()):
            main.setdefault("resources", {}).setdefault("limits", {}).update(
                {k: v for k, v in limits.items() if v is not None}
            )
        return self

    def _roles(self, role: str | None) -> list[str]:
        return [role] if role else list(self._obj["spec"]["mpiReplicaSpecs"])

    def _replica(self, role: str) -> dict[str, Any]:
        if role not in c.REPLICA_TYPES:
            raise ValueError(f"role must be one of {', '.join(c.REPLICA_TYPES)}, not {role!r}")
        specs: dict[str, Any] = self._obj["spec"]["mpiReplicaSpecs"]
        if role not in specs:
            main: dict[str, Any] = {"name": CONTAINER_NAMES[role]}
            if self._image:
                main["image"] = self._image
            specs[role] = {"replicas": 1, "template": {"spec": {"containers": [main]}}}
        replica: dict[str, Any] = specs[role]
        return replica

    def _pod_spec(self, role: str) -> dict[str, Any]:
        spec: dict[str, Any] = self._replica(role)["template"].setdefault("spec", {})
        return spec

    def _container(self, role: str) -> dict[str, Any]:
        main: dict[str, Any] = self._pod_spec(role)["containers"][0]
        return main

    def _pod_metadata(self, role: str, field: str, key: str, value: str) -> Self:
        _set_in(self._replica(role)["template"].setdefault("metadata", {}), field, key, value)
        return self

    def _spec(self, **fields: Any) -> Self:
        self._obj["spec"].update(fields)
        return self

    def _run_policy(self, **fields: Any) -> Self:
        self._obj["spec"].setdefault("runPolicy", {}).update(fields)
        return self


def _set_in(metadata: dict[str, Any], field: str, key: str, value: str) -> None:
    metadata.setdefault(field, {})[key] = value
