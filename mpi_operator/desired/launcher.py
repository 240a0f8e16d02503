"""The launcher: a batch/v1 Job whose single pod runs mpirun against the hostfile."""

from __future__ import annotations

from typing import Any, Final

from gang import GangScheduler
from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import child_metadata
from mpi_operator.desired import kubectl_exec, pod_templates

HOSTFILE_PATH: Final = f"{c.CONFIG_MOUNT_PATH}/{c.HOSTFILE_NAME}"
# Workers may not be resolvable yet when mpirun starts; ssh retries instead of failing.
SSH_CONNECT_RETRIES: Final = "-o ConnectionAttempts=10"
# Replacing a pod only once it has fully terminated keeps two launchers from running at
# once (kubernetes/kubernetes#115844).
POD_REPLACEMENT_POLICY: Final = "Failed"

# OpenMPI: Open MPI 4 (ORTE) reads the OMPI_MCA_ names; Open MPI 5 launches through PRRTE,
# which reads only PRTE_MCA_ names, so each setting is given under both.
_IMPLEMENTATION_ENV: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    c.OPENMPI: (
        ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
        ("OMPI_MCA_orte_default_hostfile", HOSTFILE_PATH),
        ("OMPI_MCA_plm_rsh_args", SSH_CONNECT_RETRIES),
        ("PRTE_MCA_prte_keep_fqdn_hostnames", "true"),
        ("PRTE_MCA_prte_default_hostfile", HOSTFILE_PATH),
        ("PRTE_MCA_plm_ssh_args", SSH_CONNECT_RETRIES),
    ),
    c.INTEL_MPI: (
        ("I_MPI_HYDRA_HOST_FILE", HOSTFILE_PATH),
        ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", SSH_CONNECT_RETRIES),
    ),
    # Hydra's ssh launcher reads HYDRA_LAUNCHER_EXTRA_ARGS. Upstream sets HYDRA_LAUNCH_EXTRA_ARGS,
    # which nothing reads; it is kept for images that may look for it.
    c.MPICH: (
        ("HYDRA_HOST_FILE", HOSTFILE_PATH),
        ("HYDRA_LAUNCH_EXTRA_ARGS", SSH_CONNECT_RETRIES),
        ("HYDRA_LAUNCHER_EXTRA_ARGS", SSH_CONNECT_RETRIES),
    ),
}
# The same over kubectl exec: kubexec.sh is the remote shell. Workers have no kubectl, so
# Open MPI must start every daemon from the launcher, never through a worker (tree spawn).
_KUBECTL_EXEC_ENV: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    c.OPENMPI: (
        ("OMPI_MCA_plm_rsh_agent", kubectl_exec.KUBEXEC_PATH),
        ("OMPI_MCA_orte_default_hostfile", HOSTFILE_PATH),
        ("OMPI_MCA_plm_rsh_no_tree_spawn", "true"),
        ("PRTE_MCA_plm_ssh_agent", kubectl_exec.KUBEXEC_PATH),
        ("PRTE_MCA_prte_default_hostfile", HOSTFILE_PATH),
        ("PRTE_MCA_plm_ssh_no_tree_spawn", "true"),
    ),
    c.INTEL_MPI: (
        ("I_MPI_HYDRA_HOST_FILE", HOSTFILE_PATH),
        ("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
        ("I_MPI_HYDRA_BOOTSTRAP_EXEC", kubectl_exec.KUBEXEC_PATH),
    ),
    c.MPICH: (
        ("HYDRA_HOST_FILE", HOSTFILE_PATH),
        ("HYDRA_LAUNCHER", "rsh"),
        ("HYDRA_LAUNCHER_EXEC", kubectl_exec.KUBEXEC_PATH),
    ),
}
# MPICH has no per-host slot variable: it reads the slots from the hostfile only.
_SLOTS_ENV: Final[dict[str, tuple[str, ...]]] = {
    c.OPENMPI: ("OMPI_MCA_orte_set_default_slots", "PRTE_MCA_prte_set_default_slots"),
    c.INTEL_MPI: ("I_MPI_PERHOST",),
}
# Blanked so a launcher that only runs mpirun cannot grab GPUs through the NVIDIA runtime.
# Sent without a value, as upstream sends them: the container sees empty strings.
_NVIDIA_ENV: Final = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")

