"""KubectlExec, the transport training-operator gives kubeflow.org/v1 jobs: the launcher's
mpirun starts processes on the workers through ``kubectl exec``, so no image needs sshd and
the job has no Secret or Service.

The launcher runs under a ServiceAccount of its own, bound to a Role that allows exec into
this job's worker pods, by name, and nothing else, and only while the job runs. The Role
names only pods the operator has created or found to be the job's own, and is written after
them; a job without workers has no Role at all. The account its template names (for Flyte,
the execution's account, which every task of a project shares) gains no right. Workers get
no account token unless their template asks for one: they never call the API server.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import child_metadata
from mpi_operator.api.transport_checks import invalid_name
from mpi_operator.desired import pod_templates
from mpi_operator.desired.kinds import POD, ROLE, ROLE_BINDING, SERVICE_ACCOUNT, Child, ChildKind
from mpi_operator.desired.pod_templates import HOSTFILE_PATH
from mpi_operator.field_errors import FieldError, quoted
from mpi_operator.pod_rules import dns

KUBEXEC_PATH: Final = f"{c.CONFIG_MOUNT_PATH}/{c.KUBEXEC_SCRIPT_NAME}"
KUBECTL_PATH: Final = f"{c.KUBECTL_MOUNT_PATH}/kubectl"
KUBECTL_DELIVERY_CONTAINER: Final = "kubectl-delivery"
# Workers without a command of their own wait for the launcher's exec (training-operator's).
KEEP_ALIVE_COMMAND: Final = ("sleep",)
KEEP_ALIVE_ARGS: Final = ("365d",)
# What the API server stores at most in one object (etcd's default request limit is 1.5 MiB;
# the Role lists every worker twice).
MAX_ROLE_BYTES: Final = 1024 * 1024

# kubexec.sh is mpirun's remote shell. Workers have no kubectl, so Open MPI must start every
# daemon from the launcher, never through a worker (tree spawn).
LAUNCHER_ENV: Final[Mapping[str, tuple[tuple[str, str], ...]]] = {
    c.OPENMPI: (
        ("OMPI_MCA_plm_rsh_agent", KUBEXEC_PATH),
        ("OMPI_MCA_orte_default_hostfile", HOSTFILE_PATH),
        ("OMPI_MCA_plm_rsh_no_tree_spawn", "true"),
        ("PRTE_MCA_plm_ssh_agent", KUBEXEC_PATH),
        ("PRTE_MCA_prte_default_hostfile", HOSTFILE_PATH),
        ("PRTE_MCA_plm_ssh_no_tree_spawn", "true"),
    ),
    c.INTEL_MPI: (
        ("I_MPI_HYDRA_HOST_FILE", HOSTFILE_PATH),
        ("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
        ("I_MPI_HYDRA_BOOTSTRAP_EXEC", KUBEXEC_PATH),
    ),
    c.MPICH: (
        ("HYDRA_HOST_FILE", HOSTFILE_PATH),
        ("HYDRA_LAUNCHER", "rsh"),
        ("HYDRA_LAUNCHER_EXEC", KUBEXEC_PATH),
    ),
}

# Copying one binary: enough with room to spare, and set so quota'd namespaces admit the pod.
_DELIVERY_RESOURCES: Final = {"cpu": "100m", "memory": "128Mi"}
# Passes the restricted Pod Security Standard, whatever the namespace enforces.
_DELIVERY_SECURITY_CONTEXT: Final = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def exec_container(job: DefaultedMPIJob) -> str:
    """The worker container processes run in: spec.mainContainer, else the first one."""
    if job.spec.main_container:
        return job.spec.main_container
    template = pod_templates.replica_spec(job, c.WORKER).template or {}
    return str(template["spec"]["containers"][0]["name"])


def kubexec_script(job: DefaultedMPIJob) -> str:
    """mpirun's remote shell: runs the command it is given in the worker pod it names.

    Launchers without workers still get the script, so the launcher's mount never dangles.
    """
    container = exec_container(job) if job.replicas(c.WORKER) else ""
    target = f" --container={container}" if container else ""
    return (
        f'#!/bin/sh\npod="$1"\nshift\nexec {KUBECTL_PATH} exec "$pod"{target} -- /bin/sh -c "$*"\n'
    )


def kubectl_delivery_container(job: DefaultedMPIJob, facts: ClusterFacts) -> dict[str, Any]:
    """The launcher's init container that puts kubectl where kubexec.sh runs it."""
    return {
        "name": KUBECTL_DELIVERY_CONTAINER,
        "image": facts.kubectl_delivery_image,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            {"name": "TARGET_DIR", "value": c.KUBECTL_MOUNT_PATH},
            {"name": "NAMESPACE", "value": job.namespace},
        ],
        "resources": {"requests": dict(_DELIVERY_RESOURCES), "limits": dict(_DELIVERY_RESOURCES)},
        "securityContext": copy.deepcopy(_DELIVERY_SECURITY_CONTEXT),
        "volumeMounts": [{"name": c.KUBECTL_VOLUME, "mountPath": c.KUBECTL_MOUNT_PATH}],
    }


