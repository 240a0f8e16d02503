"""The job's SSH key pair and the Secret that carries it to the launcher and workers."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Final

from mpi_operator.api import constants as c
from mpi_operator.api import names
from mpi_operator.api.defaults import DefaultedMPIJob
from mpi_operator.api.meta import child_metadata
from mpi_operator.desired.pod_templates import SSH_PRIVATE_KEY, SSH_PUBLIC_KEY

SSH_AUTH_SECRET_TYPE: Final = "kubernetes.io/ssh-auth"


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