_CONFIG_VOLUME_ITEMS: Final = (
    {"key": c.HOSTFILE_NAME, "path": c.HOSTFILE_NAME, "mode": 0o444},
    {"key": c.DISCOVER_HOSTS_SCRIPT_NAME, "path": c.DISCOVER_HOSTS_SCRIPT_NAME, "mode": 0o555},
)


def template_sets_restart_policy(job: DefaultedMPIJob) -> bool:
    """Whether the launcher template's restartPolicy is about to be overridden.

    Upstream warns with a SetPodTemplateRestartPolicy event each time it renders the
    template; the caller emits it, since rendering is pure.
    """
    template = pod_templates.replica_spec(job, c.LAUNCHER).template or {}
    pod_spec = template.get("spec")
    return isinstance(pod_spec, dict) and bool(pod_spec.get("restartPolicy"))


def launcher_env(job: DefaultedMPIJob) -> list[dict[str, str]]:
    """Variables appended to container 0: role, MPI implementation, slots, GPU blanks."""
    implementation = job.spec.mpi_implementation or c.OPENMPI
    env = [{"name": pod_templates.ROLE_ENV, "value": c.ROLE_LAUNCHER}]
    transport_env = _IMPLEMENTATION_ENV if job.uses_ssh else _KUBECTL_EXEC_ENV
    env += [{"name": k, "value": v} for k, v in transport_env.get(implementation, ())]
    slots = str(job.spec.slots_per_worker)
    env += [{"name": name, "value": slots} for name in _SLOTS_ENV.get(implementation, ())]
    if not pod_templates.launcher_runs_as_worker(job):
        env += [{"name": name} for name in _NVIDIA_ENV]
    return env


def launcher_pod_template(
    job: DefaultedMPIJob, facts: ClusterFacts, gang: GangScheduler | None
) -> dict[str, Any]:
    """The launcher Job's pod template."""
    spec = pod_templates.replica_spec(job, c.LAUNCHER)
    # Index 0 belongs to the launcher so workers' indexes stay unique (Kueue TAS).
    index = 0 if pod_templates.launcher_runs_as_worker(job) else None
    template = pod_templates.role_template(
        job, spec, c.ROLE_LAUNCHER, names.launcher_name(job), index, facts
    )
    pod_templates.set_restart_policy(template, spec, in_job=True)
    container = pod_templates.main_container(template)
    pod_templates.keep_last_words(container)
    pod_templates.append_to(container, "env", *launcher_env(job))
    items = [dict(item) for item in _CONFIG_VOLUME_ITEMS]
    if job.uses_ssh:
        pod_templates.mount_ssh_auth(template, job)
    else:
        kubectl_exec.give_launcher_kubectl(template, job, facts)
        items.append(dict(kubectl_exec.KUBEXEC_VOLUME_ITEM))
    pod_templates.append_to(
        template["spec"],
        "volumes",
        {
            "name": c.CONFIG_VOLUME,
            "configMap": {"name": names.config_map_name(job), "items": items},
        },
    )
    pod_templates.append_to(
        container, "volumeMounts", {"name": c.CONFIG_VOLUME, "mountPath": c.CONFIG_MOUNT_PATH}
    )
    return pod_templates.owned_pod_template(template, job, gang)


def new_launcher_job(
    job: DefaultedMPIJob, facts: ClusterFacts, gang: GangScheduler | None
) -> dict[str, Any]:
    """The launcher Job; suspended when the MPIJob is, so no launcher pod starts."""
    run_policy = job.spec.run_policy
    spec: dict[str, Any] = {}
    # The Job applies the deadline and the retries to the launcher on our behalf. The TTL waits
    # for the MPIJob's finish to be recorded (controller/ttl.py): a launcher Job that the TTL
    # controller removed before a sync saw it finish would be created again, and the job run
    # twice.
    if run_policy.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = run_policy.active_deadline_seconds
    if run_policy.backoff_limit is not None:
        spec["backoffLimit"] = run_policy.backoff_limit
    spec["template"] = launcher_pod_template(job, facts, gang)
    if pod_templates.is_suspended(job):
        spec["suspend"] = True
    spec["podReplacementPolicy"] = POD_REPLACEMENT_POLICY
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": child_metadata(job, names.launcher_name(job), {c.LABEL_APP: job.name}),
        "spec": spec,
    }
