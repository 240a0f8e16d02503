"""Kubernetes resource quantities: exact parsing, arithmetic and canonical formatting.

Quantities are compared by value (``1Gi + 512Mi == 1536Mi``) and written the way the
API server writes them back (``2 x 500m`` is ``1``), so a desired object never differs
from the stored one only in spelling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from enum import Enum
from typing import Final

_PATTERN: Final = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_BINARY: Final = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_SUFFIX: Final = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_NANO: Final = Decimal("1e-9")


class Format(Enum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


class InvalidQuantityError(ValueError):
    """A value that is not a Kubernetes quantity."""


@dataclass(frozen=True)
class Quantity:
    """An exact amount with the format it was written in (which decides how it prints)."""

    value: Decimal
    format: Format = Format.DECIMAL_SI

    @classmethod
    def parse(cls, raw: object) -> Quantity:
        if isinstance(raw, bool):
            raise InvalidQuantityError(f"invalid quantity {raw!r}")
        if isinstance(raw, int):
            return cls(Decimal(raw))
        if isinstance(raw, float):
            return cls(Decimal(repr(raw)))
        if not isinstance(raw, str):
            raise InvalidQuantityError(f"invalid quantity {raw!r}: must be a number or a string")
        match = _PATTERN.match(raw.strip())
        if not match or raw.strip() in {"", "+", "-"}:
            raise InvalidQuantityError(f'invalid quantity "{raw}"')
        number = Decimal(match["number"])
        suffix = match["suffix"] or ""
        if suffix in _BINARY:
            return cls(number * (Decimal(1024) ** _BINARY[suffix]), Format.BINARY_SI)
        if suffix in _DECIMAL:
            return cls(number.scaleb(_DECIMAL[suffix]), Format.DECIMAL_SI)
        return cls(number.scaleb(int(suffix[1:])), Format.DECIMAL_EXPONENT)

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + other.value, self.format)

    def times(self, factor: int) -> Quantity:
        return Quantity(self.value * factor, self.format)

    def __str__(self) -> str:
        return canonical(self)


def canonical(quantity: Quantity) -> str:
    """The API server's canonical spelling of a quantity."""
    # Sub-nano precision is rounded up, as the API server does.
    value = quantity.value.quantize(_NANO, rounding=ROUND_CEILING)
    if value == 0:
        return "0"
    if quantity.format is Format.BINARY_SI and abs(value) >= 1024 and value == value.to_integral():
        return _binary(int(value))
    return _decimal(value, exponent_notation=quantity.format is Format.DECIMAL_EXPONENT)


def _binary(value: int) -> str:
    power = 0
    while value % 1024 == 0 and power < len(_BINARY):
        value //= 1024
        power += 1
    suffix = next((s for s, p in _BINARY.items() if p == power), "")
    return f"{value}{suffix}"


def _decimal(value: Decimal, *, exponent_notation: bool) -> str:
    exponent = -9
    mantissa = int(value.scaleb(9))
    while mantissa % 1000 == 0 and exponent < 18:
        mantissa //= 1000
        exponent += 3
    if exponent_notation:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"


def sum_resources(
    total: dict[str, Quantity], resources: dict[str, object], factor: int
) -> dict[str, Quantity]:
    """Add ``factor`` times ``resources`` into ``total``, keeping the first-seen format."""
    result = dict(total)
    for name, raw in resources.items():
        amount = Quantity.parse(raw).times(factor)
        result[name] = result[name] + amount if name in result else amount
    return result


def format_resources(resources: dict[str, Quantity]) -> dict[str, str]:
    return {name: canonical(amount) for name, amount in sorted(resources.items())}


def resources_equal(left: dict[str, object] | None, right: dict[str, object] | None) -> bool:
    """Value equality of two resource lists; unparseable values compare as written."""

    def values(resources: dict[str, object] | None) -> dict[str, object]:
        out: dict[str, object] = {}
        for name, raw in (resources or {}).items():
            try:
                out[name] = Quantity.parse(raw).value
            except InvalidQuantityError:
                out[name] = raw
        return out

    return values(left) == values(right)
