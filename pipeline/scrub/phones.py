"""Phone numbers, validated with `phonenumbers` (Google's libphonenumber metadata).

safety.md's two shapes (E.164 without spaces, NANP) miss every spaced international number and every
national format outside North America, and take ids, timestamps and ranges for phones. Here a candidate
is a run of 7 to 15 digits with light separators; it is a phone only when libphonenumber says the number
is valid (a real country code, area code and length), and, without an international prefix, only when
it is written like a phone (three or more digit groups, an area code in parentheses, or a trunk `0` and
a group after it) or a phone word
stands before it ("tel", "call", "mobile"). So a bare 10-digit id, a 13-digit timestamp, `1000-2000`, a
date, an IP address or a version number is left alone.

A national number is read as its digits say: one that starts with the trunk prefix `0` under the regions
that dial one (`020 7946 0958` in Britain, `06 12 34 56 78` in France, `030 123456` in Germany...), any
other as a North American number. Trying every region for every number would make nearly any grouped
digits valid somewhere (`555-123-4567` is a valid number in seven of them), so a number without an
international prefix that is neither is not a phone here: a Spanish `612 34 56 78` needs its `+34`.
Parsing costs tens of microseconds, so it runs only on candidates that pass the cheap shape checks.
"""

from __future__ import annotations

import re
from enum import Enum

import phonenumbers

from pipeline.scrub.report import Policy

Span = tuple[int, int]

CANDIDATE = r"[+(]?[0-9](?:[ ().\-/]{0,2}[0-9]){6,16}\)?"
"""A phone candidate in the matching view: digits with at most two separators between them."""

HINT_TAIL = r"(?:[ ().\-/]{0,2}[0-9]){6}"
"""After a first digit, what every candidate holds: six more digits, closely spaced."""

NANP_REGION = "US"
TRUNK_REGIONS = (
    "GB",
    "DE",
    "FR",
    "IT",
    "NL",
    "BE",
    "AT",
    "CH",
    "SE",
    "IE",
    "AU",
    "NZ",
    "IN",
    "JP",
    "KR",
    "CN",
    "TR",
    "ZA",
)
"""Regions whose national numbers start with the trunk prefix 0 (Italy keeps its 0 inside the number)."""
_KEYWORD = re.compile(
    r"(?i)(?<![a-z])(?:tel|t[ée]l[ée]phone|telephone|phone|phones|telefon|telefone|tel[ée]fono|mobile|mobil|m[óo]vil"
    r"|cell|cellphone|call|fax|whatsapp|sms|contact|ph|mob|handy|hotline)(?![a-z])|☎|📞|電話|电话|手机|전화"
)
_KEYWORD_WINDOW = 32
_DIGIT_GROUP = re.compile(r"[0-9]+")
_DATE = re.compile(r"[0-9]{4}[-./][0-9]{1,2}[-./][0-9]{1,2}|[0-9]{1,2}[-./][0-9]{1,2}[-./][0-9]{2,4}")
# North American numbers written with dots, the area code dotted too or in parentheses (`(206) 555.0100`, as a
# letterhead prints it), and the French pairs.
_DOTTED_PHONE = re.compile(r"(?:[0-9]{3}\.|\([0-9]{3}\) ?)[0-9]{3}\.[0-9]{4}|[0-9]{2}(?:\.[0-9]{2}){4}")
_THOUSANDS = re.compile(r"[0-9]{1,3}(?:[ .,][0-9]{3})+")
_BEFORE_REFUSED = frozenset("_/.#-+$@&=\\")
_AFTER_CONTINUES = frozenset(".-:/,")


def _valid(number: str, region: str | None) -> bool:
    try:
        return phonenumbers.is_valid_number(phonenumbers.parse(number, region))
    except phonenumbers.NumberParseException:
        return False


