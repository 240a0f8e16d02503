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
from collections.abc import Iterator
from typing import Any

import msgspec

_decoder = msgspec.json.Decoder()
_TOO_DEEP = "JSON nested deeper than the interpreter's recursion limit"


class _ListPage(msgspec.Struct):
    """What a list page is read for. Its items stay undecoded (their bytes, checked to be
    JSON) until each is taken: a page decoded whole took its items' objects all at once, and
    the process kept that memory after the page was cached (docs/performance.md)."""

    items: list[msgspec.Raw] | None = None
    metadata: dict[str, Any] | None = None


_page_decoder = msgspec.json.Decoder(_ListPage)


def loads(data: bytes | memoryview) -> Any:
    """``json.loads(data)``'s value; :class:`ValueError` for anything that is not JSON."""
    try:
        try:
            return _decoder.decode(data)
        except ValueError:  # msgspec.DecodeError, or UnicodeDecodeError (encoded surrogates)
            return json.loads(bytes(data))
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None


def loads_list_page(data: bytes) -> tuple[dict[str, Any], Iterator[Any]]:
    """A list page's ``metadata`` (``{}`` when absent) and its ``items``, each item decoded as
    :func:`loads` decodes it when the iteration reaches it. :class:`ValueError` where the page
    is not a JSON object, or its metadata not an object or its items not an array."""
    try:
        page = _page_decoder.decode(data)
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None
    except ValueError:
        # Not a page's shape, or JSON only the standard library reads: decoded whole.
        return _whole_page(loads(data))
    return page.metadata or {}, (loads(memoryview(item)) for item in page.items or ())


def _whole_page(page: Any) -> tuple[dict[str, Any], Iterator[Any]]:
    if not isinstance(page, dict):
        raise ValueError("the list is not a JSON object")
    metadata, items = page.get("metadata"), page.get("items")
    if not isinstance(metadata, dict | None):
        raise ValueError("the list's metadata is not a JSON object")
    if not isinstance(items, list | None):
        raise ValueError("the list's items are not a JSON array")
    return metadata or {}, iter(items or ())
