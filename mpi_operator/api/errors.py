"""Field-addressed validation errors, printed as ``<field path>: <message>``.

Scripts read these one line per problem, so a printed error never spans two lines whatever
the user wrote: control characters and line separators in a path or message are escaped.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from pydantic import ValidationError

from mpi_operator.api.lines import one_line
from mpi_operator.api.v2beta1 import MAP_FIELDS

ROOT: Final = "<root>"
"""The path of a problem with the document as a whole (not an object, wrong kind)."""


def quoted(value: object) -> str:
    """A value as an error message shows it: text in double quotes, anything else as is."""
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    return repr(value)


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{one_line(self.path or ROOT)}: {one_line(self.message)}"


def unknown_field(path: str, name: str, known: Iterable[str]) -> FieldError:
    """``name`` is no field of the object at ``path``; the nearest known spelling, if any, is
    suggested (the API server would drop the field, so a typo must not pass)."""
    close = difflib.get_close_matches(name, sorted(known), n=1)
    suggestion = f"; did you mean {quoted(close[0])}?" if close else ""
    return FieldError(f"{path}.{name}" if path else name, f"unknown field{suggestion}")


class InvalidMPIJobError(ValueError):
    """An MPIJob that cannot be run, with every problem found."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors))


def join_path(parts: Iterable[str | int]) -> str:
    """Render a location the way kubectl users read it: ``a.b[Key].c[0]``."""
    out = ""
    previous: str | int | None = None
    for part in parts:
        if isinstance(part, int) or previous in MAP_FIELDS:
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
        previous = part
    return out


_TYPE_MESSAGES = {
    "int_type": "must be an integer",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "dict_type": "must be an object",
    "list_type": "must be a list",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
}


def from_pydantic(error: ValidationError) -> list[FieldError]:
    """Readable field errors from a pydantic failure (types only; rules live in validation)."""
    found: dict[str, FieldError] = {}
    for detail in error.errors(include_url=False):
        loc = [p for p in detail["loc"] if not _is_union_branch(p)]
        path = join_path(loc)
        if path in found:
            continue  # a union reports each branch; one line per field is enough
        message = _TYPE_MESSAGES.get(detail["type"], detail["msg"])
        if len(loc) >= 2 and loc[-2] == "minResources":
            message = "must be an integer or a quantity string"
        found[path] = FieldError(path, message)
    return list(found.values())


def _is_union_branch(part: object) -> bool:
    # pydantic names the branch of `int | str` it tried as an extra location part.
    return isinstance(part, str) and part in {"int", "str", "function-after[...]"}
