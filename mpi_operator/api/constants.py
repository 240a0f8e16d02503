"""Names and values fixed by the kubeflow.org/v2beta1 and v1 APIs, kubeflow/mpi-operator and
training-operator.

Users' dashboards, selectors and scripts depend on these exact strings.
"""

from typing import Final, NamedTuple

from mpi_operator import __version__

GROUP: Final = "kubeflow.org"
VERSION: Final = "v2beta1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
# training-operator's version, which Flyte writes; served from the same stored objects.
VERSION_V1: Final = "v1"
API_VERSION_V1: Final = f"{GROUP}/{VERSION_V1}"
API_VERSIONS: Final = (API_VERSION, API_VERSION_V1)
KIND: Final = "MPIJob"
PLURAL: Final = "mpijobs"
SINGULAR: Final = "mpijob"
SHORT_NAMES: Final = ("mpij",)


class GroupVersionResource(NamedTuple):
    """Where a kind is served, in the order the Kubernetes client's custom-object calls take
    them (the namespace, when there is one, goes between version and plural)."""

    group: str
    version: str
    plural: str


MPIJOB_RESOURCE: Final = GroupVersionResource(GROUP, VERSION, PLURAL)

LAUNCHER: Final = "Launcher"
WORKER: Final = "Worker"
REPLICA_TYPES: Final = (LAUNCHER, WORKER)

OPERATOR_NAME: Final = "mpi-operator"
CONTROLLER_NAME: Final = "kubeflow.org/mpi-operator"
MULTIKUEUE_CONTROLLER_NAME: Final = "kueue.x-k8s.io/multikueue"
MANAGED_BY_VALUES: Final = (CONTROLLER_NAME, MULTIKUEUE_CONTROLLER_NAME)

LABEL_OPERATOR_NAME: Final = "training.kubeflow.org/operator-name"
LABEL_JOB_NAME: Final = "training.kubeflow.org/job-name"
LABEL_JOB_ROLE: Final = "training.kubeflow.org/job-role"
LABEL_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
LABEL_APP: Final = "app"
ROLE_LAUNCHER: Final = "launcher"
ROLE_WORKER: Final = "worker"

OPENMPI: Final = "OpenMPI"
INTEL_MPI: Final = "Intel"
MPICH: Final = "MPICH"
MPI_IMPLEMENTATIONS: Final = (INTEL_MPI, MPICH, OPENMPI)

CLEAN_POD_POLICY_ALL: Final = "All"
CLEAN_POD_POLICY_RUNNING: Final = "Running"
CLEAN_POD_POLICY_NONE: Final = "None"
CLEAN_POD_POLICIES: Final = (CLEAN_POD_POLICY_ALL, CLEAN_POD_POLICY_NONE, CLEAN_POD_POLICY_RUNNING)

RESTART_POLICY_NEVER: Final = "Never"
RESTART_POLICY_ON_FAILURE: Final = "OnFailure"
RESTART_POLICIES: Final = (RESTART_POLICY_NEVER, RESTART_POLICY_ON_FAILURE)
RESTART_POLICY_ALWAYS: Final = "Always"
RESTART_POLICY_EXIT_CODE: Final = "ExitCode"
# What a request through kubeflow.org/v1 may set (api/rules.py).
V1_RESTART_POLICIES: Final = (
    RESTART_POLICY_ALWAYS,
    RESTART_POLICY_EXIT_CODE,
    RESTART_POLICY_NEVER,
    RESTART_POLICY_ON_FAILURE,
)

# How the launcher starts processes on the workers. SSH is kubeflow/mpi-operator's (v2beta1);
# KubectlExec is training-operator's (v1): kubectl exec, no sshd, workers kept alive by sleep.
# A job keeps the transport of the API version that created it (the CRD defaults it per version).
TRANSPORT_SSH: Final = "SSH"
TRANSPORT_KUBECTL_EXEC: Final = "KubectlExec"
TRANSPORTS: Final = (TRANSPORT_KUBECTL_EXEC, TRANSPORT_SSH)
DEFAULT_TRANSPORT: Final = {VERSION: TRANSPORT_SSH, VERSION_V1: TRANSPORT_KUBECTL_EXEC}

