"""One line of text whatever it holds: what scripts reading stderr or a log line by line need.

Apart from the models (no pydantic), so the operator's log lines and the command's usage
errors cost nothing at start.
"""

from __future__ import annotations

import unicodedata
from typing import Final

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
