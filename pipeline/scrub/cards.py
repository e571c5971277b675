"""Credit cards: Luhn, then the policy for bare digit runs (docs/spec/safety.md §6.6)."""

from __future__ import annotations

import re

from pipeline.scrub.checksums import luhn_valid
from pipeline.scrub.report import BareCardGate, Policy

CC_KEYWORD = re.compile(
    r"(?i)(?:^|[\W_])(?:card|credit|debit|visa|mastercard|amex|american\s?express|discover|jcb|diners|unionpay"
    r"|hipercard|rupay|cvv|cvc|cc|pan|tarjeta|cart[aã]o|carte|karte|карта|карты|карту|картой|карте|кредитка)(?:[\W_]|\Z)"
    r"|(?i:cardnumber|creditcard|ccnum|cardno|pannumber|カード|信用卡|卡号|银行卡|카드)"
)

# The keyword window is measured in UTF-8 bytes, as the Rust implementation measures its offsets.
KEYWORD_WINDOW_BYTES = 64
_NON_DIGIT_EDGES = re.compile(r"\A[^0-9]+|[^0-9]+\Z")
_ASCII_DIGITS = re.compile(r"[0-9]+")


def _prefix_value(digits: str, length: int) -> int:
    return int(digits[:length])


def _plausible_5(p2: int, p3: int, p4: int, n: int) -> bool:
    return (
        (51 <= p2 <= 55 and n == 16)
        or ((p4 in (5018, 5020, 5038, 5893) or 56 <= p2 <= 58) and 13 <= n <= 19)
        or ((p4 in (5041, 5066, 5067) or p3 == 508) and n == 16)
    )


def _plausible_3(p2: int, p3: int, p4: int, n: int) -> bool:
    return (
        (p2 in (34, 37) and n == 15)
        or (3528 <= p4 <= 3589 and 16 <= n <= 19)
        or ((p2 == 36 or 300 <= p3 <= 305 or p4 == 3095 or p2 in (38, 39)) and 14 <= n <= 19)
    )


def _plausible_6(p2: int, p3: int, p4: int, n: int) -> bool:
    return (
        ((p4 == 6011 or 644 <= p3 <= 649 or p2 == 65) and n in (16, 19))
        or (p2 == 62 and 16 <= n <= 19)
        or (p4 in (6304, 6759, 6761, 6762, 6763) and 13 <= n <= 19)
        or ((p2 == 60 or p4 in (6277, 6362, 6363, 6062)) and n == 16)
    )


def plausible_issuer(digits: str) -> bool:
    """True when a run of 13-19 ASCII digits starts with an issuer prefix at a length that issuer uses."""
    n = len(digits)
    if not 13 <= n <= 19:
        return False
    p2, p3, p4 = (_prefix_value(digits, k) for k in (2, 3, 4))
    first = digits[0]
    if first == "4":
        return n in (13, 16, 19)
    if first == "2":
        return (2221 <= p4 <= 2720 or 2200 <= p4 <= 2204) and n == 16
    if first == "8":
        return p2 in (81, 82) and n == 16
    checks = {"5": _plausible_5, "3": _plausible_3, "6": _plausible_6}
    check = checks.get(first)
    return check is not None and check(p2, p3, p4, n)


def _utf8_len(char: str) -> int:
    # By code point, so a lone surrogate (3 bytes under surrogatepass) cannot raise.
    code = ord(char)
    return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4


def keyword_window(view: str, start: int, end: int) -> str:
    """The view around `[start, end)`, 64 UTF-8 bytes each side, widened outward to whole characters."""
    left, taken = start, 0
    while left > 0 and taken < KEYWORD_WINDOW_BYTES:
        left -= 1
        taken += _utf8_len(view[left])
    right, taken = end, 0
    while right < len(view) and taken < KEYWORD_WINDOW_BYTES:
        taken += _utf8_len(view[right])
        right += 1
    return view[left:right]


def card_passes(view: str, start: int, end: int, policy: Policy) -> bool:
    """The gate of a card candidate `view[start:end]`: Luhn, then the policy for bare runs."""
    candidate = view[start:end]
    if not luhn_valid(candidate):
        return False
    trimmed = _NON_DIGIT_EDGES.sub("", candidate)
    if not _ASCII_DIGITS.fullmatch(trimmed) or policy.bare_card is BareCardGate.LUHN_ONLY:
        return True  # separated numbers are cards under every policy
    return plausible_issuer(trimmed) or CC_KEYWORD.search(keyword_window(view, start, end)) is not None
