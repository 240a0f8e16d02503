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