def give_launcher_kubectl(
    template: dict[str, Any], job: DefaultedMPIJob, facts: ClusterFacts
) -> None:
    """Run the launcher under the job's own account, with kubectl delivered into it."""
    spec = template["spec"]
    spec["serviceAccountName"] = names.launcher_access_name(job)
    # kubectl reads the account's token from the pod: a template that turned it off would
    # leave the launcher unable to reach any worker.
    spec["automountServiceAccountToken"] = True
    pod_templates.append_to(spec, "initContainers", kubectl_delivery_container(job, facts))
    pod_templates.append_to(spec, "volumes", {"name": c.KUBECTL_VOLUME, "emptyDir": {}})
    pod_templates.append_to(
        pod_templates.main_container(template),
        "volumeMounts",
        {"name": c.KUBECTL_VOLUME, "mountPath": c.KUBECTL_MOUNT_PATH},
    )


KUBEXEC_VOLUME_ITEM: Final = {
    "key": c.KUBEXEC_SCRIPT_NAME,
    "path": c.KUBEXEC_SCRIPT_NAME,
    "mode": 0o555,
}


def mount_kubexec(template: dict[str, Any], job: DefaultedMPIJob) -> None:
    """kubexec.sh at /etc/mpi in a worker too: Open MPI's daemons refuse to start unless the
    remote shell mpirun names exists on their host, though a worker never runs it."""
    pod_templates.append_to(
        template["spec"],
        "volumes",
        {
            "name": c.CONFIG_VOLUME,
            "configMap": {"name": names.config_map_name(job), "items": [dict(KUBEXEC_VOLUME_ITEM)]},
        },
    )
    pod_templates.append_to(
        pod_templates.main_container(template),
        "volumeMounts",
        {"name": c.CONFIG_VOLUME, "mountPath": c.CONFIG_MOUNT_PATH},
    )


def withhold_worker_token(template: dict[str, Any]) -> None:
    """A worker only waits for the launcher's exec: it gets no API token unless its template
    says so."""
    template["spec"].setdefault("automountServiceAccountToken", False)


def keep_worker_alive(container: dict[str, Any]) -> None:
    """A worker without a command sleeps while the launcher execs into it; its args (Flyte
    puts the task's command there) are replaced, as training-operator replaces them."""
    if not container.get("command"):
        container["command"] = list(KEEP_ALIVE_COMMAND)
        container["args"] = list(KEEP_ALIVE_ARGS)


# What the sync keeps current of each kind of the exec access, by plural (the account is
# only ever created).
KEPT_CURRENT: Final = {
    SERVICE_ACCOUNT.plural: (),
    ROLE.plural: ("rules",),
    ROLE_BINDING.plural: ("subjects",),
}
# What of the exec access goes when the job stops running or has no worker to exec into,
# binding first (the account grants nothing on its own).
REVOKED: Final = (ROLE_BINDING.plural, ROLE.plural)


def _access_object(job: DefaultedMPIJob, kind: ChildKind, **fields: Any) -> dict[str, Any]:
    name = names.launcher_access_name(job)
    metadata = child_metadata(job, name, {c.LABEL_APP: job.name})
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata, **fields}


def role_rules(workers: Sequence[str]) -> list[dict[str, Any]]:
    """Get and exec into these worker pods, by name: kubectl exec reads the pod first.

    ``workers`` must not be empty: RBAC reads a rule without names as one for every pod.
    """
    if not workers:
        raise ValueError("a launcher's Role must name at least one worker pod")
    return [
        {
            "apiGroups": [POD.group],
            "resources": [POD.plural],
            "verbs": ["get"],
            "resourceNames": [*workers],
        },
        {
            "apiGroups": [POD.group],
            "resources": [f"{POD.plural}/exec"],
            "verbs": ["create"],
            "resourceNames": [*workers],
        },
    ]


def granted_pods(role: Mapping[str, Any]) -> set[str]:
    """Every pod name a stored Role of ours grants anything on."""
    return {
        str(name)
        for rule in role.get("rules") or []
        if isinstance(rule, Mapping)
        for name in rule.get("resourceNames") or []
    }


def launcher_account(job: DefaultedMPIJob) -> dict[str, Any]:
    """The launcher's own ServiceAccount: it grants nothing without the Role and binding."""
    return _access_object(job, SERVICE_ACCOUNT)


def launcher_role(job: DefaultedMPIJob, workers: Sequence[str]) -> dict[str, Any]:
    return _access_object(job, ROLE, rules=role_rules(workers))


