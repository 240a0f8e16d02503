"""SSH, kubeflow/mpi-operator's transport: the launcher's mpirun reaches the workers over ssh,
by the host names the job's headless Service gives every pod, with a key pair the job's Secret
carries to the launcher and the workers, whose containers run sshd.
"""

from __future__ import annotations

import base64
import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.cluster import ClusterFacts
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import child_metadata
from mpi_operator.api.transport_checks import invalid_name
from mpi_operator.desired import pod_templates
from mpi_operator.desired.kinds import Child
from mpi_operator.desired.pod_templates import HOSTFILE_PATH
from mpi_operator.field_errors import FieldError, quoted
from mpi_operator.pod_rules import dns
from mpi_operator.pod_rules.template import MAX_DNS_SEARCH_CHARACTERS, MAX_DNS_SEARCHES, searches_of

SSH_PRIVATE_KEY: Final = "ssh-privatekey"
SSH_PUBLIC_KEY: Final = "ssh-publickey"
SSH_AUTH_SECRET_TYPE: Final = "kubernetes.io/ssh-auth"
# The files of a secret volume are root's. ssh refuses a private key of its own user that the
# group or others may read, and sshd (StrictModes) an authorized_keys they may write. At
# /root/.ssh root uses them: 0600. At any other path a non-root user reads them through the
# pod's fsGroup, which the kubelet gives the files (0440), or without one as any other user
# (0444); ssh accepts a key that another user owns, and no one may write them.
ROOT_SSH_KEY_MODE: Final = 0o600
FS_GROUP_SSH_KEY_MODE: Final = 0o440
NO_FS_GROUP_SSH_KEY_MODE: Final = 0o444
# OpenSSH's default file names, so neither ssh nor sshd needs configuration.
SSH_VOLUME_ITEMS: Final = (
    {"key": SSH_PRIVATE_KEY, "path": "id_rsa"},
    {"key": SSH_PUBLIC_KEY, "path": "id_rsa.pub"},
    {"key": SSH_PUBLIC_KEY, "path": "authorized_keys"},
)
HOST_NETWORK_DNS_POLICY: Final = "ClusterFirstWithHostNet"
# Upstream always appends cluster.local; a cluster configured with another domain gets its own.
DEFAULT_CLUSTER_DOMAIN: Final = "cluster.local"
DEFAULT_WORKER_COMMAND: Final = ("/usr/sbin/sshd", "-De")
# Workers may not be resolvable yet when mpirun starts; ssh retries instead of failing.
SSH_CONNECT_RETRIES: Final = "-o ConnectionAttempts=10"
# OpenMPI: Open MPI 4 (ORTE) reads the OMPI_MCA_ names; Open MPI 5 launches through PRRTE,
# which reads only PRTE_MCA_ names, so each setting is given under both.
LAUNCHER_ENV: Final[Mapping[str, tuple[tuple[str, str], ...]]] = {
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


@dataclass(frozen=True)
class SSHKeyPair:
    """A private key as a SEC1 PEM block and its public key as an authorized_keys line."""

    private_key_pem: str
    public_key_openssh: str


def generate_ssh_key_pair() -> SSHKeyPair:
    """A fresh ECDSA P-521 key pair, in the formats upstream's images expect."""
    # Imported on the first new job's sync, not at start: a restart over existing jobs never
    # makes a key, and the import is a tenth of the operator's start (docs/performance.md).
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private_key = ec.generate_private_key(ec.SECP521R1())
    private_pem = private_key.private_bytes(
        encoding=serialization.Encoding.PEM,
        # TraditionalOpenSSL for an EC key is SEC1: the "EC PRIVATE KEY" PEM block.
        format=serialization.PrivateFormat.TraditionalOpenSSL,
        encryption_algorithm=serialization.NoEncryption(),
    )
    public_line = private_key.public_key().public_bytes(
        encoding=serialization.Encoding.OpenSSH,
        format=serialization.PublicFormat.OpenSSH,
    )
    # authorized_keys lines end with a newline; the file is mounted as is.
    return SSHKeyPair(private_pem.decode("ascii"), public_line.decode("ascii") + "\n")


def _base64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def new_ssh_secret(job: DefaultedMPIJob, key_pair: SSHKeyPair) -> dict[str, Any]:
    """The Secret in the form the API server stores and returns, so reads compare equal."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": child_metadata(job, names.ssh_secret_name(job), {c.LABEL_APP: job.name}),
        "type": SSH_AUTH_SECRET_TYPE,
        "data": {
            SSH_PRIVATE_KEY: _base64(key_pair.private_key_pem),
            SSH_PUBLIC_KEY: _base64(key_pair.public_key_openssh),
        },
    }


def service_selector(job: DefaultedMPIJob) -> dict[str, str]:
    """Both roles: the launcher needs a DNS name too, for Intel MPI and MPICH workers."""
    return {c.LABEL_OPERATOR_NAME: c.OPERATOR_NAME, c.LABEL_JOB_NAME: job.name}


def new_service(job: DefaultedMPIJob) -> dict[str, Any]:
    """The headless Service named after the job, matching the pods' subdomain."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": child_metadata(job, names.service_name(job), {c.LABEL_APP: job.name}),
        "spec": {
            "clusterIP": "None",
            "selector": service_selector(job),
            # A launcher that is also a worker lists itself in the hostfile, so its name
            # must resolve before it can ever become Ready.
            "publishNotReadyAddresses": pod_templates.launcher_runs_as_worker(job),
        },
    }


