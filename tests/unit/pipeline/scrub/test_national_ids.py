"""US ITIN and SSN, UK NHS number and NINO, Canadian SIN, Australian TFN and Korean RRN (`national`,
`identifiers`): the ways people write each, with and without the words that name them, and the near misses
that must stay as they are.

Valid numbers are drawn at random (seeded) and kept when python-stdnum accepts them (for the NINO, HMRC's
prefix rules); near misses are built from valid ones by breaking one rule (a check digit, a reserved range,
the length), by leaving out the name a bare run needs, or by naming the number as something else (an order,
an invoice). Each near miss is also chosen so that no other class could take it for what it is not (a
9-digit order number starting with 0 may be a valid phone in some region): what it tests is the id's rule.
The IBAN near misses are here too: IBAN-shaped strings that fail stdnum's check must stay whole.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from datetime import date, timedelta

import pytest
from stdnum import iban, luhn
from stdnum.au import tfn
from stdnum.ca import sin
from stdnum.gb import nhs
from stdnum.kr import rrn
from stdnum.us import itin, ssn

from pipeline.scrub import Policy, checksums, has_likely_pii, redact_pii, sanitize_text
from pipeline.scrub.phones import nanp_valid
from tests.unit.pipeline.scrub.test_tables import Labelled, misses, well_formed

Make = Callable[[random.Random], str]
_SEED = 31
_PER_CONTEXT = 3


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def _drawn(make: Make, keep: Callable[[str], bool]) -> Make:
    def draw(rng: random.Random) -> str:
        for _ in range(100_000):
            value = make(rng)
            if keep(value):
                return value
        raise AssertionError("no draw kept")

    return draw


def _spaced(value: str, sizes: tuple[int, ...], sep: str = " ") -> str:
    parts, at = [], 0
    for size in sizes:
        parts.append(value[at : at + size])
        at += size
    return sep.join(parts)


_ITIN = _drawn(lambda r: "9" + _digits(r, 2) + str(r.randint(70, 99)) + _digits(r, 4), itin.is_valid)
_SSN = _drawn(lambda r: _digits(r, 9), lambda v: ssn.is_valid(v) and not v.startswith("9"))
_NHS = _drawn(lambda r: _digits(r, 10), nhs.is_valid)
_SIN = _drawn(lambda r: _digits(r, 9), sin.is_valid)
_TFN = _drawn(lambda r: _digits(r, 9), tfn.is_valid)
_TFN8 = _drawn(lambda r: _digits(r, 8), tfn.is_valid)


def _birth(rng: random.Random) -> str:
    return (date(1940, 1, 1) + timedelta(days=rng.randrange(365 * 80))).strftime("%y%m%d")


_RRN = _drawn(lambda r: _birth(r) + r.choice("1256") + _digits(r, 6), rrn.is_valid)


def _nino(rng: random.Random) -> str:
    letters = "ABCEGHJKLMNOPRSTWXYZ"
    prefix = rng.choice(letters) + rng.choice(letters.replace("O", ""))
    value = prefix + _digits(rng, 6) + rng.choice("ABCD")
    return value if checksums.nino_valid(value) else _nino(rng)


def _dashed(sizes: tuple[int, ...], make: Make, sep: str = "-") -> Make:
    return lambda r: _spaced(make(r), sizes, sep)


# (label, how the id is written, contexts): `{}` is where it goes.
Form = tuple[str, Make, tuple[str, ...]]
_UNNAMED = ("{}", "on file: {}", "| {} |", "the number {} was given")
POSITIVE_FORMS: list[Form] = [
    # ITIN: its own shape in every separator, bare or oddly grouped beside its name.
    ("itin", _dashed((3, 2, 4), _ITIN), _UNNAMED),
    ("itin", _dashed((3, 2, 4), _ITIN, " "), _UNNAMED),
    ("itin", _dashed((3, 2, 4), _ITIN, "."), _UNNAMED),
    ("itin", _ITIN, ("ITIN {}", "itin: {}", "Individual Taxpayer Identification Number {}")),
    ("itin", _dashed((3, 6), _ITIN), ("ITIN {}", "taxpayer id {}")),
    ("itin", _dashed((5, 4), _ITIN), ("ITIN: {}",)),
    # SSN.
    ("ssn", _dashed((3, 2, 4), _SSN), _UNNAMED),
    ("ssn", _dashed((3, 2, 4), _SSN, " "), _UNNAMED),
    ("ssn", _dashed((3, 2, 4), _SSN, "."), _UNNAMED),
    ("ssn", _SSN, ("SSN {}", "social security number: {}", "SSN#{}", "{} is my SSN")),
    ("ssn", _dashed((3, 6), _SSN), ("SSN {}",)),
    ("ssn", _dashed((5, 4), _SSN), ("Social Security No. {}",)),
    ("ssn", lambda r: (v := _SSN(r))[:3] + "-" + v[3:5] + " " + v[5:], ("SSN: {}",)),
    # NHS number: spaced as the NHS prints it, or dashed; bare beside its name.
    ("nhs", _dashed((3, 3, 4), _NHS, " "), (*_UNNAMED, "NHS number: {}")),
    ("nhs", _dashed((3, 3, 4), _NHS), (*_UNNAMED, "NHS No. {}")),
    ("nhs", _NHS, ("NHS {}", "NHS number {}", "{} (NHS)", "National Health Service number: {}")),
    # SIN: dashed; spaced as the card prints it, or bare, beside its name.
    ("sin", _dashed((3, 3, 3), _SIN), (*_UNNAMED, "NAS {}")),
    ("sin", _dashed((3, 3, 3), _SIN, " "), ("SIN: {}", "Social Insurance Number {}", "{} (SIN)")),
    ("sin", _SIN, ("SIN {}", "social insurance number: {}")),
    # TFN: beside its name, spaced as the ATO prints it, bare, dashed, and the old 8-digit numbers.
    ("tfn", _dashed((3, 3, 3), _TFN, " "), ("TFN: {}", "tax file number {}", "my TFN is {}")),
    ("tfn", _TFN, ("TFN {}", "my tax file number is {}")),
    ("tfn", _dashed((3, 3, 3), _TFN), ("TFN {}",)),
    ("tfn", _dashed((3, 3, 2), _TFN8, " "), ("TFN: {}",)),
    # NINO: compact in any case; spaced as people write it; in lower case or dashed beside its name.
    ("nino", _nino, _UNNAMED),
    ("nino", lambda r: _nino(r).lower(), ("{}", "NINO {}")),
    ("nino", lambda r: _spaced(_nino(r), (2, 2, 2, 2, 1)), _UNNAMED),
    ("nino", lambda r: _spaced(_nino(r), (2, 6, 1)), _UNNAMED),
    ("nino", lambda r: _spaced(_nino(r), (8, 1)), _UNNAMED),
    ("nino", lambda r: _spaced(_nino(r).lower(), (2, 2, 2, 2, 1)), ("NINO {}", "national insurance no: {}")),
    ("nino", lambda r: _spaced(_nino(r), (2, 2, 2, 2, 1), "-"), ("NI number {}",)),
    # Korean RRN: dashed, and bare beside its name.
    ("rrn", _dashed((6, 7), _RRN), (*_UNNAMED, "RRN {}", "주민등록번호 {}")),
    ("rrn", _RRN, ("RRN {}", "주민등록번호: {}")),
]


def _rows(forms: list[Form], prefix: str, positive: bool, per_context: int = _PER_CONTEXT) -> list[Labelled]:
    rng = random.Random(_SEED)
    rows: dict[tuple[str, str], Labelled] = {}
    for label, make, contexts in forms:
        for context in contexts:
            for _ in range(per_context):
                written = make(rng)
                text = context.format(written)
                rows[(label, text)] = Labelled(f"{prefix}:{label}", text, (written,) if positive else ())
    return list(rows.values())


NATIONAL_ROWS = _rows(POSITIVE_FORMS, "national", positive=True)


# --- Near misses. ----------------------------------------------------------------------------------------------


def _broken(make: Make, valid: Callable[[str], bool], keep: Callable[[str], bool] = lambda v: True) -> Make:
    """A valid draw of `make` with its last digit changed until the check fails."""

    def draw(rng: random.Random) -> str:
        while True:
            value = make(rng)
            broken = value[:-1] + rng.choice(string.digits.replace(value[-1], ""))
            if not valid(broken) and keep(broken):
                return broken

    return draw


def _ssn_reserved(rng: random.Random) -> str:
    """Nine digits that break one of the SSN's rules and are no ITIN either."""
    area, group, serial = f"{rng.randint(1, 899):03d}", f"{rng.randint(1, 99):02d}", f"{rng.randint(1, 9999):04d}"
    broken = rng.choice(["000", "666", "9xx", "00", "0000", "advertised"])
    if broken in ("000", "666"):
        area = broken
    elif broken == "9xx":
        area, group = f"9{rng.randint(0, 99):02d}", rng.choice(["00", "12", "45", "66", "89", "93"])
    elif broken == "00":
        group = "00"
    elif broken == "0000":
        serial = "0000"
    else:
        return rng.choice(["078051120", "457555462", "219099999"])
    value = area + group + serial
    return value if area == "666" or area.startswith("9") or not ssn.is_valid(value) else _ssn_reserved(rng)