LAUNCHER_CREATION_AT_STARTUP: Final = "AtStartup"
LAUNCHER_CREATION_WAIT_FOR_WORKERS_READY: Final = "WaitForWorkersReady"
LAUNCHER_CREATION_POLICIES: Final = (
    LAUNCHER_CREATION_AT_STARTUP,
    LAUNCHER_CREATION_WAIT_FOR_WORKERS_READY,
)

DEFAULT_SSH_AUTH_MOUNT_PATH: Final = "/root/.ssh"
DEFAULT_SLOTS_PER_WORKER: Final = 1
CONFIG_MOUNT_PATH: Final = "/etc/mpi"
# The operator's own volumes; a template may not name a volume like them.
SSH_AUTH_VOLUME: Final = "ssh-auth"
CONFIG_VOLUME: Final = "mpi-job-config"
KUBECTL_VOLUME: Final = "mpi-job-kubectl"
RESERVED_VOLUMES: Final = (SSH_AUTH_VOLUME, CONFIG_VOLUME, KUBECTL_VOLUME)
HOSTFILE_NAME: Final = "hostfile"
DISCOVER_HOSTS_SCRIPT_NAME: Final = "discover_hosts.sh"
# KubectlExec: mpirun's remote shell, and where the launcher's kubectl is copied to.
KUBEXEC_SCRIPT_NAME: Final = "kubexec.sh"
KUBECTL_MOUNT_PATH: Final = "/opt/kube"
# The operator's own image of this version, which carries kubectl and, run with no arguments
# and $TARGET_DIR set, copies it there (`mpi-operator deliver-kubectl`): an install that has the
# operator has its kubectl-delivery image. The install manifests pass the operator's image
# exactly as they run it (by digest in a release). Training-operator's kubeflow/kubectl-delivery
# images work the same way.
DEFAULT_KUBECTL_DELIVERY_IMAGE: Final = f"docker.io/library/mpi-operator:{__version__}"

CONDITION_CREATED: Final = "Created"
CONDITION_RUNNING: Final = "Running"
CONDITION_RESTARTING: Final = "Restarting"
CONDITION_SUCCEEDED: Final = "Succeeded"
CONDITION_SUSPENDED: Final = "Suspended"
CONDITION_FAILED: Final = "Failed"
# The conditions that tell where a job is in its life, in the order it reaches them.
JOB_STATE_CONDITIONS: Final = (
    CONDITION_CREATED,
    CONDITION_RUNNING,
    CONDITION_RESTARTING,
    CONDITION_SUSPENDED,
    CONDITION_SUCCEEDED,
    CONDITION_FAILED,
)
# Ours, not upstream's: whether the gang scheduler has placed the job's pod group.
CONDITION_GANG_SCHEDULED: Final = "GangScheduled"
# Ours: whether a domain of a job's required network topology has room for its workers, from
# the cluster's nodes (controller.domain_room), while the job waits for one.
CONDITION_TOPOLOGY_FITS: Final = "TopologyFits"
REASON_NO_DOMAIN_FITS: Final = "NoDomainFits"
REASON_DOMAIN_FITS: Final = "DomainFits"
REASON_WORKERS_PLACED: Final = "WorkersPlaced"

# schedulingPolicy.topology.mode: the gang waits for one domain, or prefers one.
TOPOLOGY_REQUIRED: Final = "Required"
TOPOLOGY_PREFERRED: Final = "Preferred"
TOPOLOGY_MODES: Final = (TOPOLOGY_REQUIRED, TOPOLOGY_PREFERRED)
# Kueue's Topology Aware Scheduling reads these from the MPIJob's pod templates.
KUEUE_REQUIRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-preferred-topology"
