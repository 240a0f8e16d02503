"""Small fluent builders of test objects, so table-driven tests read like specs.

    MPIJobWrapper("pi").workers(2, cpu="10", memory="20Gi").clean_pod_policy("Running").obj()

``obj()`` returns a deep copy of the wire form; ``job()`` parses and defaults it.
"""

from __future__ import annotations

import copy
from typing import Any, Self

from mpi_operator.api import constants as c
from mpi_operator.api.defaults import DefaultedMPIJob, with_defaults
from mpi_operator.api.validation import parse_mpijob
from mpi_operator.desired.validation import load_valid_mpijob

DEFAULT_IMAGE = "mpioperator/mpi-pi:openmpi"
DEFAULT_UID = "8a7b6c5d-0000-4000-8000-000000000001"


def container(name: str = "main", image: str = DEFAULT_IMAGE, **resources: str) -> dict[str, Any]:
    """A container; ``cpu=``/``memory=``/``gpu=`` become requests (gpu: nvidia.com/gpu)."""
    result: dict[str, Any] = {"name": name, "image": image}
    requests = {("nvidia.com/gpu" if k == "gpu" else k): v for k, v in resources.items()}
    if requests:
        result["resources"] = {"requests": requests}
    return result


def resources_container(
    name: str = "main",
    *,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    """A container with explicit requests and limits (resource names as written).

    ``restart_policy="Always"`` makes an init container a sidecar.
    """
    result: dict[str, Any] = {"name": name, "image": DEFAULT_IMAGE}
    resources = {
        field: dict(values)
        for field, values in (("requests", requests), ("limits", limits))
        if values is not None
    }
    if resources:
        result["resources"] = resources
    if restart_policy is not None:
        result["restartPolicy"] = restart_policy
    return result


def child_labels(job_name: str | None = "test") -> dict[str, str]:
    """Labels of a Service, ConfigMap, Secret, launcher Job (with ``app``) or PodGroup (without)."""
    labels = {"app": job_name} if job_name else {}
    return {**labels, "training.kubeflow.org/operator-name": "mpi-operator"}


def owner_references(job_name: str = "test", uid: str = DEFAULT_UID) -> list[dict[str, Any]]:
    """The ownerReferences of an object the MPIJob ``job_name`` controls.

    Spelled out rather than built from the API constants, so that a test comparing against
    it notices when those change.
    """
    return [
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "name": job_name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


class MPIJobWrapper:
    def __init__(self, name: str = "test", namespace: str = "ns") -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": c.API_VERSION,
            "kind": c.KIND,
            "metadata": {"name": name, "namespace": namespace, "uid": DEFAULT_UID},
            "spec": {
                "mpiReplicaSpecs": {
                    c.LAUNCHER: {
                        "replicas": 1,
                        "template": {"spec": {"containers": [container("launcher")]}},
                    }
                }
            },
        }

    # -- output ------------------------------------------------------------------------
    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def job(self) -> DefaultedMPIJob:
        """The parsed, validated job with defaults applied."""
        return load_valid_mpijob(self.obj())

    def defaulted(self) -> DefaultedMPIJob:
        """The parsed job with defaults applied, not validated: for builder tests that mirror
        upstream's, whose pod templates are too sparse for the API server (no image, say)."""
        return with_defaults(parse_mpijob(self.obj()))

    # -- metadata ----------------------------------------------------------------------
    def uid(self, uid: str) -> Self:
        self._obj["metadata"]["uid"] = uid
        return self

    def metadata_field(self, field: str, value: Any) -> Self:
        self._obj["metadata"][field] = value
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    # -- roles -------------------------------------------------------------------------
    def _replica(self, replica_type: str) -> dict[str, Any]:
        specs: dict[str, Any] = self._obj["spec"]["mpiReplicaSpecs"]
        replica: dict[str, Any] = specs.setdefault(
            replica_type, {"template": {"spec": {"containers": [container("worker")]}}}
        )
        return replica

    def _pod_spec(self, replica_type: str) -> dict[str, Any]:
        spec: dict[str, Any] = self._replica(replica_type)["template"].setdefault("spec", {})
        return spec

    def launcher(self, **resources: str) -> Self:
        """Give the launcher's only container these requests."""
        self._pod_spec(c.LAUNCHER)["containers"] = [container("launcher", **resources)]
        return self

    def workers(self, replicas: int, **resources: str) -> Self:
        """Add (or resize) the Worker role; its only container gets these requests."""
        replica = self._replica(c.WORKER)
        replica["replicas"] = replicas
        if resources:
            self._pod_spec(c.WORKER)["containers"] = [container("worker", **resources)]
        return self

    def containers(self, replica_type: str, *containers: dict[str, Any]) -> Self:
        self._pod_spec(replica_type)["containers"] = list(containers)
        return self

    def init_containers(self, replica_type: str, *containers: dict[str, Any]) -> Self:
        self._pod_spec(replica_type)["initContainers"] = list(containers)
        return self

    def pod_spec_field(self, replica_type: str, field: str, value: Any) -> Self:
        self._pod_spec(replica_type)[field] = value
        return self

    def _main_container(self, replica_type: str) -> dict[str, Any]:
        main: dict[str, Any] = self._pod_spec(replica_type)["containers"][0]
        return main

    def container_field(self, replica_type: str, field: str, value: Any) -> Self:
        """Set a field of the role's first container (the one the operator configures)."""
        self._main_container(replica_type)[field] = value
        return self

    def command(self, replica_type: str, *command: str) -> Self:
        return self.container_field(replica_type, "command", list(command))

    def args(self, replica_type: str, *args: str) -> Self:
        return self.container_field(replica_type, "args", list(args))

    def env(self, replica_type: str, name: str, value: str) -> Self:
        """Append an environment variable to the role's first container."""
        self._main_container(replica_type).setdefault("env", []).append(
            {"name": name, "value": value}
        )
        return self

    def volume(self, replica_type: str, name: str, mount_path: str) -> Self:
        """An emptyDir volume mounted at ``mount_path`` in the role's first container."""
        self._pod_spec(replica_type).setdefault("volumes", []).append(
            {"name": name, "emptyDir": {}}
        )
        self._main_container(replica_type).setdefault("volumeMounts", []).append(
            {"name": name, "mountPath": mount_path}
        )
        return self

    def template_label(self, replica_type: str, key: str, value: str) -> Self:
        metadata = self._replica(replica_type)["template"].setdefault("metadata", {})
        metadata.setdefault("labels", {})[key] = value
        return self

    def template_annotation(self, replica_type: str, key: str, value: str) -> Self:
        metadata = self._replica(replica_type)["template"].setdefault("metadata", {})
        metadata.setdefault("annotations", {})[key] = value
        return self

    def priority_class(self, replica_type: str, name: str) -> Self:
        return self.pod_spec_field(replica_type, "priorityClassName", name)

    def restart_policy(self, replica_type: str, policy: str) -> Self:
        self._replica(replica_type)["restartPolicy"] = policy
        return self

    def replicas(self, replica_type: str, replicas: int | None) -> Self:
        replica = self._replica(replica_type)
        if replicas is None:
            replica.pop("replicas", None)
        else:
            replica["replicas"] = replicas
        return self

    def without(self, replica_type: str) -> Self:
        self._obj["spec"]["mpiReplicaSpecs"].pop(replica_type, None)
        return self

    # -- spec --------------------------------------------------------------------------
    def spec_field(self, field: str, value: Any) -> Self:
        self._obj["spec"][field] = value
        return self

    def transport(self, transport: str) -> Self:
        return self.spec_field("transport", transport)

    def v1(self) -> Self:
        """The job as a kubeflow.org/v1 client (Flyte) writes it, with the transport the API
        server defaults that version to."""
        self._obj["apiVersion"] = c.API_VERSION_V1
        return self.transport(c.TRANSPORT_KUBECTL_EXEC)

    def slots_per_worker(self, slots: int) -> Self:
        return self.spec_field("slotsPerWorker", slots)

    def implementation(self, name: str) -> Self:
        return self.spec_field("mpiImplementation", name)

    def run_launcher_as_worker(self, enabled: bool = True) -> Self:
        return self.spec_field("runLauncherAsWorker", enabled)

    def ssh_auth_mount_path(self, path: str) -> Self:
        return self.spec_field("sshAuthMountPath", path)

    def launcher_creation_policy(self, policy: str) -> Self:
        return self.spec_field("launcherCreationPolicy", policy)

    def run_policy(self, **fields: Any) -> Self:
        self._obj["spec"].setdefault("runPolicy", {}).update(fields)
        return self

    def clean_pod_policy(self, policy: str) -> Self:
        return self.run_policy(cleanPodPolicy=policy)

    def suspend(self, suspended: bool = True) -> Self:
        return self.run_policy(suspend=suspended)

    def scheduling_policy(self, **fields: Any) -> Self:
        run_policy = self._obj["spec"].setdefault("runPolicy", {})
        run_policy.setdefault("schedulingPolicy", {}).update(fields)
        return self
