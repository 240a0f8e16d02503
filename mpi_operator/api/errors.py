"""An MPIJob's problems: the refusal that carries them, and field paths in the model's terms."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError

from mpi_operator.api.models import MAP_FIELDS
from mpi_operator.field_errors import FieldError


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
