"""Field-addressed problems, printed as ``<field path>: <message>``.

Scripts read these one line per problem, so a printed error never spans two lines whatever
the user wrote: control characters and line separators in a path or message are escaped.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

MAX_PROBLEMS: Final = 50
"""Problems reported from one document; a file of a million bad numbers needs no more."""

ROOT: Final = "<root>"
"""The path of a problem with the document as a whole (not an object, wrong kind)."""

_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Control, surrogate, line- and paragraph-separator characters: each either breaks a line
# (str.splitlines splits on several of them) or cannot be written to a UTF-8 stream.
_UNPRINTABLE: Final = frozenset({"Cc", "Cs", "Zl", "Zp"})


def one_line(text: str) -> str:
    """``text`` with every character that could break or corrupt a line escaped."""
    if text.isprintable():
        return text
    return "".join(_escaped(char) for char in text)


def _escaped(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    if unicodedata.category(char) in _UNPRINTABLE:
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return char


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
