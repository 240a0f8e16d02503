"""Run as the shipped ServiceAccount: its roles, and nothing an admin kubeconfig adds.

:func:`service_account_kubeconfig` applies ``deploy/base``'s ServiceAccount, ClusterRole and
ClusterRoleBinding, its leader-election Role and RoleBinding in the operator's lock namespace,
and, for a gang scheduler, the rules its ``deploy/components/gang-*`` component adds (read from
the files, so a test exercises exactly what ships), then writes a kubeconfig that authenticates
with a bound token for that ServiceAccount. A client or an operator process given that
kubeconfig can do what those roles allow and is refused the rest, as in a real install; an admin
kubeconfig would hide a missing rule until production.

The bindings are named after the ServiceAccount's namespace, because an object shared by two
tests would end up pointing at one test's ServiceAccount only; remove them with
:func:`delete_service_account_binding`. A component's rules are a ClusterRole of their own
(``mpi-operator-gang-volcano``, say) where the install patches them into the operator's: the same
permissions, and a cluster's tests with and without gang scheduling do not rewrite each other's
role. :func:`install_mpijob_crd` installs the project's CRD, without which there are no MPIJobs
to list. :func:`bound_service_account` does all of that for one test and waits until the
bindings hold. :func:`granted_permissions` is what the shipped roles grant,
:func:`allowed` the API server's answer for a client's own identity, and
:func:`audited_requests` what one identity asked for, read from an API server's audit log.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from tests.tools import gang_component_for, gang_component_rules, gang_components, rule_permissions

from .clusters import wait_until

REPO = Path(__file__).resolve().parents[2]
DEPLOY_BASE = REPO / "deploy" / "base"
CRD_FILE = REPO / "crds" / "kubeflow.org_mpijobs.yaml"
MPIJOB_CRD = "mpijobs.kubeflow.org"
# The API server's minimum is 600 s; an hour outlasts any test session's use of one kubeconfig.
TOKEN_SECONDS = 3600

Manifest = dict[str, Any]
Permission = tuple[str, str, str]
"""(API group, resource or resource/subresource, verb), as a role's rules grant them."""


LEASE_ROLE_FILE = "leader-election-role.yaml"


def load_manifest(name: str, kind: str | None = None) -> Manifest:
    """One object from ``deploy/base/<name>``: the only one, or the one of ``kind``."""
    documents = [d for d in yaml.safe_load_all((DEPLOY_BASE / name).read_text()) if d]
    found = [d for d in documents if isinstance(d, dict) and kind in (None, d.get("kind"))]
    if len(found) != 1:
        raise ValueError(f"{DEPLOY_BASE / name}: expected one {kind or 'object'}")
    return found[0]


def granted_permissions(gang_scheduling: str = "") -> set[Permission]:
    """Every permission the shipped install grants with that ``--gang-scheduling``: its
    ClusterRole, its Lease Role (in the lock namespace only) and the scheduler's component."""
    granted = rule_permissions(load_manifest("cluster-role.yaml")["rules"])
    granted |= rule_permissions(load_manifest(LEASE_ROLE_FILE, "Role")["rules"])
    component = gang_component_for(gang_scheduling)
    if component is not None:
        granted |= rule_permissions(gang_component_rules(component))
    return granted


def allowed(api: k8s.ApiClient, group: str, resource: str, verb: str, namespace: str) -> bool:
    """The API server's answer to "may I?" for the client's own identity."""
    plural, _, subresource = resource.partition("/")
    review = k8s.V1SelfSubjectAccessReview(
        spec=k8s.V1SelfSubjectAccessReviewSpec(
            resource_attributes=k8s.V1ResourceAttributes(
                group=group,
                resource=plural,
                subresource=subresource or None,
                verb=verb,
                namespace=namespace,
            )
        )
    )
    answer = k8s.AuthorizationV1Api(api).create_self_subject_access_review(review)
    return bool(answer.status and answer.status.allowed)


@dataclass
class AuditedRequests:
    """What one identity asked an API server for, by permission, as its audit log says."""

    allowed: set[Permission] = field(default_factory=set)
    refused: set[Permission] = field(default_factory=set)
    # Requests the log says nothing of the authorizer's decision for.
    undecided: set[Permission] = field(default_factory=set)


def audit_log_size(log: Path) -> int:
    """Where the audit log ends now: the start of what is logged from here on."""
    return log.stat().st_size if log.exists() else 0


