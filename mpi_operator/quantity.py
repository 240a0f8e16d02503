"""Kubernetes resource quantities: exact parsing, arithmetic and canonical formatting.

Quantities are compared by value (``1Gi + 512Mi == 1536Mi``) and written the way the
API server writes them back (``2 x 500m`` is ``1``), so a desired object never differs
from the stored one only in spelling.

Only quantities Kubernetes documents are accepted: the exact syntax (no surrounding
whitespace), finite, and at most 2^63-1 in magnitude (apimachinery caps larger values, and
every consumer reads them as 64-bit integers). Within that range a fixed, generous decimal
precision keeps all arithmetic exact: sums and multiples of many pods stay far below it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import ROUND_CEILING, Context, Decimal
from enum import Enum
from typing import Final

# Matched whole (fullmatch): a trailing newline is as wrong as a space.
_PATTERN: Final = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?"
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
MAX_MAGNITUDE: Final = 2**63 - 1
"""The largest quantity Kubernetes represents; larger values are capped by the API server."""
# Amounts are at most 2^63 (19 digits) with 9 decimals before arithmetic; sums and multiples
# over a job's pods add at most a few dozen digits. 100 digits is exact for all of them.
_EXACT: Final = Context(prec=100, Emax=1000, Emin=-1000)
# Exponents (and binary suffixes) beyond these cannot give a value in range, or give one
# below a nano that rounds up to it.
_MAX_EXPONENT: Final = 19
_MIN_EXPONENT: Final = -30
_SHOWN_CHARACTERS: Final = 40


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
        """The quantity ``raw`` spells; raises InvalidQuantityError naming the problem."""
        if isinstance(raw, bool):
            raise InvalidQuantityError(f"invalid quantity {raw!r}: must be a number or a string")
        if isinstance(raw, int):
            return cls(_in_range(Decimal(raw), raw))
        if isinstance(raw, float):
            if not math.isfinite(raw):
                raise InvalidQuantityError(f"invalid quantity {raw!r}: must be a finite number")
            return cls(_in_range(Decimal(repr(raw)), raw))
        if not isinstance(raw, str):
            raise InvalidQuantityError(f"invalid quantity {raw!r}: must be a number or a string")
        match = _PATTERN.fullmatch(raw)
        if not match:
            raise InvalidQuantityError(
                f"invalid quantity {_shown(raw)}: must be a number with an optional suffix "
                "(m, k, Ki, M, Mi, G, Gi, ... or an exponent such as e3), without spaces"
            )
        number = Decimal(match["number"])
        suffix = match["suffix"] or ""
        if suffix in _BINARY:
            return cls(_scaled(number, 1024, _BINARY[suffix], raw), Format.BINARY_SI)
        if suffix in _DECIMAL:
            return cls(_scaled(number, 10, _DECIMAL[suffix], raw), Format.DECIMAL_SI)
        exponent_digits = suffix[1:].lstrip("+-").lstrip("0")
        if len(exponent_digits) > len(str(2**63)):
            # apimachinery reads the exponent as a 64-bit integer and refuses a longer one.
            raise InvalidQuantityError(f"invalid quantity {_shown(raw)}: the exponent is too long")
        exponent = int(suffix[1:])
        return cls(_scaled(number, 10, exponent, raw), Format.DECIMAL_EXPONENT)

    @property
    def is_negative(self) -> bool:
        return self.value < 0

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(_EXACT.add(self.value, other.value), self.format)

    def times(self, factor: int) -> Quantity:
        return Quantity(_EXACT.multiply(self.value, Decimal(factor)), self.format)

    def __str__(self) -> str:
        return canonical(self)


def _scaled(number: Decimal, base: int, exponent: int, raw: object) -> Decimal:
    """``number * base**exponent``, refusing values out of range before computing them."""
    if number == 0:
        return Decimal(0)
    decimal_exponent = exponent if base == 10 else exponent * 3  # 1024 > 10**3
    magnitude = number.adjusted() + decimal_exponent
    if magnitude > _MAX_EXPONENT:
        raise _out_of_range(raw)
    if magnitude < _MIN_EXPONENT:
        # Far below a nano: the API server rounds it up to one nano.
        return Decimal(1).scaleb(-9).copy_sign(number)
    if base == 10:
        value = number.scaleb(exponent, _EXACT)
    else:
        value = _EXACT.multiply(number, Decimal(base**exponent))
    return _in_range(value, raw)


def _in_range(value: Decimal, raw: object) -> Decimal:
    if abs(value) > MAX_MAGNITUDE:
        raise _out_of_range(raw)
    return value


def _out_of_range(raw: object) -> InvalidQuantityError:
    return InvalidQuantityError(
        f"invalid quantity {_shown(raw)}: must be no more than {MAX_MAGNITUDE} in magnitude"
    )


def _shown(raw: object) -> str:
    """The value as an error quotes it, cut short: a quantity may be thousands of digits."""
    text = raw if isinstance(raw, str) else repr(raw)
    if len(text) > _SHOWN_CHARACTERS:
        text = text[:_SHOWN_CHARACTERS] + "..."
    return f'"{text}"' if isinstance(raw, str) else text


def canonical(quantity: Quantity) -> str:
    """The API server's canonical spelling of a quantity."""
    # Sub-nano precision is rounded up, as the API server does.
    value = quantity.value.quantize(_NANO, rounding=ROUND_CEILING, context=_EXACT)
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
    mantissa = int(value.scaleb(9, _EXACT))
    while mantissa % 1000 == 0 and exponent < 18:
        mantissa //= 1000
        exponent += 3
    if exponent_notation:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"


def format_resources(resources: dict[str, Quantity]) -> dict[str, str]:
    """Amounts as written into an object; a sum beyond the range is written as its bound.

    Each amount is in range, but a gang's total over many pods may not be; Kubernetes caps
    quantities at 2^63-1 and every scheduler reads them as 64-bit integers, so the cap is
    what the sum means to them.
    """
    return {name: canonical(_capped(amount)) for name, amount in sorted(resources.items())}


def _capped(amount: Quantity) -> Quantity:
    if abs(amount.value) <= MAX_MAGNITUDE:
        return amount
    return Quantity(Decimal(MAX_MAGNITUDE).copy_sign(amount.value), amount.format)
