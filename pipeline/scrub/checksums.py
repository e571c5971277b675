"""The checksum and structural gates of the PII classes (docs/spec/safety.md §6.5).

Each gate takes the matched text of the normalised view and reads only its ASCII digits and letters, so a
candidate that merely looks like an identifier is left alone. None raises on any input.
"""

from __future__ import annotations

import re

_DIGIT = re.compile(r"[0-9]")
_WHITESPACE = re.compile(r"\s+")

_VERHOEFF_D = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
    (1, 2, 3, 4, 0, 6, 7, 8, 9, 5),
    (2, 3, 4, 0, 1, 7, 8, 9, 5, 6),
    (3, 4, 0, 1, 2, 8, 9, 5, 6, 7),
    (4, 0, 1, 2, 3, 9, 5, 6, 7, 8),
    (5, 9, 8, 7, 6, 0, 4, 3, 2, 1),
    (6, 5, 9, 8, 7, 1, 0, 4, 3, 2),
    (7, 6, 5, 9, 8, 2, 1, 0, 4, 3),
    (8, 7, 6, 5, 9, 3, 2, 1, 0, 4),
    (9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
)
_VERHOEFF_P = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
    (1, 5, 7, 6, 2, 8, 3, 0, 9, 4),
    (5, 8, 0, 3, 7, 9, 6, 1, 4, 2),
    (8, 9, 1, 6, 0, 4, 3, 5, 2, 7),
    (9, 4, 5, 3, 1, 2, 6, 8, 7, 0),
    (4, 2, 8, 6, 5, 7, 3, 9, 0, 1),
    (2, 7, 9, 3, 8, 0, 6, 4, 1, 5),
    (7, 0, 4, 6, 9, 1, 3, 2, 5, 8),
)
_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"
_NIE_PREFIXES = {"X": 0, "Y": 1, "Z": 2}
_NINO_BAD_FIRST = frozenset("DFIQUV")
_NINO_BAD_SECOND = frozenset("DFIOQUV")
_NINO_BAD_PAIRS = frozenset({"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"})


def digits_of(text: str) -> list[int]:
    """The ASCII digits of `text`, in order."""
    return [int(d) for d in _DIGIT.findall(text)]


def _weighted_check(digits: list[int], weights: tuple[int, ...]) -> int:
    """The mod-11 check digit shared by CPF and CNPJ: 0 when the remainder is below 2, else 11 - r."""
    remainder = sum(d * w for d, w in zip(digits, weights, strict=False)) % 11
    return 0 if remainder < 2 else 11 - remainder


def cpf_valid(text: str) -> bool:
    d = digits_of(text)
    if len(d) != 11 or len(set(d)) == 1:
        return False
    first = sum(d[i] * (10 - i) for i in range(9)) * 10 % 11 % 10
    second = sum(d[i] * (11 - i) for i in range(10)) * 10 % 11 % 10
    return first == d[9] and second == d[10]


def cnpj_valid(text: str) -> bool:
    d = digits_of(text)
    if len(d) != 14 or len(set(d)) == 1:
        return False
    first = _weighted_check(d[:12], (5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2))
    second = _weighted_check(d[:13], (6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2))
    return first == d[12] and second == d[13]


def cuit_valid(text: str) -> bool:
    d = digits_of(text)
    if len(d) != 11:
        return False
    remainder = sum(x * w for x, w in zip(d, (5, 4, 3, 2, 7, 6, 5, 4, 3, 2), strict=False)) % 11
    if remainder == 1:
        return False
    return (0 if remainder == 0 else 11 - remainder) == d[10]


def luhn_valid(text: str) -> bool:
    d = digits_of(text)
    if not 13 <= len(d) <= 19:
        return False
    total = 0
    for position, digit in enumerate(reversed(d)):
        doubled = digit * 2 if position % 2 else digit
        total += doubled - 9 if doubled > 9 else doubled
    return total % 10 == 0


def _iban_value(char: str) -> int | None:
    """A character's value in the IBAN number: digits as themselves, ASCII letters as 10..35."""
    if "0" <= char <= "9":
        return ord(char) - ord("0")
    if "A" <= char <= "Z" or "a" <= char <= "z":
        return ord(char.upper()) - ord("A") + 10
    return None


def iban_valid(text: str) -> bool:
    compact = _WHITESPACE.sub("", text)
    if not 15 <= len(compact) <= 34:
        return False
    head = compact[:4]
    if not (head[:2].isascii() and head[:2].isalpha() and head[2:].isascii() and head[2:].isdigit()):
        return False
    remainder = 0
    # Incremental mod 97: the number has up to 68 digits, and the spec computes it this way.
    for char in compact[4:] + head:
        value = _iban_value(char)
        if value is None:
            return False
        remainder = (remainder * (100 if value > 9 else 10) + value) % 97
    return remainder == 1


def verhoeff_valid(text: str) -> bool:
    d = digits_of(text)
    if len(d) != 12 or d[0] < 2:
        return False
    check = 0
    for i, x in enumerate(reversed(d)):
        check = _VERHOEFF_D[check][_VERHOEFF_P[i % 8][x]]
    return check == 0


def _ascii_upper(text: str) -> str | None:
    """The text upper-cased, or None when it holds a non-ASCII character (which `(?i)` may have matched)."""
    return text.upper() if text.isascii() else None


def dni_valid(text: str) -> bool:
    upper = _ascii_upper(text)
    if upper is None or len(upper) != 9 or not upper[:8].isdigit():
        return False
    return _DNI_LETTERS[int(upper[:8]) % 23] == upper[8]


def nie_valid(text: str) -> bool:
    upper = _ascii_upper(text)
    if upper is None or len(upper) != 9 or upper[0] not in _NIE_PREFIXES or not upper[1:8].isdigit():
        return False
    number = _NIE_PREFIXES[upper[0]] * 10_000_000 + int(upper[1:8])
    return _DNI_LETTERS[number % 23] == upper[8]


def nino_valid(text: str) -> bool:
    upper = _ascii_upper(text)
    if upper is None or len(upper) < 2:
        return False
    return upper[0] not in _NINO_BAD_FIRST and upper[1] not in _NINO_BAD_SECOND and upper[:2] not in _NINO_BAD_PAIRS


def ssn_valid(text: str) -> bool:
    d = digits_of(text)
    if len(d) != 9:
        return False
    area = d[0] * 100 + d[1] * 10 + d[2]
    group = d[3] * 10 + d[4]
    serial = d[5] * 1000 + d[6] * 100 + d[7] * 10 + d[8]
    return area not in (0, 666) and area < 900 and group != 0 and serial != 0