def _bounded(view: str, start: int, end: int) -> bool:
    """A candidate must not be the middle of a longer token, path, version or number."""
    before = view[start - 1] if start else " "
    if before.isalnum() or before in _BEFORE_REFUSED or (before == ":" and view[start] != "+"):
        return False
    after = view[end : end + 2]
    return not (after[:1].isalnum() or after[:1] == "_" or (after[:1] in _AFTER_CONTINUES and after[1:].isdigit()))


def _shape_refused(candidate: str, international: bool) -> bool:
    """Dates, dotted numbers that are not phones, thousands, fractions and ranges."""
    if _DATE.fullmatch(candidate) or (not international and "/" in candidate):
        return True
    if "." in candidate and not international and _DOTTED_PHONE.fullmatch(candidate) is None:
        return True
    return not international and _THOUSANDS.fullmatch(candidate) is not None


def _keyword_before(view: str, start: int) -> bool:
    return _KEYWORD.search(view, max(0, start - _KEYWORD_WINDOW), start) is not None


def _international(candidate: str) -> str | None:
    """The number in `+digits` form when it is written with an international prefix."""
    if candidate.startswith("+"):
        return "+" + "".join(_DIGIT_GROUP.findall(candidate))
    if candidate.startswith("00"):
        return "+" + "".join(_DIGIT_GROUP.findall(candidate))[2:]
    return None


def _national_valid(candidate: str) -> bool:
    first = _DIGIT_GROUP.search(candidate)
    if first is not None and first.group().startswith("0"):
        return any(_valid(candidate, region) for region in TRUNK_REGIONS)
    return _valid(candidate, NANP_REGION)


def _shorter(view: str, start: int, end: int) -> int | None:
    """The end of the candidate without its last digit group, when seven digits remain."""
    cut = max(view.rfind(sep, start, end) for sep in " -.)")
    if cut <= start:
        return None
    new_end = cut
    while new_end > start and not view[new_end - 1].isdigit():
        new_end -= 1
    digits = sum(c.isdigit() for c in view[start:new_end])
    return new_end if digits >= 7 else None


class _Verdict(Enum):
    PHONE = "phone"
    NOT_A_PHONE = "not a phone"  # by its shape: a shorter candidate would not be one either
    INVALID = "invalid"  # a number libphonenumber refuses: without its last group it may be one


def _judge(view: str, start: int, end: int) -> _Verdict:
    candidate = view[start:end]
    international = _international(candidate)
    if _shape_refused(candidate, international is not None):
        return _Verdict.NOT_A_PHONE
    groups = [len(g) for g in _DIGIT_GROUP.findall(candidate)]
    digits = sum(groups)
    if digits < 7:
        return _Verdict.NOT_A_PHONE
    if digits > 15:
        return _Verdict.INVALID
    if international is not None:
        return _Verdict.PHONE if _valid(international, None) else _Verdict.INVALID
    if 1 in groups[1:]:
        return _Verdict.NOT_A_PHONE  # "speed 20 0 50 50 70": a single digit inside is a list of numbers
    # Three groups, an area code in parentheses, or a trunk prefix and a group (`030 123456`).
    phone_like = len(groups) >= 3 or candidate.startswith("(") or (len(groups) == 2 and candidate.startswith("0"))
    if not (phone_like or _keyword_before(view, start)):
        return _Verdict.NOT_A_PHONE
    return _Verdict.PHONE if _national_valid(candidate) else _Verdict.INVALID


def phone_span(view: str, start: int, end: int, _policy: Policy) -> Span | None:
    """The phone number in the candidate `view[start:end]`, or None; a trailing group that makes the
    number invalid (`+44 20 7946 0958 12`) is given back."""
    if view[end - 1] == ")" and view.count("(", start, end) < view.count(")", start, end):
        end -= 1
    for _ in range(3):
        if not _bounded(view, start, end):
            return None
        verdict = _judge(view, start, end)
        if verdict is _Verdict.PHONE:
            return start, end
        shorter = _shorter(view, start, end) if verdict is _Verdict.INVALID else None
        if shorter is None:
            return None
        end = shorter
    return None