def _starts_1_to_9(value: str) -> bool:
    return not value.startswith("0")


def _not_a_phone(value: str) -> bool:
    return not nanp_valid(value) and _starts_1_to_9(value)


_BAD_SIN = _broken(_SIN, sin.is_valid, _starts_1_to_9)
_BAD_TFN = _broken(_TFN, tfn.is_valid, _starts_1_to_9)
_BAD_NHS = _broken(_NHS, nhs.is_valid, _not_a_phone)
_BAD_RRN = _broken(_RRN, rrn.is_valid)
_ORDER_SIN = _drawn(_SIN, lambda v: sin.is_valid(v) and _starts_1_to_9(v))
_ORDER_NHS = _drawn(_NHS, _not_a_phone)
_ROUND_SIN = _drawn(lambda r: str(r.randint(1, 7)) + _digits(r, 5) + "000", sin.is_valid)
_ORDER_WORDS = ("order {}", "Invoice no. {}", "ref #{}", "tracking: {}", "ticket {} closed")


def _iban(rng: random.Random) -> str:
    country, bban = rng.choice(
        [
            ("DE", lambda: _digits(rng, 18)),
            ("FR", lambda: _digits(rng, 23)),
            ("ES", lambda: _digits(rng, 20)),
            ("IT", lambda: rng.choice(string.ascii_uppercase) + _digits(rng, 22)),
            ("GB", lambda: "".join(rng.choice(string.ascii_uppercase) for _ in range(4)) + _digits(rng, 14)),
            ("NL", lambda: "".join(rng.choice(string.ascii_uppercase) for _ in range(4)) + _digits(rng, 10)),
            ("AT", lambda: _digits(rng, 16)),
            ("PL", lambda: _digits(rng, 24)),
        ]
    )
    body = bban()
    number = country + iban.calc_check_digits(country + "00" + body) + body
    return number if iban.is_valid(number) else _iban(rng)


