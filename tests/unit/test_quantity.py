"""Quantities: exact values and the API server's canonical spelling."""

from __future__ import annotations

from decimal import Decimal

import pytest

from mpi_operator.quantity import (
    InvalidQuantityError,
    Quantity,
    canonical,
    format_resources,
)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("1", Decimal(1)),
        (2, Decimal(2)),
        (0.5, Decimal("0.5")),
        ("500m", Decimal("0.5")),
        ("1Gi", Decimal(1024**3)),
        ("1.5Gi", Decimal(1024**3) * Decimal("1.5")),
        ("2k", Decimal(2000)),
        ("1e3", Decimal(1000)),
        ("100u", Decimal("0.0001")),
        (".5", Decimal("0.5")),
    ],
)
def test_parse_gives_exact_values(raw: object, value: Decimal) -> None:
    assert Quantity.parse(raw).value == value


@pytest.mark.parametrize("raw", ["", "abc", "1.2.3", "5 Gi", "Gi", True, None, [1]])
def test_parse_rejects_what_is_not_a_quantity(raw: object) -> None:
    with pytest.raises(InvalidQuantityError):
        Quantity.parse(raw)


@pytest.mark.parametrize(
    ("raw", "factor", "expected"),
    [
        ("500m", 2, "1"),
        ("500m", 3, "1500m"),
        ("1Gi", 2, "2Gi"),
        ("512Mi", 3, "1536Mi"),
        ("1000", 1, "1k"),
        ("1500", 1, "1500"),
        ("1Ki", 1, "1Ki"),
        ("100", 1, "100"),
        ("1e3", 1, "1e3"),
        ("10", 0, "0"),
        ("1.5", 1, "1500m"),
        ("0.1n", 1, "1n"),
        ("0.9765625Ki", 1, "1k"),  # binary values under 1Ki print in decimal SI
    ],
)
def test_canonical_form_matches_the_api_server(raw: str, factor: int, expected: str) -> None:
    assert canonical(Quantity.parse(raw).times(factor)) == expected


def test_sums_keep_the_first_format_and_add_exactly() -> None:
    q = Quantity.parse
    total = {
        "cpu": q("1") + q("10").times(2),
        "memory": q("2Gi") + q("20Gi").times(2),
        "nvidia.com/gpu": q(1).times(2),
    }
    assert format_resources(total) == {"cpu": "21", "memory": "42Gi", "nvidia.com/gpu": "2"}


def test_a_sum_beyond_the_range_is_written_as_its_bound() -> None:
    huge = Quantity.parse("8E").times(2) + Quantity.parse("1")
    assert format_resources({"cpu": huge}) == {"cpu": "9223372036854775807"}
