"""SSH keys: a real ECDSA P-521 pair, carried by a kubernetes.io/ssh-auth Secret."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mpi_operator.desired.transports.ssh import SSHKeyPair, generate_ssh_key_pair, new_ssh_secret
from mpi_operator.testing.wrappers import MPIJobWrapper, child_labels, owner_references


@pytest.fixture(scope="module")
def key_pair() -> SSHKeyPair:
    return generate_ssh_key_pair()


def test_private_key_is_a_sec1_pem_block_on_p521(key_pair: SSHKeyPair) -> None:
    pem = key_pair.private_key_pem
    assert pem.startswith("-----BEGIN EC PRIVATE KEY-----\n")
    assert pem.endswith("-----END EC PRIVATE KEY-----\n")
    private_key = serialization.load_pem_private_key(pem.encode(), password=None)
    assert isinstance(private_key, ec.EllipticCurvePrivateKey)
    assert private_key.curve.name == "secp521r1"


def test_public_key_is_an_authorized_keys_line_of_the_private_key(key_pair: SSHKeyPair) -> None:
    line = key_pair.public_key_openssh
    assert line.startswith("ecdsa-sha2-nistp521 ")
    assert line.endswith("\n")
    assert line.count("\n") == 1
    public_key = serialization.load_ssh_public_key(line.strip().encode())
    private_key = serialization.load_pem_private_key(key_pair.private_key_pem.encode(), None)
    assert isinstance(public_key, ec.EllipticCurvePublicKey)
    assert isinstance(private_key, ec.EllipticCurvePrivateKey)
    assert public_key.public_numbers() == private_key.public_key().public_numbers()


def test_every_generated_pair_is_new(key_pair: SSHKeyPair) -> None:
    assert generate_ssh_key_pair().private_key_pem != key_pair.private_key_pem


def test_key_pair_is_immutable(key_pair: SSHKeyPair) -> None:
    with pytest.raises(AttributeError):
        key_pair.private_key_pem = "other"  # type: ignore[misc]


FIXED = SSHKeyPair(
    private_key_pem="-----BEGIN EC PRIVATE KEY-----\nZml4ZWQ=\n-----END EC PRIVATE KEY-----\n",
    public_key_openssh="ecdsa-sha2-nistp521 AAAAfixed\n",
)


def test_secret_stores_the_pair_base64_encoded_as_the_api_does() -> None:
    secret = new_ssh_secret(MPIJobWrapper("pi", "ns").job(), FIXED)
    assert "stringData" not in secret
    assert secret == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "pi-ssh",
            "namespace": "ns",
            "labels": child_labels("pi"),
            "ownerReferences": owner_references("pi"),
        },
        "type": "kubernetes.io/ssh-auth",
        "data": {
            "ssh-privatekey": base64.b64encode(FIXED.private_key_pem.encode()).decode(),
            "ssh-publickey": base64.b64encode(FIXED.public_key_openssh.encode()).decode(),
        },
    }


def test_secret_of_a_generated_pair_decodes_to_a_usable_key(key_pair: SSHKeyPair) -> None:
    data = new_ssh_secret(MPIJobWrapper("pi", "ns").job(), key_pair)["data"]
    private_pem = base64.b64decode(data["ssh-privatekey"], validate=True)
    public_line = base64.b64decode(data["ssh-publickey"], validate=True)
    private_key = serialization.load_pem_private_key(private_pem, password=None)
    assert isinstance(private_key, ec.EllipticCurvePrivateKey)
    assert public_line.decode() == key_pair.public_key_openssh