def _iban_broken(rng: random.Random) -> str:
    """An IBAN with one rule broken: a digit changed, a character short or over, the check digits swapped."""
    value = _iban(rng)
    how = rng.choice(["digit", "short", "long", "swapped"])
    if how == "digit":
        at = rng.choice([i for i in range(4, len(value)) if value[i].isdigit()])
        value = value[:at] + rng.choice(string.digits.replace(value[at], "")) + value[at + 1 :]
    elif how == "short":
        value = value[:-1]
    elif how == "long":
        value += rng.choice(string.digits)
    else:
        value = value[:2] + value[3] + value[2] + value[4:]
    return value if not iban.is_valid(value) else _iban_broken(rng)


def _grouped(make: Make) -> Make:
    return lambda r: iban.format(make(r))


NEAR_MISS_FORMS: list[Form] = [
    # A check that fails, though the id's name stands beside it.
    ("sin_checksum", _dashed((3, 3, 3), _BAD_SIN, " "), ("SIN: {}", "{}")),
    ("sin_checksum", _dashed((3, 3, 3), _BAD_SIN), ("SIN {}",)),
    ("sin_checksum", _BAD_SIN, ("SIN {}",)),
    (
        "sin_first_digit",
        _dashed((3, 3, 3), _drawn(lambda r: r.choice("08") + _digits(r, 8), luhn.is_valid)),
        ("SIN {}", "SIN: {}"),
    ),
    ("tfn_checksum", _dashed((3, 3, 3), _BAD_TFN, " "), ("TFN: {}", "tax file number {}")),
    ("tfn_checksum", _BAD_TFN, ("TFN {}",)),
    ("nhs_checksum", _dashed((3, 3, 4), _BAD_NHS, " "), ("NHS number: {}", "{}")),
    ("nhs_checksum", _dashed((3, 3, 4), _BAD_NHS), ("NHS No. {}",)),
    ("nhs_checksum", _BAD_NHS, ("NHS {}",)),
    ("ssn_rules", _dashed((3, 2, 4), _ssn_reserved), ("{}", "SSN {}", "social security number {}")),
    ("ssn_rules", _dashed((3, 2, 4), _ssn_reserved, " "), ("{}", "SSN: {}")),
    ("ssn_rules", _dashed((3, 2, 4), _ssn_reserved, "."), ("{}",)),
    ("ssn_rules", _ssn_reserved, ("SSN {}",)),
    (
        "itin_range",
        _dashed((3, 2, 4), lambda r: "9" + _digits(r, 2) + r.choice(["65", "89", "93"]) + _digits(r, 4)),
        ("{}", "ITIN {}"),
    ),
    ("rrn_checksum", _dashed((6, 7), _BAD_RRN), ("{}", "RRN {}")),
    ("rrn_checksum", _BAD_RRN, ("RRN {}", "주민등록번호 {}")),
    (
        "nino_prefix",
        lambda r: _spaced(r.choice(["QQ", "BG", "GB", "NT", "DA", "AO"]) + _digits(r, 6) + "C", (2, 2, 2, 2, 1)),
        ("{}", "NINO {}"),
    ),
    ("nino_lower_unnamed", lambda r: _spaced(_nino(r).lower(), (2, 2, 2, 2, 1)), ("{}", "code {}")),
    # Valid numbers without the name a bare run needs.
    ("bare_unnamed", _SIN, ("id {} on file", "{}")),
    ("bare_unnamed", _TFN, ("id {} on file",)),
    ("bare_unnamed", _NHS, ("id {} on file", "{}")),
    ("bare_unnamed", _SSN, ("id {} on file",)),
    ("bare_unnamed", _ITIN, ("id {} on file",)),
    ("bare_unnamed", _TFN8, ("batch {} done",)),
    # Valid numbers in an id's shape, named as something else.
    ("order_number", _dashed((3, 3, 3), _ORDER_SIN), _ORDER_WORDS),
    ("order_number", _dashed((3, 3, 4), _ORDER_NHS, " "), _ORDER_WORDS),
    ("order_number", _dashed((3, 3, 4), _ORDER_NHS), _ORDER_WORDS),
    ("order_number", _dashed((3, 2, 4), _ITIN, " "), ("order {}", "Invoice no. {}")),
    # Three groups of three digits with spaces, unnamed: a quantity or a list, as often as an id.
    ("spaced_unnamed", _dashed((3, 3, 3), _SIN, " "), ("{}", "about {} rows", "sizes {}")),
    ("spaced_unnamed", _dashed((3, 3, 3), _TFN, " "), ("{}", "{} bytes")),
    ("spaced_unnamed", _dashed((3, 3, 3), _ROUND_SIN, " "), ("about {} rows",)),
    # The id's shape inside a list of numbers.
    ("in_a_list", _dashed((3, 3, 4), _ORDER_NHS, " "), ("sizes 12 {}", "{}, 64, 128")),
    ("in_a_list", _dashed((3, 3, 3), _ORDER_SIN), ("{} 42",)),
]

