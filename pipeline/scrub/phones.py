"""Phone numbers, validated with `phonenumbers` (Google's libphonenumber metadata).

safety.md's two shapes (E.164 without spaces, NANP) miss every spaced international number and every
national format outside North America, and take ids, timestamps and ranges for phones. Here a candidate
is a run of 7 to 15 digits with light separators; it is a phone only when libphonenumber says the number
is valid (a real country code, area code and length), and, without an international prefix, only when
it is written like a phone (three or more digit groups, an area code in parentheses, or a trunk `0` and
a group after it) or a phone word stands before it ("tel", "call", "mobile", "GSM"), even as a label
glued to it (`Tel:0532 123 45 67`). So a bare 10-digit id, a 13-digit timestamp, `1000-2000`, a date, an
IP address or a version number is left alone.

A national number is read as its digits say: one that starts with the trunk prefix `0` under the regions
that dial one (`020 7946 0958` in Britain, `06 12 34 56 78` in France, `030 123456` in Germany...), any
other as a North American number. Trying every region for every number would make nearly any grouped
digits valid somewhere (`555-123-4567` is a valid number in seven of them), so a number without an
international prefix that is neither is not a phone here: a Spanish `612 34 56 78` needs its `+34`.
Parsing costs tens of microseconds, so it runs only on candidates that pass the cheap shape checks.

A number that fails so is tried again under the regions the text comes from: those of `Policy.regions`,
and those a region hint finds near it (the country or its main cities named, or national numbers written
as only that region writes them: a Philippine mobile `0917 123 4567`, a Turkish `0 532 123 45 67` or
`(0212) 345 67 89`, the country code without its `+`). Under such a region a number may also drop its
trunk prefix (`532 123 45 67`) or be written with dots (`0917.123.4567`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
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
_KEYWORD_WORDS = (
    r"tel|t[ée]l[ée]phone|telephone|phone|phones|telefon|telefone|tel[ée]fono|telepono|mobile|mobil|m[óo]vil|cell"
    r"|cellphone|cel|celular|cellular|call|fax|whatsapp|viber|sms|contact|ph|mob|handy|hotline|landline|gsm"
    r"|numara(?:m|m[ıi]z|s[ıi])?|cep ?(?:tel|telefonu|no)"
)
_KEYWORD = re.compile(rf"(?i)(?<![a-z])(?:{_KEYWORD_WORDS})(?![a-z])|☎|📞|電話|电话|手机|전화")
# A phone word as the label right before a number ("Tel:", "Tel. No.", "phone=", "Mobile#"): then the `:`, `.`,
# `#` or `=` before the number ends the label instead of joining the number to a token before it.
_LABEL = re.compile(rf"(?i)(?<![a-z])(?:{_KEYWORD_WORDS})(?:[\s.:#=-]|no|nr|num)*$")
_LABEL_WINDOW = 24
_LABEL_ENDS = frozenset(".:#=-")
_KEYWORD_WINDOW = 32
_DIGIT_GROUP = re.compile(r"[0-9]+")
_DATE = re.compile(r"[0-9]{4}[-./][0-9]{1,2}[-./][0-9]{1,2}|[0-9]{1,2}[-./][0-9]{1,2}[-./][0-9]{2,4}")
# North American numbers written with dots, the area code dotted too or in parentheses (`(206) 555.0100`, as a
# letterhead prints it), and the French pairs.
_DOTTED_PHONE = re.compile(r"(?:[0-9]{3}\.|\([0-9]{3}\) ?)[0-9]{3}\.[0-9]{4}|[0-9]{2}(?:\.[0-9]{2}){4}")
_THOUSANDS = re.compile(r"[0-9]{1,3}(?:[ .,][0-9]{3})+")
_BEFORE_REFUSED = frozenset("_/.#-+$@&=\\")
_AFTER_CONTINUES = frozenset(".-:/,")


@dataclass(frozen=True)
class RegionHint:
    """What tells that the numbers of a text are a region's: the country or its main cities named (`names`,
    case-sensitive, so "turkey" the bird does not count), or a national number written as only that region
    writes one (`shapes`)."""

    region: str
    names: re.Pattern[str]
    shapes: re.Pattern[str]


REGION_HINTS = (
    RegionHint(
        "PH",
        re.compile(
            r"\b(?:Philippines?|PHILIPPINES|Pilipinas|Filipin[oa]s?|Manila|Cebu|Davao|Makati|Quezon City|Pasig)\b"
        ),
        re.compile(
            r"(?<![0-9])09[0-9]{2}[ .-]?[0-9]{3}[ .-]?[0-9]{4}(?![0-9])"  # a mobile, 0917 123 4567
            r"|(?<![0-9])\(?02\)?[ .-]?[2-8][0-9]{3}[ .-]?[0-9]{4}(?![0-9])"  # Metro Manila, (02) 8123 4567
            r"|(?<![0-9+])\(?63\)?[ .-]?\(?[2-9][0-9]{0,2}\)?[ .-]?[0-9]{3,4}[ .-]?[0-9]{4}(?![0-9])"  # 63 without +
        ),
    ),
    RegionHint(
        "TR",
        re.compile(
            r"\b(?:Turkey|TURKEY|T[üu]rkiye|TÜRKİYE|Turkish|T[üu]rk|[İI]stanbul|Ankara|[İI]zmir|Antalya|Bursa)\b"
        ),
        re.compile(
            r"(?<![0-9])0[ .-]?\(?5[0-9]{2}\)?[ .-]?[0-9]{3}[ .-]?[0-9]{2}[ .-]?[0-9]{2}(?![0-9])"  # 0 532 123 45 67
            r"|(?<![0-9])\(?5[0-9]{2}\)?[ .-][0-9]{3}[ .-][0-9]{2}[ .-][0-9]{2}(?![0-9])"  # 532 123 45 67
            r"|(?<![0-9])\(?0[2-4][0-9]{2}\)?[ .-]?[0-9]{3}[ .-]?[0-9]{2}[ .-]?[0-9]{2}(?![0-9])"  # (0212) 345 67 89
            r"|(?<![0-9])\(?[2-4][0-9]{2}\)?[ .-][0-9]{3}[ .-][0-9]{2}[ .-][0-9]{2}(?![0-9])"  # 212 345 67 89
            # The country code without its +: 90 532 123 45 67.
            r"|(?<![0-9+])\(?90\)?[ .-]\(?[2-5][0-9]{2}\)?[ .-]?[0-9]{3}[ .-]?[0-9]{2}[ .-]?[0-9]{2}(?![0-9])"
        ),
    ),
)
"""The regions a text may show itself to be from, beyond `Policy.regions`."""
_HINT_BEFORE = 1000
_HINT_AFTER = 300


def _valid(number: str, region: str | None) -> bool:
    try:
        return phonenumbers.is_valid_number(phonenumbers.parse(number, region))
    except phonenumbers.NumberParseException:
        return False


def nanp_valid(text: str) -> bool:
    """Whether `text` is a valid North American number, as the phone class reads one."""
    return _valid(text, NANP_REGION)


def _labelled(view: str, start: int) -> bool:
    """A phone word labels the number: `Tel:`, `Tel. No.`, `phone=`."""
    return _LABEL.search(view, max(0, start - _LABEL_WINDOW), start) is not None


def _bounded(view: str, start: int, end: int) -> bool:
    """A candidate must not be the middle of a longer token, path, version or number."""
    before = view[start - 1] if start else " "
    if before.isalnum():
        return False
    refused = before in _BEFORE_REFUSED or (before == ":" and view[start] != "+")
    if refused and not (before in _LABEL_ENDS and _labelled(view, start)):
        return False
    after = view[end : end + 2]
    return not (after[:1].isalnum() or after[:1] == "_" or (after[:1] in _AFTER_CONTINUES and after[1:].isdigit()))


class _Shape(Enum):
    PLAIN = "plain"
    REFUSED = "refused"  # a date, a path or fraction, a thousands grouping
    DOTTED = "dotted"  # dots where neither North America nor France puts them: a phone only under a region


def _shape(candidate: str, international: bool) -> _Shape:
    """Dates, dotted numbers that are not phones, thousands, fractions and ranges."""
    if _DATE.fullmatch(candidate) or (not international and "/" in candidate):
        return _Shape.REFUSED
    if not international and _THOUSANDS.fullmatch(candidate) is not None:
        return _Shape.REFUSED
    if "." in candidate and not international and _DOTTED_PHONE.fullmatch(candidate) is None:
        return _Shape.DOTTED
    return _Shape.PLAIN


def _keyword_before(view: str, start: int) -> bool:
    return _KEYWORD.search(view, max(0, start - _KEYWORD_WINDOW), start) is not None


def _international(candidate: str) -> str | None:
    """The number in `+digits` form when it is written with an international prefix."""
    body = candidate.lstrip("(")
    if body.startswith("+"):
        return "+" + "".join(_DIGIT_GROUP.findall(body))
    if body.startswith("00"):
        return "+" + "".join(_DIGIT_GROUP.findall(body))[2:]
    return None


def _national_valid(candidate: str) -> bool:
    first = _DIGIT_GROUP.search(candidate)
    if first is not None and first.group().startswith("0"):
        return any(_valid(candidate, region) for region in TRUNK_REGIONS)
    return _valid(candidate, NANP_REGION)


def _regions_near(view: str, start: int, end: int, policy: Policy) -> tuple[str, ...]:
    """The regions a national number at `view[start:end]` may also be read in: the policy's, then those
    whose hints stand near it (the number's own shape included)."""
    found = [region.upper() for region in policy.regions]
    lo, hi = max(0, start - _HINT_BEFORE), min(len(view), end + _HINT_AFTER)
    for hint in REGION_HINTS:
        if hint.region not in found and (hint.shapes.search(view, lo, hi) or hint.names.search(view, lo, hi)):
            found.append(hint.region)
    return tuple(found)


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


def _judge(view: str, start: int, end: int, policy: Policy) -> _Verdict:
    candidate = view[start:end]
    international = _international(candidate)
    shape = _shape(candidate, international is not None)
    if shape is _Shape.REFUSED:
        return _Verdict.NOT_A_PHONE
    groups = [len(g) for g in _DIGIT_GROUP.findall(candidate)]
    digits = sum(groups)
    if digits < 7:
        return _Verdict.NOT_A_PHONE
    if digits > 15:
        return _Verdict.INVALID
    if international is not None:
        return _Verdict.PHONE if _valid(international, None) else _Verdict.INVALID
    if 1 in groups[1:] and not any(hint.shapes.fullmatch(candidate) for hint in REGION_HINTS):
        return _Verdict.NOT_A_PHONE  # "speed 20 0 50 50 70": a single digit inside is a list of numbers
    # Three groups, an area code in parentheses, or a trunk prefix and a group (`030 123456`).
    phone_like = len(groups) >= 3 or candidate.startswith("(") or (len(groups) == 2 and candidate.startswith("0"))
    if not (phone_like or _keyword_before(view, start)):
        return _Verdict.NOT_A_PHONE
    if shape is _Shape.PLAIN and _national_valid(candidate):
        return _Verdict.PHONE
    regions = _regions_near(view, start, end, policy)
    return _Verdict.PHONE if any(_valid(candidate, region) for region in regions) else _Verdict.INVALID


def phone_span(view: str, start: int, end: int, policy: Policy) -> Span | None:
    """The phone number in the candidate `view[start:end]`, or None; a trailing group that makes the
    number invalid (`+44 20 7946 0958 12`) is given back, and `(+63) 917 123 4567` keeps its parenthesis."""
    if view[end - 1] == ")" and view.count("(", start, end) < view.count(")", start, end):
        end -= 1
    if start and view[start - 1] == "(" and view[start] == "+" and ")" in view[start:end]:
        start -= 1
    for _ in range(3):
        if not _bounded(view, start, end):
            return None
        verdict = _judge(view, start, end, policy)
        if verdict is _Verdict.PHONE:
            return start, end
        shorter = _shorter(view, start, end) if verdict is _Verdict.INVALID else None
        if shorter is None:
            return None
        end = shorter
    return None
