"""Limits on a decoded MPIJob document, checked before anything else reads it.

Everything downstream (pydantic, deep copies of pod templates, the YAML and JSON writers) walks
documents recursively and expands shared sub-objects. A document read from YAML can share one
sub-object many times through aliases (a few hundred bytes that expand to gigabytes) or contain
itself; one read from anywhere can nest deep enough to exhaust Python's stack. This walk is
iterative and stops early, so it is the one place that may meet such a document.

It also refuses values with no JSON form, which the API server could never have sent and will
never accept: non-string keys, non-finite numbers, integers beyond 64 bits, invalid Unicode,
and YAML-only types (binary, sets, timestamps).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator
from typing import Final

from mpi_operator.api.errors import join_path
from mpi_operator.field_errors import MAX_PROBLEMS, FieldError

MAX_DEPTH: Final = 64
"""Nesting levels of objects and lists. The deepest pod field is about 15 levels down."""
MAX_VALUES: Final = 100_000
"""Values in the document, every use of a YAML alias counted again: the size of the
document once written out as JSON, as the API server and every writer would see it."""

_INT64: Final = range(-(2**63), 2**63)

Part = str | int


def document_errors(document: object) -> list[FieldError]:
    """Every limit ``document`` breaks (at most MAX_PROBLEMS), each with its field path."""
    errors: list[FieldError] = []
    for error in _walk(document):
        errors.append(error)
        if len(errors) >= MAX_PROBLEMS:
            break
    return errors


def values_within_bounds(
    value: object, path: tuple[Part, ...] = (), budget: int = MAX_VALUES
) -> int | None:
    """How many values ``value``, found at ``path`` in a document, holds when it breaks no limit
    there within ``budget`` values; None when it breaks one (:func:`document_errors` of the
    document tells which). A document whose parts are each within bounds, their values within
    MAX_VALUES, is within bounds."""
    walk = _walk(value, path, budget)
    try:
        next(walk)
    except StopIteration as finished:
        return int(finished.value)
    return None


def _walk(
    document: object, path: tuple[Part, ...] = (), budget: int = MAX_VALUES
) -> Generator[FieldError, None, int]:
    """The document's problems; returns the number of values visited."""
    # Each entry is a value to visit, or None: the marker that its parent's children are done,
    # so the parent leaves the set of ancestors (the objects on the current path).
    stack: list[tuple[object, tuple[Part, ...]] | None] = [(document, path)]
    ancestors: list[int] = []
    on_path: set[int] = set()
    visited = 0
    while stack:
        entry = stack.pop()
        if entry is None:
            on_path.discard(ancestors.pop())
            continue
        value, path = entry
        visited += 1
        if visited > budget:
            yield FieldError(
                "",
                f"has more than {MAX_VALUES} values (YAML aliases counted at every use); "
                "an MPIJob is far smaller",
            )
            return visited
        if isinstance(value, dict | list):
            if id(value) in on_path:
                yield FieldError(join_path(path), "contains itself (a recursive YAML alias)")
                continue
            if len(path) >= MAX_DEPTH:
                yield FieldError(join_path(path), f"nested more than {MAX_DEPTH} levels deep")
                continue
            ancestors.append(id(value))
            on_path.add(id(value))
            stack.append(None)
            children = _children(value, path)
            for problem_or_child in children:
                if isinstance(problem_or_child, FieldError):
                    yield problem_or_child
                else:
                    stack.append(problem_or_child)
            continue
        problem = _scalar_problem(value)
        if problem is not None:
            yield FieldError(join_path(path), problem)
    return visited


def _children(
    value: dict[object, object] | list[object], path: tuple[Part, ...]
) -> Iterator[FieldError | tuple[object, tuple[Part, ...]]]:
    # Pushed in reverse so the stack visits them, and reports problems, in document order.
    if isinstance(value, list):
        for index in reversed(range(len(value))):
            yield value[index], (*path, index)
        return
    for key in reversed(list(value)):
        if not isinstance(key, str):
            yield FieldError(join_path(path), f"keys must be strings, found {key!r}")
            continue
        text_problem = _text_problem(key)
        if text_problem is not None:
            yield FieldError(join_path(path), f"key {key!r}: {text_problem}")
            continue
        yield value[key], (*path, key)


def _scalar_problem(value: object) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if value in _INT64 else "must be an integer that fits in 64 bits"
    if isinstance(value, float):
        return None if math.isfinite(value) else "must be a finite number"
    if isinstance(value, str):
        return _text_problem(value)
    return (
        f"must be a string, number, boolean, list or object; YAML type "
        f"{type(value).__name__} has no JSON form"
    )


def _text_problem(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode text (it contains a lone surrogate)"
    return None
