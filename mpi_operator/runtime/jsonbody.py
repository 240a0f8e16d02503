"""Decoding the API server's JSON: what ``json.loads`` gives, at less than half its CPU.

Every answer, list page and watch event the operator reads is decoded here, and decoding was the
largest single share of the operator's CPU (see docs/performance.md). msgspec's decoder builds
the same plain dicts, lists, strings, integers (of any size), floats, booleans and Nones as
``json.loads``, keys in document order, the last of duplicate keys winning.

What msgspec refuses and the standard library takes — ``NaN`` and ``Infinity``, numbers beyond a
float's range, lone surrogates (escaped or encoded), a byte order mark, UTF-16 and UTF-32 — the
API server never sends (Go's ``encoding/json`` writes none of them); such a body is decoded by
``json.loads`` as before, so nothing that decoded before fails now, and nothing decodes to another
value. Whatever the input, :func:`loads` returns a value or raises :class:`ValueError`: nesting
deeper than the interpreter's recursion limit, which ``json.loads`` raised as ``RecursionError``
(a traceback up to the reflector's catch-all), included.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

_decoder = msgspec.json.Decoder()


def loads(data: bytes) -> Any:
    """``json.loads(data)``'s value; :class:`ValueError` for anything that is not JSON."""
    try:
        try:
            return _decoder.decode(data)
        except ValueError:  # msgspec.DecodeError, or UnicodeDecodeError (encoded surrogates)
            return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested deeper than the interpreter's recursion limit") from None