def launcher_role_binding(job: DefaultedMPIJob) -> dict[str, Any]:
    name = names.launcher_access_name(job)
    subject = {"kind": "ServiceAccount", "name": name, "namespace": job.namespace}
    role_ref = {"apiGroup": ROLE.group, "kind": ROLE.kind, "name": name}
    return _access_object(job, ROLE_BINDING, roleRef=role_ref, subjects=[subject])


def exec_access(job: DefaultedMPIJob, workers: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """The launcher's account and, when there are ``workers`` to exec into, its Role and
    binding: in creation order, by plural."""
    access = [(SERVICE_ACCOUNT.plural, launcher_account(job))]
    if workers:
        access += [
            (ROLE.plural, launcher_role(job, workers)),
            (ROLE_BINDING.plural, launcher_role_binding(job)),
        ]
    return access


def role_errors(job: DefaultedMPIJob) -> Iterator[FieldError]:
    """Whether the Role naming every worker fits in what the API server stores."""
    # Each worker's name is listed in both rules, quoted, with a separator.
    size = 2 * sum(len(name) + 3 for name in names.worker_names(job))
    if size > MAX_ROLE_BYTES:
        yield FieldError(
            f"spec.mpiReplicaSpecs[{c.WORKER}].replicas",
            f"{job.replicas(c.WORKER)} workers need a Role of about {size} bytes to let the "
            f"launcher exec into them; the operator keeps it under {MAX_ROLE_BYTES}",
        )


class KubectlExec:
    """The transport of kubeflow.org/v1 jobs (``desired.transports.Transport``), with
    revocation: the launcher's exec rights go when the job stops running."""

    name: Final = c.TRANSPORT_KUBECTL_EXEC
    before_workers: Final = (Child.CONFIG_MAP,)
    # A grant names only pods already proven the job's own.
    after_workers: Final = (Child.EXEC_ACCESS,)

    def set_host_identity(
        self, template: dict[str, Any], job: DefaultedMPIJob, facts: ClusterFacts
    ) -> None:
        """Hosts are pod names and nothing resolves them: the hostname alone will do."""

    def host_name(self, job: DefaultedMPIJob, pod_name: str, facts: ClusterFacts) -> str:
        return pod_name

    def discovered_host(self, job: DefaultedMPIJob, pod_name: str, facts: ClusterFacts) -> str:
        """training-operator's lines name the slots, as horovodrun reads them."""
        return f"{pod_name}:{job.spec.slots_per_worker}"

    def config_scripts(self, job: DefaultedMPIJob) -> dict[str, str]:
        return {c.KUBEXEC_SCRIPT_NAME: kubexec_script(job)}

    def launcher_env(self, implementation: str) -> tuple[tuple[str, str], ...]:
        return LAUNCHER_ENV.get(implementation, ())

    def prepare_worker(self, template: dict[str, Any], job: DefaultedMPIJob) -> None:
        keep_worker_alive(pod_templates.main_container(template))
        withhold_worker_token(template)

    def decorate(
        self, template: dict[str, Any], job: DefaultedMPIJob, role: str, facts: ClusterFacts
    ) -> None:
        if role == c.LAUNCHER:
            give_launcher_kubectl(template, job, facts)
        else:
            mount_kubexec(template, job)

    def name_errors(self, job: DefaultedMPIJob) -> Iterator[FieldError]:
        return invalid_name(job, dns.dns1123_label(job.name), ": its pods' names are host names")

    def spec_errors(self, job: DefaultedMPIJob) -> Iterator[FieldError]:
        """kubectl exec targets the named worker container, which must exist."""
        name = job.spec.main_container
        worker = job.replica_spec(c.WORKER)
        if name is None or worker is None:
            return
        pod_spec = (worker.template or {}).get("spec")
        containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
        found = [
            container.get("name") for container in containers or [] if isinstance(container, dict)
        ]
        if name not in found:
            yield FieldError(
                "spec.mainContainer",
                f"must name a container of the {c.WORKER} template, found {quoted(name)}",
            )

    def operator_mounts(self, job: DefaultedMPIJob, role: str) -> tuple[str, ...]:
        """kubexec.sh in every pod; kubectl in the launcher."""
        if role == c.LAUNCHER:
            return (c.CONFIG_MOUNT_PATH, c.KUBECTL_MOUNT_PATH)
        return (c.CONFIG_MOUNT_PATH,)

    def replaces_account(self, role: str) -> bool:
        """The launcher runs as the account the operator makes for it, bound to its exec rights."""
        return role == c.LAUNCHER

    def errors(self, job: DefaultedMPIJob, facts: ClusterFacts) -> Iterator[FieldError]:
        return role_errors(job)

    def revoked(self, job: DefaultedMPIJob) -> tuple[tuple[str, str], ...]:
        """What of the exec access goes, binding first (the account grants nothing alone)."""
        name = names.launcher_access_name(job)
        return tuple((resource, name) for resource in REVOKED)
