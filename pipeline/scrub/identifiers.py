"""The PII classes of the extended rules: safety.md's classes with their misses fixed, then phones through
`phonenumbers` and national ids through `python-stdnum`.

What changes against docs/spec/safety.md §6.4:

- Credit cards: a match ends on a digit, so the space after a card stays (`card [REDACTED_...] now`);
  a card is printed with four digits together at least, which the gate asks of the text.
- CUIT/CUIL: stdnum's check, which also accepts the check digit 9 that AFIP gives when the remainder
  leaves none (safety.md refuses those).
- IBAN: a candidate that fails is shortened to the longest prefix that passes (stdnum checks the
  country's length and format as well as mod 97), so a capitalised word after an IBAN no longer hides it;
  groups are separated by spaces or tabs, never a line break.
- Aadhaar: colon-grouped (`2341:2341:2346`) and bare 12-digit runs count, the bare ones Verhoeff-checked
  and, under `Policy.corroborated()`, only beside an Aadhaar keyword.
- DNI and NIE: hyphenated (`12345678-Z`, `X-1234567-L`) and dotted (`12.345.678-Z`) forms.
- NINO: spaced (`AB 12 34 56 C`, upper case only, so prose is not taken for one).
- SSN: dotted and spaced (`123.45.6789`, `123 45 6789`), and bare nine digits beside "SSN".
- Korean RRN: a valid birth date is required; undashed (`9001011234567`) counts when stdnum validates it
  (date and check digit; under `Policy.corroborated()` beside a keyword too); foreigners' 5-8 are in.
- Phones: one validated class (`phones`) replaces E.164 and NANP.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from stdnum import iban
from stdnum.ar import cuit
from stdnum.kr import rrn

from pipeline.scrub import checksums
from pipeline.scrub.cards import card_passes
from pipeline.scrub.classes import (
    PII_CLASSES,
    ClassTable,
    PiiClass,
    format_only,
    on_text,
    pii_class,
)
from pipeline.scrub.national import NATIONAL_CLASSES, keyword_pattern, near, stdnum_valid
from pipeline.scrub.phones import CANDIDATE, HINT_TAIL, phone_span
from pipeline.scrub.report import BareCardGate, Policy

Span = tuple[int, int]
_SPEC = {c.name: c for c in PII_CLASSES}
_SEPARATORS = re.compile(r"[\s.\-:]")
_iban_valid = stdnum_valid(iban)
_rrn_valid = stdnum_valid(rrn)


def _compact(check: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda text: check(_SEPARATORS.sub("", text))


def iban_span(view: str, start: int, end: int, _policy: Policy) -> Span | None:
    """The longest valid IBAN the candidate starts with, ending at a group boundary."""
    positions = [i for i in range(start, end) if not view[i].isspace()]
    for count in range(len(positions), 14, -1):
        last = positions[count - 1] + 1
        if last < len(view) and view[last].isalnum():
            continue  # the middle of a group
        if _iban_valid("".join(view[i] for i in positions[:count])):
            return start, last
    return None


def _rrn_date_valid(text: str) -> bool:
    digits = "".join(str(d) for d in checksums.digits_of(text))
    try:
        rrn.get_birth_date(digits)
    except Exception:  # stdnum's InvalidComponent, or a bug on odd input: not a date either way
        return False
    return True


def _bare_needs_keyword(valid: Callable[[str], bool], keywords: tuple[str, ...]) -> Callable[..., bool]:
    """A bare-run check that, under `CORROBORATED`, also wants one of the keywords nearby."""
    keyword = keyword_pattern(keywords)

    def check(view: str, start: int, end: int, policy: Policy) -> bool:
        if not valid(view[start:end]):
            return False
        return policy.bare_card is BareCardGate.LUHN_ONLY or near(keyword, view, start, end)

    return check


_AADHAAR_WORDS = ("aadhaar", "aadhar", "आधार", "uidai", "uid")
_RRN_WORDS = ("rrn", "주민등록번호", "resident registration")

EXTENDED_CLASSES: tuple[PiiClass, ...] = (
    # safety.md's gates, narrowed by the digits the identifier holds: the same matches, fewer scans.
    replace(_SPEC["cpf_formatted"], gate=lambda f: f.digits >= 11 and f.run >= 3 and f.has(".") and f.has("-")),
    replace(
        _SPEC["cnpj_formatted"],
        gate=lambda f: f.digits >= 14 and f.run >= 4 and f.has(".") and f.has("/") and f.has("-"),
    ),
    pii_class(
        "cuit",
        r"\b[0-9]{2}-[0-9]{8}-[0-9]\b",
        lambda f: f.run >= 8 and f.has("-"),
        r"[0-9]-[0-9]{8}-[0-9]",
        on_text(stdnum_valid(cuit)),
        "CUIT",
    ),
    pii_class(
        "iban",
        r"\b[A-Z]{2}[0-9]{2}(?:[ \t]?[A-Z0-9]){11,30}\b",
        lambda f: f.digits >= 6 and f.has_upper(),
        r"(?<=[A-Z]{2}[0-9])[0-9](?:[ \t]?[A-Z0-9]){11}",
        format_only,
        "IBAN",
        narrow=iban_span,
    ),
    pii_class(
        "credit_card",
        r"\b(?:[0-9][\s\-]?){12,18}[0-9]\b",
        lambda f: f.digits >= 13 and f.run >= 4,
        r"[\s\-]?(?:[0-9][\s\-]?){12}",
        card_passes,
        "CREDIT_CARD",
        bare=True,
    ),
    _SPEC["cnpj_bare"],
    _SPEC["cpf_bare"],
    pii_class(
        "aadhaar_grouped",
        r"\b[0-9]{4}[\s\-:][0-9]{4}[\s\-:][0-9]{4}\b",
        lambda f: f.digits >= 12 and f.run >= 4 and (f.has_space() or f.has("-") or f.has(":")),
        r"[0-9]{3}[\s\-:][0-9]{4}[\s\-:][0-9]{4}",
        on_text(checksums.verhoeff_valid),
        "AADHAAR",
    ),
    # A keyword class's twelve digits make a run of twelve, cheaper to ask of the facts than the keyword.
    replace(_SPEC["aadhaar_keyword"], gate=lambda f: f.run >= 12, late_gate=lambda f: f.aadhaar_keyword()),
    pii_class(
        "aadhaar_bare",
        r"\b[2-9][0-9]{11}\b",
        lambda f: f.run >= 12,
        r"[0-9]{11}",
        _bare_needs_keyword(checksums.verhoeff_valid, _AADHAAR_WORDS),
        "AADHAAR",
        bare=True,
    ),
    pii_class(
        "dni",
        r"(?i)\b[0-9]{8}-?[A-Z]\b|\b[0-9]{2}\.[0-9]{3}\.[0-9]{3}-?[A-Z]\b",
        lambda f: f.digits >= 8 and f.run >= 3 and f.has_letter(),
        r"(?i:[0-9]{7}-?[A-Z]|\.[0-9]{3}\.[0-9]{3}-?[A-Z])",
        on_text(_compact(checksums.dni_valid)),
        "DNI",
    ),
    pii_class(
        "nie",
        r"(?i)\b[XYZ]-?[0-9]{7}-?[A-Z]\b",
        lambda f: f.has_nie_letter() and f.run >= 7 and f.has_letter(),
        r"(?i:[0-9]{6}-?[A-Z])",
        on_text(_compact(checksums.nie_valid)),
        "DNI",
    ),
    pii_class(
        "nino",
        r"(?i:\b[A-Z]{2}[0-9]{6}[A-D]\b)|\b[A-Z]{2} [0-9]{2} ?[0-9]{2} ?[0-9]{2} [A-D]\b",
        lambda f: f.digits >= 6 and f.has_letter(),
        r"(?i:[0-9] ?[0-9]{2} ?[0-9]{2} ?[A-D])",
        on_text(_compact(checksums.nino_valid)),
        "NINO",
    ),
    pii_class(
        "ssn",
        r"\b[0-9]{3}([-. ])[0-9]{2}\1[0-9]{4}\b",
        lambda f: f.digits >= 9 and f.run >= 4 and (f.has("-") or f.has(".") or f.has(" ")),
        r"[0-9]{2}[-. ][0-9]{2}[-. ][0-9]{4}",
        on_text(checksums.ssn_valid),
        "SSN",
    ),
    pii_class(
        "rrn",
        r"\b[0-9]{6}-[1-8][0-9]{6}\b",
        lambda f: f.run >= 6 and f.digits >= 13 and f.has("-"),
        r"[0-9]{5}-[1-8][0-9]{6}",
        on_text(_rrn_date_valid),
        "RRN",
    ),
    pii_class(
        "rrn_bare",
        r"\b[0-9]{6}[1-8][0-9]{6}\b",
        lambda f: f.run >= 13,
        r"[0-9]{12}",
        _bare_needs_keyword(_rrn_valid, _RRN_WORDS),
        "RRN",
        bare=True,
    ),
    _SPEC["rfc"],
    _SPEC["pan_in"],
    *NATIONAL_CLASSES,
    pii_class(
        "phone", CANDIDATE, lambda f: f.digits >= 7, HINT_TAIL, format_only, "PHONE", bare=True, narrow=phone_span
    ),
    replace(_SPEC["my_number"], gate=lambda f: f.run >= 12, late_gate=lambda f: f.my_number_keyword()),
)

# Every extended class holds two digits side by side (the card's shape with a separator after every digit
# is the one exception, and no issuer prints a number that way).
# The phone's hint (seven digits, at most two of ` ().-/` between two) is implied by most classes' hints;
# the union is it and the hints it does not cover.
_NOT_COVERED_BY_PHONE = frozenset(
    {"iban", "credit_card", "aadhaar_grouped", "nino", "rfc", "pan_in", "fi_hetu", "fr_nir", "it_cf", "se_pnr"}
)
_UNION_TAILS = (HINT_TAIL, *sorted({c.hint_tail for c in EXTENDED_CLASSES if c.name in _NOT_COVERED_BY_PHONE}))
EXTENDED_TABLE = ClassTable.of(EXTENDED_CLASSES, alone=frozenset({"phone"}), min_run=2, union_tails=_UNION_TAILS)