def audited_requests(log: Path, offset: int, username: str) -> AuditedRequests:
    """The requests of ``username`` in ``log`` from byte ``offset`` on.

    The authorizer's decision is the audit event's ``authorization.k8s.io/decision``
    annotation, not the response code: a request it allowed may still be refused later
    (admission, a terminating namespace), and still needed the permission.
    Requests for non-resource URLs (discovery, ``/version``) are no role's business here."""
    found = AuditedRequests()
    with log.open("rb") as audit:
        audit.seek(offset)
        lines = audit.read().splitlines()
    for line in lines:
        if not line.strip():
            continue
        event = json.loads(line)
        reference = event.get("objectRef") or {}
        if (event.get("user") or {}).get("username") != username or "resource" not in reference:
            continue
        resource = reference["resource"]
        if reference.get("subresource"):
            resource += "/" + reference["subresource"]
        permission = (reference.get("apiGroup", ""), resource, event["verb"])
        decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
        if decision == "allow":
            found.allowed.add(permission)
        elif decision == "forbid":
            found.refused.add(permission)
        else:
            found.undecided.add(permission)
    return found


def binding_name(namespace: str, role: str | None = None) -> str:
    """The harness's binding of ``role`` (the shipped ClusterRole's name when None) for the
    ServiceAccount in ``namespace``."""
    if role is None:
        role = load_manifest("cluster-role-binding.yaml")["metadata"]["name"]
    return f"{role}-{namespace}"


def gang_role_name(component: Path) -> str:
    """The harness's ClusterRole of a gang component's rules: ``mpi-operator-gang-volcano``."""
    return f"{load_manifest('cluster-role.yaml')['metadata']['name']}-{component.name}"


def bind_to(binding: Manifest, role: Manifest, namespace: str) -> Manifest:
    """``binding``, named for the ServiceAccount in ``namespace``, of ``role``, to it."""
    binding["metadata"]["name"] = binding_name(namespace, binding["metadata"]["name"])
    binding["roleRef"]["name"] = role["metadata"]["name"]
    for subject in binding["subjects"]:
        if subject.get("kind") == "ServiceAccount":
            subject["namespace"] = namespace
    return binding


def narrowed(role: Manifest, without: tuple[str, ...]) -> Manifest:
    """``role`` without the rules of ``without``'s resources, under a name of its own (the
    shipped one is left as it is)."""
    if without:
        role["metadata"]["name"] += "-without-" + "-".join(without)
        role["rules"] = [r for r in role["rules"] if not set(r["resources"]) & set(without)]
    return role


def service_account_kubeconfig(
    cluster_kubeconfig_path: str,
    namespace: str,
    workdir: Path,
    *,
    token_seconds: int = TOKEN_SECONDS,
    without: tuple[str, ...] = (),
    gang_scheduling: str = "",
    lock_namespace: str | None = None,
) -> Path:
    """Apply the shipped RBAC with its ServiceAccount in ``namespace``; return a kubeconfig
    for that ServiceAccount against the same API server (written under ``workdir``).

    ``gang_scheduling``: the operator's ``--gang-scheduling``, whose component's rules are
    bound too. ``lock_namespace``: where the operator keeps its Lease (the Deployment's
    ``$(POD_NAMESPACE)``: ``namespace``, unless set), the only namespace its Lease Role is
    bound in; it must exist. ``without``: resources whose rules are left out, in roles of their
    own names, to see how the operator copes with narrower ones."""
    lock_namespace = lock_namespace or namespace
    account = load_manifest("service-account.yaml")
    account_name = account["metadata"]["name"]
    account["metadata"]["namespace"] = namespace
    role = narrowed(load_manifest("cluster-role.yaml"), without)
    cluster_roles = [(role, bind_to(load_manifest("cluster-role-binding.yaml"), role, namespace))]
    component = gang_component_for(gang_scheduling)
    if component is not None:
        gang_role = {
            "apiVersion": role["apiVersion"],
            "kind": "ClusterRole",
            "metadata": {"name": gang_role_name(component)},
            "rules": gang_component_rules(component),
        }
        gang_role = narrowed(gang_role, without)
        gang_binding = load_manifest("cluster-role-binding.yaml")
        gang_binding["metadata"]["name"] = gang_role_name(component)
        cluster_roles.append((gang_role, bind_to(gang_binding, gang_role, namespace)))
    lease_role = narrowed(load_manifest(LEASE_ROLE_FILE, "Role"), without)
    lease_binding = bind_to(load_manifest(LEASE_ROLE_FILE, "RoleBinding"), lease_role, namespace)

    api = _admin_client(cluster_kubeconfig_path)
    try:
        core = k8s.CoreV1Api(api)
        rbac = k8s.RbacAuthorizationV1Api(api)
        with _exists_ok():
            core.create_namespaced_service_account(namespace, typed(k8s.V1ServiceAccount, account))
        for cluster_role, cluster_role_binding in cluster_roles:
            _create_or_replace(
                k8s.V1ClusterRole,
                rbac.create_cluster_role,
                rbac.read_cluster_role,
                rbac.replace_cluster_role,
                cluster_role,
            )
            _create_or_replace(
                k8s.V1ClusterRoleBinding,
                rbac.create_cluster_role_binding,
                rbac.read_cluster_role_binding,
                rbac.replace_cluster_role_binding,
                cluster_role_binding,
            )
        _create_or_replace(
            k8s.V1Role,
            lambda body: rbac.create_namespaced_role(lock_namespace, body),
            lambda name: rbac.read_namespaced_role(name, lock_namespace),
            lambda name, body: rbac.replace_namespaced_role(name, lock_namespace, body),
            lease_role,
        )
        _create_or_replace(
            k8s.V1RoleBinding,
            lambda body: rbac.create_namespaced_role_binding(lock_namespace, body),
            lambda name: rbac.read_namespaced_role_binding(name, lock_namespace),
            lambda name, body: rbac.replace_namespaced_role_binding(name, lock_namespace, body),
            lease_binding,
        )
    finally:
        api.close()  # type: ignore[no-untyped-call]
    return token_kubeconfig(
        cluster_kubeconfig_path, namespace, account_name, workdir, token_seconds=token_seconds
    )