# IBAN-shaped strings that fail stdnum's check: kept whole, no card, Aadhaar or phone taken out of them.
IBAN_NEAR_MISS_FORMS: list[Form] = [
    ("iban_invalid", _grouped(_iban_broken), ("{}", "IBAN {}", "pay to {} today", "IBAN: {}")),
    ("iban_invalid", _iban_broken, ("{}", "IBAN {}", "account {} closed")),
    ("iban_extra_group", lambda r: iban.format(_iban(r)) + " " + _digits(r, r.randint(1, 3)), ("{}", "IBAN {}")),
]

NEAR_MISS_ROWS = _rows(NEAR_MISS_FORMS, "near_miss", positive=False, per_context=6) + _rows(
    IBAN_NEAR_MISS_FORMS, "near_miss", positive=False, per_context=20
)


def test_the_tables_are_well_formed() -> None:
    well_formed(NATIONAL_ROWS)
    well_formed(NEAR_MISS_ROWS)
    assert {r.label for r in NATIONAL_ROWS} == {
        f"national:{c}" for c in ("itin", "ssn", "nhs", "sin", "tfn", "nino", "rrn")
    }
    assert len(NEAR_MISS_ROWS) > 500


def test_every_written_id_is_redacted() -> None:
    assert misses(NATIONAL_ROWS) == []


def test_every_near_miss_is_left_alone() -> None:
    assert misses(NEAR_MISS_ROWS) == []


