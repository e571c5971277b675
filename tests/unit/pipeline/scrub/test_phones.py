"""Phone numbers (`phones`): validated with `phonenumbers`, so ids, timestamps, ranges and dates are not
phones, while spaced international numbers and national formats are.

The labelled table starts from libphonenumber's example number of each region and type, changes its last
digits at random (seeded) until it is still valid, and writes it the ways people do: international with
spaces, E.164, `00` instead of `+`, and the national format where it starts with a trunk `0` or is North
American (the formats claimed).

A second table holds the local writings of two regions outside those defaults, the Philippines and Turkey:
random valid numbers (seeded) in the national format, dashed, dotted, with the country code but no `+`,
without the trunk prefix where the text names the country, and as one run of digits after a phone word;
the region comes from the number's own shape or the text (`phones.REGION_HINTS`), or from `Policy.regions`.
"""

from __future__ import annotations

import random

import phonenumbers
import pytest
from phonenumbers import PhoneNumberFormat, PhoneNumberType
from stdnum.gb import nhs

from pipeline.scrub import Policy, redact_pii, sanitize_text
from pipeline.scrub.phones import NANP_REGION, TRUNK_REGIONS, nanp_valid
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


def _random_numbers(rng: random.Random, region: str, count: int) -> list[phonenumbers.PhoneNumber]:
    """Valid fixed-line and mobile numbers of the region, drawn digit by digit."""
    code, found = phonenumbers.country_code_for_region(region), []
    while len(found) < count:
        national = "".join(rng.choice("0123456789") for _ in range(rng.choice((9, 10))))
        number = phonenumbers.parse(f"+{code}{national}", None)
        kind = phonenumbers.number_type(number)
        if phonenumbers.is_valid_number(number) and phonenumbers.region_code_for_number(number) == region:
            found.extend([number] if kind in (PhoneNumberType.FIXED_LINE, PhoneNumberType.MOBILE) else [])
    return found


# The country named in the text, for the writings that drop the trunk prefix.
_NAMED = {"PH": ("Manila office: {}", "call our Philippines desk on {}"), "TR": ("İstanbul: {}", "Turkey hotline {}")}
_LOCAL_CONTEXTS = ("{}", "reach me at {} today", "| Ana Lima | {} |")
_LABELLED = ("Tel:{}", "GSM: {}", "cel {}", "numaram: {}", "Tel. No.{}")


def _local_writings(number: phonenumbers.PhoneNumber, region: str) -> list[tuple[str, tuple[str, ...]]]:
    national = phonenumbers.format_number(number, PhoneNumberFormat.NATIONAL)
    groups = national.replace("(", "").replace(")", "").split()
    tail = [groups[0].lstrip("0"), *groups[1:]]
    code = str(number.country_code)
    return [
        (national, _LOCAL_CONTEXTS),
        ("-".join(groups), _LOCAL_CONTEXTS),
        (".".join(groups), _LOCAL_CONTEXTS),
        (f"{code} " + " ".join(tail), _LOCAL_CONTEXTS),
        (f"(+{code}) " + " ".join(tail), _LOCAL_CONTEXTS),
        ("".join(groups), _LABELLED),
        (national, _LABELLED[:1]),
        (" ".join(tail), _NAMED[region]),
    ]


def local_rows(seed: int = 31) -> list[Labelled]:
    """The labelled table of Philippine and Turkish numbers as they are written there."""
    rng = random.Random(seed)
    rows: dict[str, Labelled] = {}
    for region in ("PH", "TR"):
        for number in _random_numbers(rng, region, 12):
            for written, contexts in _local_writings(number, region):
                for context in contexts:
                    text = context.format(written)
                    rows[text] = Labelled(f"phone:local_{region.lower()}", text, (written,))
    return list(rows.values())


PHONE_ROWS = phone_rows() + local_rows()

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
    assert {row.label for row in PHONE_ROWS} == {
        "phone:international",
        "phone:e164",
        "phone:00",
        "phone:national",
        "phone:local_ph",
        "phone:local_tr",
    }
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


# --- Regions: set in the policy, or told by the text. ---------------------------------------------------------


def _without_trunk(rng: random.Random, region: str) -> list[str]:
    """Ten-digit numbers of the region without their trunk prefix, grouped 3-3-4, that no default reading
    takes for a phone (not North American) or an id (not an NHS number)."""
    written = []
    for number in _random_numbers(rng, region, 60):
        digits = str(number.national_number)
        if len(digits) == 10 and not nanp_valid(digits) and not nhs.is_valid(digits):
            written.append(f"{digits[:3]} {digits[3:6]} {digits[6:]}")
    return written[:8]


@pytest.mark.parametrize("region", ["PH", "TR"])
def test_the_policy_regions_read_numbers_without_their_trunk_prefix(region: str) -> None:
    regional = Policy(regions=(region,))
    for written in _without_trunk(random.Random(7), region):
        text = f"office {written} (main line)"
        assert redact_pii(text).value == text
        assert redact_pii(text, regional).value == "office [REDACTED_PII_PHONE] (main line)"


LOCAL_PHONES = [
    # The number's own shape tells its region: a Philippine mobile, a Turkish mobile or landline.
    ("0998 123 4567", "[REDACTED_PII_PHONE]"),
    ("0998.123.4567", "[REDACTED_PII_PHONE]"),
    ("0532.123.45.67", "[REDACTED_PII_PHONE]"),
    ("(0212) 345 67 89", "[REDACTED_PII_PHONE]"),
    ("532 123 45 67", "[REDACTED_PII_PHONE]"),
    ("63 2 8123 4567", "[REDACTED_PII_PHONE]"),
    ("(+63) 917 123 4567", "[REDACTED_PII_PHONE]"),
    # The text names the country.
    ("Philippines: 2 8123 4567", "Philippines: [REDACTED_PII_PHONE]"),
    # A phone word labels the number, its `:` or `.` right before it.
    ("Tel:0532 123 45 67", "Tel:[REDACTED_PII_PHONE]"),
    ("Tel.No.0917 123 4567", "Tel.No.[REDACTED_PII_PHONE]"),
    ("GSM: 05321234567", "GSM: [REDACTED_PII_PHONE]"),
]


@pytest.mark.parametrize(("text", "expected"), LOCAL_PHONES)
def test_a_local_number_is_read_in_its_region(text: str, expected: str) -> None:
    assert redact_pii(text).value == expected


NOT_LOCAL_PHONES = [
    "ref 09171234567",  # one run of digits, no phone word: not written as a phone
    "id 05321234567 in Turkey",
    "order 2503622437 shipped to Manila",
    "Philippines 2024-01-15, version 2.8.1234.4567",
    "a roast turkey for 8 123 456 people",
    "hotel:0532 123 45 67",  # `hotel` is no phone word: the `:` joins the number to it
    "v:0532 123 45 67",
    "GB82 WEST 1234 5698 7654 33",
]


@pytest.mark.parametrize("text", NOT_LOCAL_PHONES)
def test_a_number_not_written_as_a_local_phone_is_left_alone(text: str) -> None:
    assert redact_pii(text).value == text


def test_the_spec_rules_ignore_the_regions() -> None:
    spec = Policy(rules=Policy.spec_compatible().rules, regions=("TR",))
    assert sanitize_text("office 532 123 45 67", spec).value == "office 532 123 45 67"