def dns_search_domain(job: DefaultedMPIJob, facts: ClusterFacts) -> str:
    """The job's Service domain, in which every pod of the job has its short hostname."""
    domain = facts.cluster_domain or DEFAULT_CLUSTER_DOMAIN
    return f"{names.service_name(job)}.{job.namespace}.svc.{domain}"


def dns_search_errors(job: DefaultedMPIJob, facts: ClusterFacts) -> Iterator[FieldError]:
    """Whether each role's search list, once the job's domain is appended, is one the API
    server takes (every pod of the job gets the domain, the launcher as well as workers)."""
    ours = dns_search_domain(job, facts)
    for role in (c.LAUNCHER, c.WORKER):
        if job.replicas(role) == 0:
            continue
        path = f"spec.mpiReplicaSpecs[{role}].template.spec.dnsConfig.searches"
        for problem in dns.dns1123_subdomain(ours):
            yield FieldError(path, f"the operator adds the search domain {quoted(ours)}: {problem}")
        template = pod_templates.replica_spec(job, role).template or {}
        pod_spec = template.get("spec")
        searches = [*searches_of(pod_spec if isinstance(pod_spec, dict) else {}), ours]
        if len(searches) > MAX_DNS_SEARCHES:
            yield FieldError(
                path,
                f"must have at most {MAX_DNS_SEARCHES - 1} entries: the operator adds "
                f"{quoted(ours)}",
            )
        characters = len(" ".join(searches))
        if characters > MAX_DNS_SEARCH_CHARACTERS:
            yield FieldError(
                path,
                f"must have at most {MAX_DNS_SEARCH_CHARACTERS} characters with the operator's "
                f"{quoted(ours)}, found {characters}",
            )


def mount_ssh_auth(template: dict[str, Any], job: DefaultedMPIJob) -> None:
    """Mount the job's SSH key pair in container 0 at spec.sshAuthMountPath."""
    mount_path = job.spec.ssh_auth_mount_path
    secret: dict[str, Any] = {
        "secretName": names.ssh_secret_name(job),
        "items": [dict(item) for item in SSH_VOLUME_ITEMS],
        "defaultMode": ssh_key_mode(mount_path, template["spec"]),
    }
    pod_templates.append_to(
        template["spec"], "volumes", {"name": c.SSH_AUTH_VOLUME, "secret": secret}
    )
    pod_templates.append_to(
        pod_templates.main_container(template),
        "volumeMounts",
        {"name": c.SSH_AUTH_VOLUME, "mountPath": mount_path},
    )


def ssh_key_mode(mount_path: str | None, pod_spec: dict[str, Any]) -> int:
    """The mode of the SSH key files mounted at ``mount_path`` in a pod of ``pod_spec``."""
    if mount_path == c.DEFAULT_SSH_AUTH_MOUNT_PATH:
        return ROOT_SSH_KEY_MODE
    security_context = pod_spec.get("securityContext")
    if isinstance(security_context, dict) and security_context.get("fsGroup") is not None:
        return FS_GROUP_SSH_KEY_MODE
    return NO_FS_GROUP_SSH_KEY_MODE