def test_the_spec_rules_are_unchanged_by_them() -> None:
    # Under safety.md's rules the SSN check is its own, so the advertised SSNs are still redacted there.
    spec = Policy.spec_compatible()
    assert sanitize_text("SSN 078-05-1120", spec).value == "SSN [REDACTED_PII_SSN]"
    assert sanitize_text("SSN 078-05-1120").value == "SSN 078-05-1120"
    assert sanitize_text("RRN 900101-1234567", spec).value == "RRN [REDACTED_PII_RRN]"
    assert sanitize_text("SIN 752 174 888", spec).value == "SIN 752 174 888"


# --- Which token wins, and what stays readable. ----------------------------------------------------------------

TOKENS = [
    ("SIN 752 174 888", "SIN [REDACTED_PII_SIN]"),
    ("752-174-888 on the form", "[REDACTED_PII_SIN] on the form"),
    # A SIN never starts with 0 or 8 (stdnum): this one is left to the other classes.
    ("SIN 046 454 286", "SIN 046 454 286"),
    # 123 456 782 passes both the SIN's Luhn and the TFN's check: the name decides, and without one the
    # dashed form is the SIN's, the spaced one nobody's (a list or a quantity as often).
    ("TFN 123 456 782", "TFN [REDACTED_PII_TFN]"),
    ("tax file number: 123-456-782", "tax file number: [REDACTED_PII_TFN]"),
    ("123-456-782", "[REDACTED_PII_SIN]"),
    ("123 456 782", "123 456 782"),
    ("ports 443 587 993, range 100 200 300", "ports 443 587 993, range 100 200 300"),
    ("NHS 592 841 3823", "NHS [REDACTED_PII_NHS]"),
    ("592 841 3823", "[REDACTED_PII_NHS]"),
    # 943 476 5919 passes the NHS check and is a valid North American number too: a phone, unless named.
    ("943 476 5919", "[REDACTED_PII_PHONE]"),
    ("NHS number 943 476 5919", "NHS number [REDACTED_PII_NHS]"),
    ("ITIN 912 70 1234 and 912.70.1234", "ITIN [REDACTED_PII_ITIN] and [REDACTED_PII_ITIN]"),
    ("SSN 123-456789", "SSN [REDACTED_PII_SSN]"),
    ("NINO ab-12-34-56-c", "NINO [REDACTED_PII_NINO]"),
    ("AB 123456 C and AB123456 C", "[REDACTED_PII_NINO] and [REDACTED_PII_NINO]"),
    # A valid North American number in the NHS shape is a phone, unless the NHS is named.
    ("call 415 555 2671", "call [REDACTED_PII_PHONE]"),
    # An SSN with a reserved area is neither an SSN nor a phone; the ITIN ranges are the ITIN's.
    ("SSN 078-05-1120 or 900-12-3456", "SSN 078-05-1120 or 900-12-3456"),
    ("912-70-1234", "[REDACTED_PII_ITIN]"),
    # A valid IBAN followed by a word, or a compact one by a number, is still found.
    ("IBAN GB82 WEST 1234 5698 7654 32 TRANSFER", "IBAN [REDACTED_PII_IBAN] TRANSFER"),
    ("IBAN DE89370400440532013000 100 EUR", "IBAN [REDACTED_PII_IBAN] 100 EUR"),
    ("IBAN DE89 3704 0044 0532 0130 00 1", "IBAN DE89 3704 0044 0532 0130 00 1"),
    ("AL47 2121 1009 0000 0002 3569 8742", "AL47 2121 1009 0000 0002 3569 8742"),
]


@pytest.mark.parametrize(("text", "expected"), TOKENS)
def test_the_class_that_takes_a_number(text: str, expected: str) -> None:
    assert redact_pii(text).value == expected


def test_a_kept_span_does_not_count_and_is_no_likely_pii() -> None:
    result = redact_pii("IBAN AL47 2121 1009 0000 0002 3569 8742")
    assert (result.value, result.report.pii_redactions) == ("IBAN AL47 2121 1009 0000 0002 3569 8742", 0)
    assert not has_likely_pii("AL47 2121 1009 0000 0002 3569 8742")
    assert has_likely_pii("ITIN 912 70 1234")


def test_a_kept_span_keeps_nothing_outside_it() -> None:
    text = "SSN 666-12-3456, card 4111 1111 1111 1111"
    assert redact_pii(text).value == "SSN 666-12-3456, card [REDACTED_PII_CREDIT_CARD]"
