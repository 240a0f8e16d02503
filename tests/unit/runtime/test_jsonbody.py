"""The API server's JSON decodes to exactly what ``json.loads`` gives: the same values of the same
types, for bodies as the server writes them and for anything else a server could send."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpi_operator.runtime import jsonbody
from tests.unit.runtime.api_bodies import BODIES, MPIJOB, exact

FUZZ = settings(
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def outcome(decode: Any, data: bytes) -> Any:
    try:
        return exact(decode(data))
    except ValueError:
        return "ValueError"


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
def test_api_bodies_decode_to_what_the_standard_library_gives(body: bytes) -> None:
    assert exact(jsonbody.loads(body)) == exact(json.loads(body))


def test_integers_keep_every_digit() -> None:
    extension = jsonbody.loads(MPIJOB)["spec"]["x-extension"]
    assert extension["big"] == 123456789012345678901234567890
    assert extension["beyondUint64"] == 18446744073709552000
    assert type(extension["beyondUint64"]) is int


@pytest.mark.parametrize(
    "data",
    [
        # What no API server writes, but json.loads takes: decoded as before.
        b'{"a":NaN,"b":Infinity,"c":-Infinity}',
        b'{"a":1e400,"b":-1e400}',
        b'{"lone":"\\ud800","reversed":"\\udfff\\ud800","\\udc00":1}',
        b'{"encoded surrogate":"\xed\xa0\x80"}',
        b'\xef\xbb\xbf{"bom":1}',
        '{"utf16":"ü"}'.encode("utf-16"),
        '{"utf32":"ü"}'.encode("utf-32"),
        b'{"a":1,"a":2}',
        b' \r\n\t{"a" : [ 1 , 2 ] }\n',
        # What neither takes.
        b"",
        b"\x00",
        b'{"a":"\xff"}',
        b'{"a":"\xc0\x80"}',
        b'{"a":"\t"}',
        b'{"a":01}',
        b'{"a":1,}',
        b'{"a":1}{"b":2}',
        b'{"a":"\\x"}',
        b'{"a":"\\u12"}',
        b'{"a":1',
    ],
)
def test_hostile_bodies_decode_or_fail_as_the_standard_library_does(data: bytes) -> None:
    assert outcome(jsonbody.loads, data) == outcome(json.loads, data)


@pytest.mark.parametrize("times", [2, 100])
def test_nesting_beyond_the_recursion_limit_is_a_value_error(times: int) -> None:
    depth = times * sys.getrecursionlimit()
    for data in (b"[" * depth + b"]" * depth, b'{"a":' * depth + b"1" + b"}" * depth):
        with pytest.raises(RecursionError):
            json.loads(data)
        with pytest.raises(ValueError, match="nested"):
            jsonbody.loads(data)


# Any code point, lone surrogates often.
any_text = st.lists(st.characters() | st.integers(0xD800, 0xDFFF).map(chr), max_size=12).map(
    "".join
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats()
    | any_text,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(any_text, children, max_size=5)
    ),
    max_leaves=30,
)


@FUZZ
@given(json_values, st.booleans(), st.booleans())
def test_any_value_decodes_as_the_standard_library_decodes_it(
    value: Any, ascii_only: bool, compact: bool
) -> None:
    separators = (",", ":") if compact else (", ", ": ")
    data = json.dumps(value, ensure_ascii=ascii_only, separators=separators).encode(
        "utf-8", "surrogatepass"
    )
    assert outcome(jsonbody.loads, data) == outcome(json.loads, data)


@FUZZ
@given(st.lists(any_text, min_size=1, max_size=4), st.booleans())
def test_any_text_decodes_as_the_standard_library_decodes_it(
    texts: list[str], ascii_only: bool
) -> None:
    # Lone surrogates escaped (\ud800) or, from a client that passes them through, encoded.
    data = json.dumps({text: text for text in texts}, ensure_ascii=ascii_only).encode(
        "utf-8", "surrogatepass"
    )
    assert outcome(jsonbody.loads, data) == outcome(json.loads, data)


@FUZZ
@given(st.binary(max_size=64) | st.sampled_from(list(BODIES.values())), st.data())
def test_any_bytes_decode_or_fail_as_the_standard_library_does(data: bytes, draw: Any) -> None:
    # A body cut short or with one byte changed, or bytes at random.
    if data and draw.draw(st.booleans()):
        at = draw.draw(st.integers(0, len(data) - 1))
        if draw.draw(st.booleans()):
            data = data[:at]
        else:
            data = data[:at] + bytes([draw.draw(st.integers(0, 255))]) + data[at + 1 :]
    assert outcome(jsonbody.loads, data) == outcome(json.loads, data)


def page_outcome(data: bytes) -> Any:
    try:
        metadata, items = jsonbody.loads_list_page(data)
        return exact((metadata, list(items)))
    except ValueError:
        return "ValueError"


def page_as_the_standard_library_reads_it(data: bytes) -> Any:
    try:
        page = json.loads(data)
    except ValueError:
        return "ValueError"
    if not isinstance(page, dict):
        return "ValueError"
    metadata, items = page.get("metadata"), page.get("items")
    if not isinstance(metadata, dict | None) or not isinstance(items, list | None):
        return "ValueError"
    return exact((metadata or {}, items or []))


@pytest.mark.parametrize(
    "data",
    [
        b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"t"},'
        + b'"items":['
        + b",".join(BODIES.values())
        + b"]}",
        b'{"items":null}',
        b'{"metadata":null,"items":[]}',
        b"{}",
        b'{"items":[{"a":NaN}]}',
        b'{"items":[{"a":1}],"items":[{"b":2}],"metadata":{"x":1},"metadata":{"y":2}}',
        b'{"\\u0069tems":[{"a":1}]}',
        b'{"items":[1,"two",null]}',
        b'{"items":{"a":1}}',
        b'{"metadata":[]}',
        b"[]",
        b'{"items":[{"a":1},]}',
        b'{"items":[{"a":"\\ud800"}]}',
        b"",
    ],
)
def test_a_list_page_reads_as_the_standard_library_reads_it(data: bytes) -> None:
    assert page_outcome(data) == page_as_the_standard_library_reads_it(data)


@FUZZ
@given(
    st.lists(json_values, max_size=4) | json_values,
    st.dictionaries(any_text, json_values, max_size=3) | json_values,
    st.booleans(),
)
def test_any_list_page_reads_as_the_standard_library_reads_it(
    items: Any, metadata: Any, ascii_only: bool
) -> None:
    page = {"kind": "List", "metadata": metadata, "items": items}
    data = json.dumps(page, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert page_outcome(data) == page_as_the_standard_library_reads_it(data)


@pytest.mark.parametrize("times", [2, 100])
def test_a_list_page_nested_beyond_the_recursion_limit_is_a_value_error(times: int) -> None:
    depth = sys.getrecursionlimit() * times
    for page in (
        b'{"items":[' + b"[" * depth + b"]" * depth + b"]}",
        b'{"items":[{"a":' + b"[" * depth + b"]" * depth + b"}]}",
        b'{"metadata":{"a":' + b"[" * depth + b"]" * depth + b"}}",
    ):
        with pytest.raises(ValueError, match="recursion limit"):
            _, items = jsonbody.loads_list_page(page)
            list(items)