def token_kubeconfig(
    cluster_kubeconfig_path: str,
    namespace: str,
    account_name: str,
    workdir: Path,
    *,
    token_seconds: int = TOKEN_SECONDS,
) -> Path:
    """A kubeconfig authenticating as an existing ServiceAccount with a bound token."""
    api = _admin_client(cluster_kubeconfig_path)
    try:
        request = k8s.AuthenticationV1TokenRequest(
            spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=token_seconds)
        )
        issued = k8s.CoreV1Api(api).create_namespaced_service_account_token(
            account_name, namespace, request
        )
        assert issued.status is not None, "TokenRequest answered without a token"
        token = issued.status.token
    finally:
        api.close()  # type: ignore[no-untyped-call]

    user = f"system:serviceaccount:{namespace}:{account_name}"
    cluster_name, cluster = _current_cluster(cluster_kubeconfig_path)
    kubeconfig: Manifest = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {
                "name": account_name,
                "context": {"cluster": cluster_name, "user": user, "namespace": namespace},
            }
        ],
        "current-context": account_name,
    }
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"{namespace}-{account_name}.kubeconfig"
    # A bearer token: readable by its owner only, as kubectl writes kubeconfigs.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        yaml.safe_dump(kubeconfig, out, sort_keys=False)
    return path


@contextlib.contextmanager
def bound_service_account(
    cluster_kubeconfig_path: str,
    admin: k8s.ApiClient,
    namespace: str,
    workdir: Path,
    *,
    gang_scheduling: str = "",
    lock_namespace: str | None = None,
) -> Iterator[Path]:
    """The MPIJob CRD installed and the shipped RBAC applied with its ServiceAccount in
    ``namespace`` (``service_account_kubeconfig``'s options): a kubeconfig for that
    ServiceAccount, once the API server authorizes with the new bindings (its authorizer
    learns of them a moment later, and a request refused meanwhile would read as the role's
    refusal). The bindings go afterwards."""
    lock_namespace = lock_namespace or namespace
    install_mpijob_crd(admin)
    try:
        kubeconfig = service_account_kubeconfig(
            cluster_kubeconfig_path,
            namespace,
            workdir,
            gang_scheduling=gang_scheduling,
            lock_namespace=lock_namespace,
        )
        api: k8s.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig)
        )
        try:
            wait_until(
                lambda: (
                    allowed(api, "kubeflow.org", "mpijobs", "list", namespace)
                    and allowed(api, "coordination.k8s.io", "leases", "update", lock_namespace)
                ),
                10,
                message="the bindings to take effect",
            )
        finally:
            api.close()  # type: ignore[no-untyped-call]
        yield kubeconfig
    finally:
        delete_service_account_binding(cluster_kubeconfig_path, namespace, lock_namespace)


