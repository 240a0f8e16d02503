"""Reading a job manifest: YAML (or JSON) text to one document, in bounded time and memory.

A manifest is read as kubectl reads it (an unquoted date stays a string) and within limits
checked on the parser's event stream before any object is built: the text's size, the
nesting depth, and the number of values once every alias is expanded. An alias bomb (a
short text whose aliases expand to billions of values) and a document nested thousands of
levels deep are refused here with the line and column where they go too far; the finer
limits of ``api.bounds`` then apply to the document with field paths.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, AnyStr, Final

import yaml

from mpi_operator.api.bounds import MAX_DEPTH, MAX_VALUES

MAX_BYTES: Final = 3 * 1024 * 1024
"""The API server's limit on a request body: a larger manifest could never be applied."""
MAX_YAML_DEPTH: Final = 2 * MAX_DEPTH
"""Deeper than ``api.bounds`` allows, so that moderately deep documents get a field path."""

# libyaml parses about ten times faster than the pure-Python parser; both give the same
# documents.
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestError(ValueError):
    """Text that is not one readable YAML or JSON document within the limits."""


class _ManifestLoader(_SafeLoader):  # type: ignore[misc]
    """YAML read as kubectl reads it: an unquoted date stays the string it looks like."""


_ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_bounded(stream: IO[AnyStr], size: int | None = None) -> AnyStr:
    """A manifest from ``stream``, whose size in bytes is ``size`` when known: refused before
    reading when that is beyond MAX_BYTES, and read no further than MAX_BYTES + 1 bytes (or
    characters, from a text stream: each is at least a byte), since a pipe may never end.
    Raises ManifestError."""
    if size is not None and size > MAX_BYTES:
        raise _too_large(str(size))
    data = stream.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise _too_large(f"more than {MAX_BYTES}")
    return data


def _too_large(size: str) -> ManifestError:
    return ManifestError(f"is {size} bytes; a manifest may have at most {MAX_BYTES}")


def read_documents(text: str) -> list[Any]:
    """The non-empty documents of ``text``; raises ManifestError."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ManifestError("not UTF-8 text") from None
    if size > MAX_BYTES:
        raise _too_large(str(size))
    try:
        _check_events(text)
        return [doc for doc in yaml.load_all(text, Loader=_ManifestLoader) if doc is not None]
    except yaml.YAMLError as error:
        raise ManifestError(_yaml_problem(error, text)) from None
    except RecursionError:
        # Not reachable within MAX_YAML_DEPTH; kept so no input ever ends in a traceback.
        raise ManifestError(f"not valid YAML: nested more than {MAX_YAML_DEPTH} levels") from None


@dataclass
class _Collection:
    """A sequence or mapping being read: its anchor and how many values it expands to."""

    anchor: str | None
    values: int = 1


def _check_events(text: str) -> None:
    """Depth and expanded size from the event stream, without building anything."""
    open_collections: list[_Collection] = []
    anchored: dict[str, int] = {}
    total = 0
    for event in _events(text):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_collections) >= MAX_YAML_DEPTH:
                _too_far(event, f"nested more than {MAX_YAML_DEPTH} levels")
            open_collections.append(_Collection(event.anchor))
            values = 1
        elif isinstance(event, yaml.CollectionEndEvent):
            done = open_collections.pop()
            if done.anchor is not None:
                anchored[done.anchor] = done.values
            values = done.values
            if open_collections:
                open_collections[-1].values += values
            continue
        elif isinstance(event, yaml.AliasEvent):
            # An alias of a collection still open is recursive; api.bounds reports it by path.
            values = anchored.get(event.anchor or "", 1)
        elif isinstance(event, yaml.ScalarEvent):
            values = 1
            if event.anchor is not None:
                anchored[event.anchor] = 1
        else:
            continue
        total += values
        if total > MAX_VALUES:
            _too_far(
                event,
                f"more than {MAX_VALUES} values (YAML aliases counted at every use); "
                "an MPIJob is far smaller",
            )
        if open_collections and not isinstance(event, yaml.CollectionStartEvent):
            open_collections[-1].values += values


def _events(text: str) -> Iterator[yaml.Event]:
    yield from yaml.parse(text, Loader=_ManifestLoader)


def _too_far(event: yaml.Event, problem: str) -> None:
    mark = event.start_mark
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    raise ManifestError(f"{problem}{where}")


def _yaml_problem(error: yaml.YAMLError, text: str) -> str:
    if isinstance(error, yaml.reader.ReaderError):
        # A character YAML does not allow; the reader knows only its offset in the text.
        line, column = _line_and_column(text, error.position)
        character = f"#x{error.character:04x}" if isinstance(error.character, int) else ""
        return (
            f"not valid YAML: unacceptable character {character}: {error.reason} "
            f"(line {line}, column {column})"
        )
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        problem = error.problem
        if problem is not None and "maximum nesting depth" in problem:
            # libyaml 0.2.6 scans ahead and stops at its own limit (1,000) before our depth
            # check sees the events; anything that deep is beyond MAX_YAML_DEPTH too.
            problem = f"nested more than {MAX_YAML_DEPTH} levels"
        return f"not valid YAML: {problem} (line {mark.line + 1}, column {mark.column + 1})"
    return "not valid YAML: " + " ".join(str(error).split())


# What YAML counts as a line break ("\r\n" is one).
_LINE_BREAK: Final = re.compile("\r\n|[\n\r\x85\u2028\u2029]")


def _line_and_column(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of the character at ``offset``, as YAML's marks count them."""
    breaks = list(_LINE_BREAK.finditer(text, 0, offset))
    line_start = breaks[-1].end() if breaks else 0
    return len(breaks) + 1, offset - line_start + 1
