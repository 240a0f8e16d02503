"""The launcher: a batch/v1 Job whose single pod runs mpirun against the hostfile."""

from __future__ import annotations

from typing import Any, Final

from gang import GangScheduler
from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import child_metadata
from mpi_operator.desired import pod_templates
from mpi_operator.desired.transports import transport_of

# Replacing a pod only once it has fully terminated keeps two launchers from running at
# once (kubernetes/kubernetes#115844).
POD_REPLACEMENT_POLICY: Final = "Failed"

# MPICH has no per-host slot variable: it reads the slots from the hostfile only.
_SLOTS_ENV: Final[dict[str, tuple[str, ...]]] = {
    c.OPENMPI: ("OMPI_MCA_orte_set_default_slots", "PRTE_MCA_prte_set_default_slots"),
    c.INTEL_MPI: ("I_MPI_PERHOST",),
}
# Blanked so a launcher that only runs mpirun cannot grab GPUs through the NVIDIA runtime.
# Sent without a value, as upstream sends them: the container sees empty strings.
_NVIDIA_ENV: Final = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")

EXECUTABLE_MODE: Final = 0o555
_CONFIG_VOLUME_ITEMS: Final = (
    {"key": c.HOSTFILE_NAME, "path": c.HOSTFILE_NAME, "mode": 0o444},
    {
        "key": c.DISCOVER_HOSTS_SCRIPT_NAME,
        "path": c.DISCOVER_HOSTS_SCRIPT_NAME,
        "mode": EXECUTABLE_MODE,
    },
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
    """Variables appended to container 0: role, the transport's for the MPI implementation,
    slots, GPU blanks."""
    implementation = job.spec.mpi_implementation or c.OPENMPI
    env = [{"name": pod_templates.ROLE_ENV, "value": c.ROLE_LAUNCHER}]
    transport_env = transport_of(job).launcher_env(implementation)
    env += [{"name": k, "value": v} for k, v in transport_env]
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
        job, spec, c.ROLE_LAUNCHER, names.launcher_name(job), index
    )
    transport = transport_of(job)
    transport.set_host_identity(template, job, facts)
    pod_templates.set_restart_policy(template, spec, in_job=True)
    container = pod_templates.main_container(template)
    pod_templates.keep_last_words(container)
    pod_templates.append_to(container, "env", *launcher_env(job))
    items = [dict(item) for item in _CONFIG_VOLUME_ITEMS]
    transport.decorate(template, job, c.LAUNCHER, facts)
    items += [
        {"key": key, "path": key, "mode": EXECUTABLE_MODE} for key in transport.config_scripts(job)
    ]
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
