"""Phone numbers (`phones`): validated with `phonenumbers`, so ids, timestamps, ranges and dates are not
phones, while spaced international numbers and national formats are.

The labelled table starts from libphonenumber's example number of each region and type, changes its last
digits at random (seeded) until it is still valid, and writes it the ways people do: international with
spaces, E.164, `00` instead of `+`, and the national format where it starts with a trunk `0` or is North
American (the formats claimed).
"""

from __future__ import annotations

import random

import phonenumbers
import pytest
from phonenumbers import PhoneNumberFormat, PhoneNumberType

from pipeline.scrub import Policy, redact_pii, sanitize_text
from pipeline.scrub.phones import NANP_REGION, TRUNK_REGIONS
from tests.unit.pipeline.scrub.test_tables import Labelled, misses, well_formed

SPEC = Policy.spec_compatible()
INTERNATIONAL_REGIONS = (
    *TRUNK_REGIONS, "US", "CA", "ES", "BR", "MX", "PL", "PT", "AR", "SG", "HK", "IL", "AE", "NG", "KE", "EG", "ID",
)  # fmt: skip
CONTEXTS = ("call me at {}", "Phone: {}", "{}", "| Ana Lima | {} |", "reach the desk on {}.", "tel {} (office)")


def _numbers(rng: random.Random, region: str) -> list[phonenumbers.PhoneNumber]:
    found = []
    for kind in (PhoneNumberType.FIXED_LINE, PhoneNumberType.MOBILE):
        example = phonenumbers.example_number_for_type(region, kind)
        if example is None:
            continue
        national = str(example.national_number)
        for _ in range(200):
            tail = "".join(rng.choice("0123456789") for _ in range(4))
            candidate = phonenumbers.parse(f"+{example.country_code}{national[:-4]}{tail}", None)
            if phonenumbers.is_valid_number(candidate):
                found.append(candidate)
                break
    return found


def _writings(number: phonenumbers.PhoneNumber, region: str) -> list[tuple[str, str]]:
    international = phonenumbers.format_number(number, PhoneNumberFormat.INTERNATIONAL)
    ways = [
        ("phone:international", international),
        ("phone:e164", phonenumbers.format_number(number, PhoneNumberFormat.E164)),
        ("phone:00", "00" + international[1:]),
    ]
    national = phonenumbers.format_number(number, PhoneNumberFormat.NATIONAL)
    if region in (NANP_REGION, "CA") or national.lstrip("(").startswith("0"):
        ways.append(("phone:national", national))
    return ways


def phone_rows(seed: int = 15) -> list[Labelled]:
    """The labelled table of phone numbers in each way of writing them, in several contexts."""
    rng = random.Random(seed)
    rows: dict[str, Labelled] = {}
    for region in INTERNATIONAL_REGIONS:
        for number in _numbers(rng, region):
            for label, written in _writings(number, region):
                for context in CONTEXTS:
                    text = context.format(written)
                    rows[text] = Labelled(label, text, (written.lstrip("("),))
    return list(rows.values())


PHONE_ROWS = phone_rows()

# Numbers that are not phones: ids, timestamps, ranges, dates, times, addresses, versions, invalid numbers.
NOT_PHONES = [
    "order 2503622437 shipped",
    "ts 1700000000000 ms",
    "epoch 1712345678",
    "ports 8000-8999 and 10000-20000",
    "pages 1200-1450",
    "released 2024-01-15, patched 15.01.2024 and 01/02/2024",
    "at 12:30:45.123",
    "host 192.168.178.100 and 10.0.0.0/16",
    "python 3.11.7, v1.2.3, 1.0.0-beta.2",
    "the list 20 0 50 50 70 100",
    "about 1 000 000 rows, 250 000 000 bytes",
    "555-123-4567 is not a number",
    "+1-555-555-0100",
    "123-456-7890",
    "id=4155552671",
    "abc4155552671",
    "sizes 4096 8192 16384 32768",
    "+123456 is too short",
    "call 12345",
    "0000000000",
]


def test_the_table_is_well_formed_and_wide() -> None:
    well_formed(PHONE_ROWS)
    assert {row.label for row in PHONE_ROWS} == {"phone:international", "phone:e164", "phone:00", "phone:national"}
    assert len(PHONE_ROWS) > 500


def test_every_phone_is_redacted() -> None:
    assert misses(PHONE_ROWS) == []


@pytest.mark.parametrize("text", NOT_PHONES)
def test_a_number_that_is_not_a_phone_is_left_alone(text: str) -> None:
    assert redact_pii(text).value == text


PHONES = [
    ("phone +44 20 7946 0958", "phone [REDACTED_PII_PHONE]"),  # the miss: spaced international
    ("call (415) 555-2671", "call [REDACTED_PII_PHONE]"),
    ("call 415-555-2671 or 415.555.2671", "call [REDACTED_PII_PHONE] or [REDACTED_PII_PHONE]"),
    # A letterhead's area code in parentheses before a dotted number (read so off a scanned report).
    ("notify us at (206) 555.0100 and", "notify us at [REDACTED_PII_PHONE] and"),
    ("tel:+14155552671", "tel:[REDACTED_PII_PHONE]"),
    ("call 4155552671", "call [REDACTED_PII_PHONE]"),  # bare, but a phone word stands before it
    ("Tel. 020 7946 0958", "Tel. [REDACTED_PII_PHONE]"),
    ("+44 20 7946 0958 12 items", "[REDACTED_PII_PHONE] 12 items"),  # a trailing group is given back
]


@pytest.mark.parametrize(("text", "expected"), PHONES)
def test_a_phone_is_redacted_whole(text: str, expected: str) -> None:
    assert redact_pii(text).value == expected


def test_the_spec_rules_miss_spaced_numbers_and_take_ids() -> None:
    assert sanitize_text("phone +44 20 7946 0958", SPEC).value == "phone +44 20 7946 0958"
    assert sanitize_text("order 4155552671 or 1 2", SPEC).value == "order [REDACTED_PII_PHONE] or 1 2"
    assert sanitize_text("order 4155552671 or 1 2").value == "order 4155552671 or 1 2"


def test_a_card_is_not_also_partly_a_phone() -> None:
    result = redact_pii("pay 4111 1111 1111 1111 now")
    assert (result.value, result.report.pii_redactions) == ("pay [REDACTED_PII_CREDIT_CARD] now", 1)