class SSH:
    """The transport of kubeflow.org/v2beta1 jobs (``desired.transports.Transport``)."""

    name: Final = c.TRANSPORT_SSH
    before_workers: Final = (Child.SERVICE, Child.CONFIG_MAP, Child.SSH_SECRET)
    after_workers: Final = ()

    def set_host_identity(
        self, template: dict[str, Any], job: DefaultedMPIJob, facts: ClusterFacts
    ) -> None:
        """Subdomain and DNS search path that make the pod resolvable through the job's
        Service, and let it resolve every pod of the job (itself included) by short name."""
        spec = template["spec"]
        spec["subdomain"] = names.service_name(job)
        if spec.get("hostNetwork") is True:
            # Without it a host-network pod resolves with the node's resolv.conf and never
            # finds its peers' Service names.
            spec["dnsPolicy"] = HOST_NETWORK_DNS_POLICY
        dns_config = spec.get("dnsConfig")
        if not isinstance(dns_config, dict):
            dns_config = spec["dnsConfig"] = {}
        searches = [*(dns_config.get("searches") or []), dns_search_domain(job, facts)]
        dns_config["searches"] = searches

    def host_name(self, job: DefaultedMPIJob, pod_name: str, facts: ClusterFacts) -> str:
        """The pod's name through the headless Service. Without a configured cluster domain
        the name stops at ``svc`` and relies on the pods' DNS search path, as upstream does."""
        fqdn = f"{pod_name}.{names.service_name(job)}.{job.namespace}.svc"
        return f"{fqdn}.{facts.cluster_domain}" if facts.cluster_domain else fqdn

    def discovered_host(self, job: DefaultedMPIJob, pod_name: str, facts: ClusterFacts) -> str:
        return self.host_name(job, pod_name, facts)

    def config_scripts(self, job: DefaultedMPIJob) -> dict[str, str]:
        return {}

    def launcher_env(self, implementation: str) -> tuple[tuple[str, str], ...]:
        return LAUNCHER_ENV.get(implementation, ())

    def prepare_worker(self, template: dict[str, Any], job: DefaultedMPIJob) -> None:
        """mpirun reaches workers over ssh; a container that chose its own command or args
        (an entrypoint that starts sshd itself, say) keeps it."""
        container = pod_templates.main_container(template)
        if not container.get("command") and not container.get("args"):
            container["command"] = list(DEFAULT_WORKER_COMMAND)

    def decorate(
        self, template: dict[str, Any], job: DefaultedMPIJob, role: str, facts: ClusterFacts
    ) -> None:
        mount_ssh_auth(template, job)

    def name_errors(self, job: DefaultedMPIJob) -> Iterator[FieldError]:
        # The job's Service is named after it, so the name itself is a DNS-1035 label.
        return invalid_name(job, dns.dns1035_label(job.name), " for the name of the job's Service")

    def spec_errors(self, job: DefaultedMPIJob) -> Iterator[FieldError]:
        mount_path = job.spec.ssh_auth_mount_path
        if not mount_path:
            yield FieldError("spec.sshAuthMountPath", "must have a mount path for SSH credentials")
        elif posixpath.normpath(mount_path) == posixpath.normpath(c.CONFIG_MOUNT_PATH):
            yield FieldError(
                "spec.sshAuthMountPath",
                f"{quoted(mount_path)} is reserved: the launcher mounts the hostfile there",
            )

    def operator_mounts(self, job: DefaultedMPIJob, role: str) -> tuple[str, ...]:
        """The key pair in every pod; the hostfile in the launcher."""
        key_pair = job.spec.ssh_auth_mount_path or c.DEFAULT_SSH_AUTH_MOUNT_PATH
        return (key_pair, c.CONFIG_MOUNT_PATH) if role == c.LAUNCHER else (key_pair,)

    def replaces_account(self, role: str) -> bool:
        return False

    def errors(self, job: DefaultedMPIJob, facts: ClusterFacts) -> Iterator[FieldError]:
        return dns_search_errors(job, facts)
