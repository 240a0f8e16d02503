"""The API server's rules for names, label values and keys, as messages naming what is wrong.

Each function returns the problems of one value (empty when it is valid), worded as
apimachinery words them, so a refusal from ``render`` reads like one from ``kubectl apply``.
"""

from __future__ import annotations

import re
from typing import Final

DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
LABEL_VALUE_MAX: Final = 63
QUALIFIED_NAME_MAX: Final = 63

_DNS1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_DNS1035_LABEL: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_QUALIFIED_NAME: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

_LABEL_RULE: Final = (
    "must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character"
)
_SUBDOMAIN_RULE: Final = (
    "must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
    "with an alphanumeric character"
)
_DNS1035_RULE: Final = (
    "must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character"
)
_VALUE_RULE: Final = (
    "must be 63 characters or less and must be empty or begin and end with an alphanumeric "
    "character ([a-z0-9A-Z]) with dashes (-), underscores (_), dots (.), and alphanumerics "
    "between"
)
_NAME_RULE: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character"
)


def dns1123_label(value: str) -> list[str]:
    """A namespace, a container or volume name, a pod's hostname."""
    return _named(
        value, _DNS1123_LABEL, DNS1123_LABEL_MAX, "a lowercase RFC 1123 label", _LABEL_RULE
    )


def dns1123_subdomain(value: str) -> list[str]:
    """Most object names, a scheduler or PriorityClass name, a DNS search domain."""
    return _named(
        value,
        _DNS1123_SUBDOMAIN,
        DNS1123_SUBDOMAIN_MAX,
        "a lowercase RFC 1123 subdomain",
        _SUBDOMAIN_RULE,
    )


def dns1035_label(value: str) -> list[str]:
    """A Service name."""
    return _named(value, _DNS1035_LABEL, DNS1123_LABEL_MAX, "a DNS-1035 label", _DNS1035_RULE)


def label_value(value: str) -> list[str]:
    if value == "" or (len(value) <= LABEL_VALUE_MAX and _LABEL_VALUE.fullmatch(value)):
        return []
    return [f"a valid label {_VALUE_RULE}"]


def qualified_name(key: str) -> list[str]:
    """A label or annotation key: an optional DNS-subdomain prefix and '/', then a name."""
    prefix, slash, name = key.rpartition("/")
    problems: list[str] = []
    if slash:
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems += [f"prefix part {p}" for p in dns1123_subdomain(prefix)]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        problems.append(f"name part must be no more than {QUALIFIED_NAME_MAX} characters")
    elif not _QUALIFIED_NAME.fullmatch(name):
        problems.append(f"name part {_NAME_RULE}")
    if key.count("/") > 1:
        problems.append("a qualified name has at most one '/'")
    return problems


def _named(value: str, pattern: re.Pattern[str], limit: int, kind: str, rule: str) -> list[str]:
    problems = []
    if len(value) > limit:
        problems.append(f"must be no more than {limit} characters")
    if not pattern.fullmatch(value):
        problems.append(f"{kind} {rule}")
    return problems


PORT_NAME_MAX: Final = 15
_PORT_NAME: Final = re.compile(r"[-a-z0-9]+")
_CONFIG_KEY: Final = re.compile(r"[-._a-zA-Z0-9]+")
_HTTP_HEADER_NAME: Final = re.compile(r"[-A-Za-z0-9]+")


def port_name(value: str) -> list[str]:
    """A named container port, or a probe's port by name: an IANA service name."""
    problems = []
    if len(value) > PORT_NAME_MAX:
        problems.append(f"must be no more than {PORT_NAME_MAX} characters")
    if not _PORT_NAME.fullmatch(value):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search(r"[a-z]", value):
        problems.append("must contain at least one letter (a-z)")
    if "--" in value:
        problems.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        problems.append("must not begin or end with a hyphen")
    return problems


def env_var_name(value: str) -> list[str]:
    """An environment variable's name or an envFrom prefix (Kubernetes' relaxed rule, the only
    one since 1.34)."""
    if all(" " <= char <= "~" and char != "=" for char in value):
        return []
    return [
        "a valid environment variable name must consist only of printable ASCII characters "
        "other than '='"
    ]


def config_key(value: str) -> list[str]:
    """A key of a ConfigMap or Secret."""
    problems = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        problems.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters")
    if not _CONFIG_KEY.fullmatch(value):
        problems.append(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
        )
    if value == "." or value.startswith(".."):
        problems.append("must not be '.' or start with '..'")
    return problems


def http_header_name(value: str) -> list[str]:
    if _HTTP_HEADER_NAME.fullmatch(value):
        return []
    return ["a valid HTTP header must consist of alphanumeric characters or '-'"]