def delete_service_account_binding(
    cluster_kubeconfig_path: str, namespace: str, lock_namespace: str | None = None
) -> None:
    """Remove the bindings :func:`service_account_kubeconfig` made for ``namespace``
    (``lock_namespace`` as given to it).

    The ServiceAccount goes with its namespace; the roles stay, as other namespaces'
    bindings may use them."""
    lock_namespace = lock_namespace or namespace
    lease_binding = load_manifest(LEASE_ROLE_FILE, "RoleBinding")["metadata"]["name"]
    api = _admin_client(cluster_kubeconfig_path)
    try:
        rbac = k8s.RbacAuthorizationV1Api(api)
        for role in (None, *(gang_role_name(component) for component in gang_components())):
            with contextlib.suppress(ApiException):
                rbac.delete_cluster_role_binding(binding_name(namespace, role))
        with contextlib.suppress(ApiException):
            rbac.delete_namespaced_role_binding(
                binding_name(namespace, lease_binding), lock_namespace
            )
    finally:
        api.close()  # type: ignore[no-untyped-call]


def install_mpijob_crd(api: k8s.ApiClient, timeout: float = 60.0) -> None:
    """Make the cluster's MPIJob CRD the one in ``crds/`` (a kept cluster may hold an older
    one) and wait until it is served."""
    extensions = k8s.ApiextensionsV1Api(api)
    # The typed API takes models only; this one keeps every field of the CRD, x-kubernetes-*
    # extensions included.
    _create_or_replace(
        k8s.V1CustomResourceDefinition,
        extensions.create_custom_resource_definition,
        extensions.read_custom_resource_definition,
        extensions.replace_custom_resource_definition,
        yaml.safe_load(CRD_FILE.read_text()),
    )
    deadline = time.monotonic() + timeout
    while True:
        crd = extensions.read_custom_resource_definition(MPIJOB_CRD)
        conditions = (crd.status.conditions if crd.status else None) or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"CRD {MPIJOB_CRD} not Established after {timeout:.0f}s")
        time.sleep(0.2)


# -- helpers -------------------------------------------------------------------------------


def _admin_client(kubeconfig: str) -> k8s.ApiClient:
    api: k8s.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=kubeconfig
    )
    return api


M = TypeVar("M")


def typed(model: type[M], manifest: Manifest) -> M:
    """The typed object the client's API methods take (they refuse plain dicts)."""
    built: M | None = model.from_dict(manifest)  # type: ignore[attr-defined]
    if built is None:
        raise ValueError(f"not a {model.__name__}: {manifest}")
    return built


@contextlib.contextmanager
def _exists_ok() -> Iterator[None]:
    try:
        yield
    except ApiException as error:
        if error.status != 409:
            raise


def _create_or_replace(
    model: Any, create: Any, read: Any, replace: Any, manifest: Manifest
) -> None:
    """Make the cluster's object the file's (a role from an earlier run may be stale)."""
    name = manifest["metadata"]["name"]
    for _ in range(5):
        try:
            create(typed(model, manifest))
            return
        except ApiException as error:
            if error.status != 409:
                raise
        body = copy.deepcopy(manifest)
        body["metadata"]["resourceVersion"] = read(name).metadata.resource_version
        try:
            replace(name, typed(model, body))
            return
        except ApiException as error:
            if error.status not in (404, 409):  # deleted or changed meanwhile: start over
                raise
    raise RuntimeError(f"could not apply {manifest['kind']} {name}: kept conflicting")


def _current_cluster(kubeconfig: str) -> tuple[str, Manifest]:
    """The current context's cluster entry, with file paths made absolute.

    ``kubeconfig`` may be a ``KUBECONFIG``-style list; as with kubectl, the first file that
    names a context, cluster or current-context wins."""
    clusters: dict[str, Manifest] = {}
    contexts: dict[str, Manifest] = {}
    current = ""
    for part in kubeconfig.split(os.pathsep):
        if not part:
            continue
        path = Path(part).expanduser().resolve()
        document = yaml.safe_load(path.read_text()) or {}
        for entry in document.get("clusters") or []:
            cluster = dict(entry.get("cluster") or {})
            authority = cluster.get("certificate-authority")
            if authority and not Path(authority).is_absolute():
                # Relative paths in a kubeconfig are relative to the file itself.
                cluster["certificate-authority"] = str(path.parent / authority)
            clusters.setdefault(entry["name"], cluster)
        for entry in document.get("contexts") or []:
            contexts.setdefault(entry["name"], entry.get("context") or {})
        current = current or document.get("current-context") or ""
    if not current and len(contexts) == 1:
        current = next(iter(contexts))
    if current not in contexts:
        raise ValueError(f"{kubeconfig}: no current context")
    name = contexts[current].get("cluster", "")
    if name not in clusters:
        raise ValueError(f"{kubeconfig}: context {current} names unknown cluster {name!r}")
    return name, clusters[name]
