"""The PII classes of the extended rules: safety.md's classes with their misses fixed, then phones through
`phonenumbers` and national ids through `python-stdnum`.

What changes against docs/spec/safety.md §6.4:

- Credit cards: a match ends on a digit, so the space after a card stays (`card [REDACTED_...] now`);
  a card is printed with four digits together at least, which the gate asks of the text.
- CUIT/CUIL: stdnum's check, which also accepts the check digit 9 that AFIP gives when the remainder
  leaves none (safety.md refuses those).
- IBAN: stdnum checks the country's length and format as well as mod 97. A candidate that fails is
  shortened to the longest prefix that passes only where what it leaves is a separate word: a capitalised
  word after the IBAN (`... 7654 32 TRANSFER`), or anything after a compact IBAN; a grouped IBAN with a
  digit group too many is too long, not an IBAN and a number. One that fails under a known IBAN country
  is kept whole: no card, Aadhaar or phone is taken out of its groups. Groups are separated by spaces or
  tabs, never a line break.
- Aadhaar: colon-grouped (`2341:2341:2346`) and bare 12-digit runs count, the bare ones Verhoeff-checked
  and, under `Policy.corroborated()`, only beside an Aadhaar keyword.
- DNI and NIE: hyphenated (`12345678-Z`, `X-1234567-L`) and dotted (`12.345.678-Z`) forms.
- NINO: spaced as people write it (`AB 12 34 56 C`, `AB 123456 C`, upper case only, so prose is not taken
  for one), and in any case or with dashes beside its name ("NINO", "National Insurance"); HMRC's prefix
  rules (python-stdnum has no NINO module).
- SSN: stdnum's rules (no area 000, 666 or 9xx, no group 00 or serial 0000, not the advertised numbers);
  dotted and spaced (`123.45.6789`, `123 45 6789`), and bare or oddly grouped beside "SSN" (`national`).
  An SSN-shaped number that fails and is no ITIN is kept whole, so it is not taken for a phone.
- Korean RRN: stdnum's check (birth date, place of birth, check digit), dashed or undashed (undashed under
  `Policy.corroborated()` beside a keyword too); foreigners' 5-8 are in. A dashed one with a valid birth
  date that fails is kept whole, so it is not taken for a card.
- Phones: one validated class (`phones`) replaces E.164 and NANP.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from stdnum import iban, numdb
from stdnum.ar import cuit
from stdnum.kr import rrn
from stdnum.us import itin, ssn

from pipeline.scrub import checksums
from pipeline.scrub.cards import card_passes
from pipeline.scrub.classes import (
    PII_CLASSES,
    CandidateCheck,
    ClassTable,
    PiiClass,
    format_only,
    on_text,
    pii_class,
)
from pipeline.scrub.naming import digits_valid, keyword_pattern, near, needles, stdnum_valid
from pipeline.scrub.national import NATIONAL_CLASSES
from pipeline.scrub.phones import CANDIDATE, HINT_TAIL, phone_span
from pipeline.scrub.report import BareCardGate, Policy

Span = tuple[int, int]
_SPEC = {c.name: c for c in PII_CLASSES}
_SEPARATORS = re.compile(r"[\s.\-:]")
_iban_valid = stdnum_valid(iban)
_IBAN_COUNTRIES = numdb.get("iban")
_rrn_valid = digits_valid(rrn)
_ssn_valid = digits_valid(ssn)
_itin_valid = digits_valid(itin)


def _compact(check: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda text: check(_SEPARATORS.sub("", text))


def _leaves_a_word(view: str, start: int, last: int, end: int) -> bool:
    """Whether cutting the candidate `view[start:end]` at `last` leaves a separate word: a compact IBAN's
    rest, or a capitalised word of two letters or more."""
    if not any(c.isspace() for c in view[start:last]):
        return True
    word = view[last:end].split(maxsplit=1)[0]
    return len(word) >= 2 and word.isalpha()


def iban_span(view: str, start: int, end: int, _policy: Policy) -> Span | None:
    """The longest valid IBAN the candidate starts with, ending at a group boundary before a separate word."""
    positions = [i for i in range(start, end) if not view[i].isspace()]
    for count in range(len(positions), 14, -1):
        last = positions[count - 1] + 1
        if last < len(view) and view[last].isalnum():
            continue  # the middle of a group
        if count < len(positions) and not _leaves_a_word(view, start, last, end):
            continue
        if _iban_valid("".join(view[i] for i in positions[:count])):
            return start, last
    return None


def _iban_country(view: str, start: int, _end: int, _policy: Policy) -> bool:
    """The candidate starts with the code of a country that issues IBANs."""
    return bool(_IBAN_COUNTRIES.info(view[start : start + 2])[0][1])


def _no_itin(view: str, start: int, end: int, _policy: Policy) -> bool:
    return not _itin_valid(view[start:end])


def _rrn_dated(view: str, start: int, end: int, _policy: Policy) -> bool:
    """The candidate starts with a valid birth date: it is written as an RRN."""
    digits = "".join(str(d) for d in checksums.digits_of(view[start:end]))
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


def _named(keywords: tuple[str, ...]) -> CandidateCheck:
    keyword = keyword_pattern(keywords)
    return lambda view, start, end, _policy: near(keyword, view, start, end)


_AADHAAR_WORDS = ("aadhaar", "aadhar", "आधार", "uidai", "uid")
_RRN_WORDS = ("rrn", "주민등록번호", "주민번호", "주민등록", "resident registration")
_NINO_WORDS = ("nino", "national insurance", "ni number", "ni no", "ni#", "insurance number")
_NINO_NEEDLES = needles(_NINO_WORDS)
_NINO_KEYWORD = keyword_pattern(_NINO_WORDS)
_NINO_HINT = r"(?i:[0-9][ -]?[0-9]{2}[ -]?[0-9]{2}[ -]?[A-D])"  # both NINO classes' hint: one tail in the union


def _nino_named(view: str, start: int, end: int, _policy: Policy) -> bool:
    """A NINO in any case and with dashes, beside its name."""
    return checksums.nino_valid(_SEPARATORS.sub("", view[start:end])) and near(_NINO_KEYWORD, view, start, end)


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
        shield=_iban_country,
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
        r"(?i:\b[A-Z]{2}[0-9]{6}[A-D]\b)|\b[A-Z]{2} ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]\b",
        lambda f: f.digits >= 6 and f.has_letter(),
        _NINO_HINT,
        on_text(_compact(checksums.nino_valid)),
        "NINO",
    ),
    pii_class(
        "nino_keyword",
        r"(?i)\b[A-Z]{2}[ -]?[0-9]{2}[ -]?[0-9]{2}[ -]?[0-9]{2}[ -]?[A-D]\b",
        lambda f: f.digits >= 6 and f.has_letter(),
        _NINO_HINT,
        _nino_named,
        "NINO",
        late_gate=lambda f: f.has_any(_NINO_NEEDLES),
    ),
    pii_class(
        "ssn",
        r"\b[0-9]{3}([-. ])[0-9]{2}\1[0-9]{4}\b",
        lambda f: f.digits >= 9 and f.run >= 4 and (f.has("-") or f.has(".") or f.has(" ")),
        r"[0-9]{2}[-. ][0-9]{2}[-. ][0-9]{4}",
        on_text(_ssn_valid),
        "SSN",
        shield=_no_itin,
    ),
    pii_class(
        "rrn",
        r"\b[0-9]{6}-[1-8][0-9]{6}\b",
        lambda f: f.run >= 6 and f.digits >= 13 and f.has("-"),
        r"[0-9]{5}-[1-8][0-9]{6}",
        on_text(_rrn_valid),
        "RRN",
        shield=_rrn_dated,
    ),
    pii_class(
        "rrn_bare",
        r"\b[0-9]{6}[1-8][0-9]{6}\b",
        lambda f: f.run >= 13,
        r"[0-9]{12}",
        _bare_needs_keyword(_rrn_valid, _RRN_WORDS),
        "RRN",
        bare=True,
        shield=_named(_RRN_WORDS),
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
    {
        "iban",
        "credit_card",
        "aadhaar_grouped",
        "nino",
        "nino_keyword",
        "rfc",
        "pan_in",
        "fi_hetu",
        "fr_nir",
        "it_cf",
        "se_pnr",
    }
)
_UNION_TAILS = (HINT_TAIL, *sorted({c.hint_tail for c in EXTENDED_CLASSES if c.name in _NOT_COVERED_BY_PHONE}))
EXTENDED_TABLE = ClassTable.of(EXTENDED_CLASSES, alone=frozenset({"phone"}), min_run=2, union_tails=_UNION_TAILS)
