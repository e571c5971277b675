"""`format_f32`: the shortest decimal form of a float32, written as the Rust implementation writes it.

Ids hash a learning's confidence in this form, so `0.8` and `0.800000011920929` (0.8 widened from
float32) must give the same bytes. The shortest digit string is found exactly with `Fraction`
against the float32 rounding interval (docs/spec/contract.md §6.3).
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from functools import lru_cache

_F32_MAX_BITS = 0x7F7FFFFF


def _f32_bits(x: float) -> int:
    try:
        packed = struct.pack("<f", x)
    except OverflowError:
        # Too large for float32: rounding to nearest gives infinity.
        return 0x7F800000 | (0x80000000 if x < 0 else 0)
    bits: int = struct.unpack("<I", packed)[0]
    return bits


def _bits_value(bits: int) -> Fraction:
    value: float = struct.unpack("<f", struct.pack("<I", bits))[0]
    return Fraction(value)


def _rounding_interval(bits: int) -> tuple[Fraction, Fraction, bool]:
    """The interval of reals that round to the positive float32 `bits`, and whether it is closed."""
    value = _bits_value(bits)
    below = _bits_value(bits - 1) if bits > 0 else -value
    above = _bits_value(bits + 1) if bits < _F32_MAX_BITS else 2 * value - below
    # Round-half-to-even: a tie goes to the float32 whose mantissa is even.
    return (value + below) / 2, (value + above) / 2, bits % 2 == 0


def _shortest_digits(bits: int) -> tuple[str, int]:
    """Digits (no leading or trailing zeros) and exponent `e` with value == int(digits) * 10**e."""
    value = _bits_value(bits)
    low, high, closed = _rounding_interval(bits)
    as_float = float(value)
    for precision in range(1, 10):
        mantissa, _, exp_text = f"{as_float:.{precision - 1}e}".partition("e")
        digits = int(mantissa.replace(".", ""))
        exponent = int(exp_text) - (precision - 1)
        inside = [
            d
            for d in (digits - 1, digits, digits + 1)
            if d > 0 and _inside(Fraction(d) * Fraction(10) ** exponent, low, high, closed)
        ]
        if inside:
            best = min(inside, key=lambda d: (abs(Fraction(d) * Fraction(10) ** exponent - value), d % 2))
            return _strip_zeros(best, exponent)
    raise AssertionError("a float32 always has a representation of at most 9 digits")


def _inside(candidate: Fraction, low: Fraction, high: Fraction, closed: bool) -> bool:
    return low <= candidate <= high if closed else low < candidate < high


def _strip_zeros(digits: int, exponent: int) -> tuple[str, int]:
    while digits % 10 == 0:
        digits //= 10
        exponent += 1
    return str(digits), exponent


def format_f32(x: float) -> str:
    """Round `x` to float32 and write its shortest round-tripping decimal form (`0.8`, `1e-7`, `12.5`)."""
    if math.isnan(x):
        # JSON has no NaN or infinities; serde_json writes them as null.
        return "null"
    return _format_bits(_f32_bits(x))


# Keyed by bits, not by the float: -0.0 == 0.0 would otherwise share a cache entry.
@lru_cache(maxsize=4096)
def _format_bits(bits: int) -> str:
    sign = "-" if bits & 0x80000000 else ""
    bits &= 0x7FFFFFFF
    if bits >= 0x7F800000:
        return "null"
    if bits == 0:
        return sign + "0.0"
    digits, exponent = _shortest_digits(bits)
    return sign + _layout(digits, exponent)


def _layout(digits: str, exponent: int) -> str:
    count = len(digits)
    point = count + exponent
    if exponent >= 0 and point <= 13:
        return digits + "0" * exponent + ".0"
    if 0 < point <= 13:
        return f"{digits[:point]}.{digits[point:]}"
    if -6 < point <= 0:
        return "0." + "0" * -point + digits
    if count == 1:
        return f"{digits}e{point - 1}"
    return f"{digits[0]}.{digits[1:]}e{point - 1}"
