"""Stage 4, personal identifiers: every class, its checksum gate and its text-wide gate
(docs/spec/safety.md §6.3-6.5)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pipeline.scrub import Policy, checksums, has_likely_pii, redact_pii, sanitize_text
from pipeline.scrub.classes import PII_CLASSES
from pipeline.scrub.view import TextFacts

SPEC = Policy.spec_compatible()

# The spec's table of classes: name, token, and whether `has_likely_pii` leaves it out.
CLASS_TABLE = [
    ("cpf_formatted", "[REDACTED_PII_CPF]", False),
    ("cnpj_formatted", "[REDACTED_PII_CNPJ]", False),
    ("cuit", "[REDACTED_PII_CUIT]", False),
    ("iban", "[REDACTED_PII_IBAN]", False),
    ("credit_card", "[REDACTED_PII_CREDIT_CARD]", True),
    ("cnpj_bare", "[REDACTED_PII_CNPJ]", True),
    ("cpf_bare", "[REDACTED_PII_CPF]", True),
    ("aadhaar_grouped", "[REDACTED_PII_AADHAAR]", False),
    ("aadhaar_keyword", "[REDACTED_PII_AADHAAR]", False),
    ("dni", "[REDACTED_PII_DNI]", False),
    ("nie", "[REDACTED_PII_DNI]", False),
    ("nino", "[REDACTED_PII_NINO]", False),
    ("ssn", "[REDACTED_PII_SSN]", False),
    ("rrn", "[REDACTED_PII_RRN]", False),
    ("rfc", "[REDACTED_PII_RFC]", False),
    ("pan_in", "[REDACTED_PII_PAN_IN]", False),
    ("phone_e164", "[REDACTED_PII_PHONE]", True),
    ("phone_nanp", "[REDACTED_PII_PHONE]", True),
    ("my_number", "[REDACTED_PII_MYNUMBER]", False),
]

# (input, output of the PII stage under the default policy), grouped by class.
PII_VECTORS = [
    # CPF: check digits, and never eleven equal digits.
    ("cpf 123.456.789-09 ok", "cpf [REDACTED_PII_CPF] ok"),
    ("cpf 111.444.777-35", "cpf [REDACTED_PII_CPF]"),
    ("cpf 111.444.777-53", "cpf 111.444.777-53"),
    ("cpf 111.111.111-11", "cpf 111.111.111-11"),
    ("x1529.982.247-25", "x1529.982.247-25"),
    ("cpf 12345678909", "cpf [REDACTED_PII_CPF]"),
    ("cpf 00000000000", "cpf 00000000000"),
    # CNPJ, formatted and bare.
    ("cnpj 12.345.678/0001-95", "cnpj [REDACTED_PII_CNPJ]"),
    ("cnpj 12.345.678/0001-59", "cnpj 12.345.678/0001-59"),
    ("cnpj 00.000.000/0000-00", "cnpj 00.000.000/0000-00"),
    ("cnpj 12345678000195", "cnpj [REDACTED_PII_CNPJ]"),
    # CUIT: remainder 0 gives check 0, remainder 1 has no valid check digit.
    ("cuit 20-12345670-0", "cuit [REDACTED_PII_CUIT]"),
    ("cuit 20-12345671-9", "cuit [REDACTED_PII_CUIT]"),
    ("cuit 20-00000000-1", "cuit [REDACTED_PII_CUIT]"),
    ("cuit 20-12345600-0", "cuit 20-12345600-0"),
    ("cuit 20-12345600-1", "cuit 20-12345600-1"),
    # IBAN: mod 97, case-sensitive, grouped or not.
    ("iban FR14 2004 1010 0505 0001 3M02 606", "iban [REDACTED_PII_IBAN]"),
    ("iban NL91ABNA0417164300 ok", "iban [REDACTED_PII_IBAN] ok"),
    ("iban nl91abna0417164300", "iban nl91abna0417164300"),
    ("iban NL91ABNA0417164301", "iban NL91ABNA0417164301"),
    # Credit cards: Luhn over 13 to 19 digits, with single spaces or hyphens anywhere.
    # One separator after the last digit is taken when a word follows, as in vector 43.
    ("visa 4111-1111-1111-1111 end", "visa [REDACTED_PII_CREDIT_CARD]end"),
    ("visa 4111-1111-1111-1111.", "visa [REDACTED_PII_CREDIT_CARD]."),
    ("amex 3782 822463 10005", "amex [REDACTED_PII_CREDIT_CARD]"),
    ("mc 5555555555554444.", "mc [REDACTED_PII_CREDIT_CARD]."),
    ("x 4111  1111 1111 1111", "x 4111  1111 1111 1111"),
    ("x 41111111111111111111", "x 41111111111111111111"),
    # Aadhaar: Verhoeff over 12 digits whose first is at least 2.
    ("id 1234 1234 1234", "id 1234 1234 1234"),
    ("id 2341-2341-2346", "id [REDACTED_PII_AADHAAR]"),
    ("UID: 234123412346", "UID: [REDACTED_PII_AADHAAR]"),
    ("uidai#234123412346 ok", "uidai#[REDACTED_PII_AADHAAR] ok"),
    ("आधार 234123412346", "आधार [REDACTED_PII_AADHAAR]"),
    ("aadhar no.234123412346", "aadhar no.[REDACTED_PII_AADHAAR]"),
    ("aadhaar 123412341234", "aadhaar 123412341234"),
    # Spain: DNI and NIE check letters; the letter may be lower case, but must be ASCII.
    ("dni 87654321x", "dni [REDACTED_PII_DNI]"),
    ("dni 00000000T", "dni [REDACTED_PII_DNI]"),
    ("nie Y1234567X", "nie [REDACTED_PII_DNI]"),
    ("nie z1234567r", "nie [REDACTED_PII_DNI]"),
    ("nie X1234567T", "nie X1234567T"),
    ("dni 87654321\u212a", "dni 87654321\u212a"),
    # UK NINO prefix rules.
    ("nino CE123456D", "nino [REDACTED_PII_NINO]"),
    ("nino DA123456A", "nino DA123456A"),
    ("nino AO123456A", "nino AO123456A"),
    ("nino GB123456A", "nino GB123456A"),
    ("nino ZZ123456A", "nino ZZ123456A"),
    ("nino AB123456E", "nino AB123456E"),
    # US SSN reserved ranges.
    ("ssn 899-12-3456", "ssn [REDACTED_PII_SSN]"),
    ("ssn 900-12-3456", "ssn 900-12-3456"),
    ("ssn 123-00-4567", "ssn 123-00-4567"),
    ("ssn 123-45-0000", "ssn 123-45-0000"),
    # Korea RRN and Mexico RFC and India PAN: format only.
    ("rrn 900101-2234567", "rrn [REDACTED_PII_RRN]"),
    ("rrn 900101-5234567", "rrn 900101-5234567"),
    ("rfc ÑA&5610311A1", "rfc [REDACTED_PII_RFC]"),
    ("rfc GOD561231GR8", "rfc [REDACTED_PII_RFC]"),
    ("pan abcde1234f", "pan [REDACTED_PII_PAN_IN]"),
    # Case-insensitive [A-Z] also takes ſ (U+017F) and K (U+212A), as in Rust (docs/spec/safety.md §10); Python's `re`
    # also takes İ (U+0130) and ı (U+0131). Format-only classes keep them; checked classes refuse non-ASCII.
    ("pan ſbcde1234f", "pan [REDACTED_PII_PAN_IN]"),
    ("pan \u212abcde1234f", "pan [REDACTED_PII_PAN_IN]"),
    ("pan \u0131bcde1234f", "pan [REDACTED_PII_PAN_IN]"),
    ("nino ſB123456C", "nino ſB123456C"),
    # Phones.
    ("tel +4930123456", "tel [REDACTED_PII_PHONE]"),
    ("tel +123456", "tel +123456"),
    ("tel 415.555.2671", "tel [REDACTED_PII_PHONE]"),
    ("tel 1 (415) 555 2671", "tel [REDACTED_PII_PHONE]"),
    # `\b` cannot stand before `+`, so the pattern starts at the country code and leaves the `+`.
    ("tel +1 415 555 2671", "tel +[REDACTED_PII_PHONE]"),
    ("tel 415-055-2671", "tel 415-055-2671"),
    # Japan My Number: the keyword is kept, and the English one is case-sensitive.
    ("個人番号は123456789012", "個人番号は[REDACTED_PII_MYNUMBER]"),
    ("MyNumber: 123456789012", "MyNumber: [REDACTED_PII_MYNUMBER]"),
    ("my number 123456789012", "my number 123456789012"),
]


@pytest.mark.parametrize(("name", "token", "bare"), CLASS_TABLE)
def test_class_table(name: str, token: str, bare: bool) -> None:
    pii_class = next(c for c in PII_CLASSES if c.name == name)
    assert (pii_class.token, pii_class.bare_numeric) == (token, bare)
    assert pii_class.group == (1 if name in ("aadhaar_keyword", "my_number") else 0)


def test_classes_are_in_priority_order() -> None:
    assert [c.name for c in PII_CLASSES] == [row[0] for row in CLASS_TABLE]


@pytest.mark.parametrize(("text", "expected"), PII_VECTORS)
def test_pii_vector(text: str, expected: str) -> None:
    result = redact_pii(text, SPEC)
    assert result.value == expected
    assert result.report.pii_redactions == (0 if text == expected else 1)
    assert sanitize_text(text, SPEC).value == expected


# --- Checksums. ----------------------------------------------------------------------------------------

CHECKSUM_VECTORS: list[tuple[Callable[[str], bool], str, bool]] = [
    (checksums.cpf_valid, "529.982.247-25", True),
    (checksums.cpf_valid, "52998224726", False),
    (checksums.cpf_valid, "2998224725", False),
    (checksums.cpf_valid, "99999999999", False),
    (checksums.cnpj_valid, "11222333000181", True),
    (checksums.cnpj_valid, "11222333000182", False),
    (checksums.cnpj_valid, "1122233300018", False),
    (checksums.cnpj_valid, "11111111111111", False),
    (checksums.cuit_valid, "20-12345678-6", True),
    (checksums.cuit_valid, "2012345670", False),
    (checksums.luhn_valid, "4111 1111 1111 1111", True),
    (checksums.luhn_valid, "4111111111111112", False),
    (checksums.luhn_valid, "411111111111", False),
    (checksums.luhn_valid, "00000000000000000000", False),
    (checksums.luhn_valid, "9000000000001", True),
    (checksums.iban_valid, "GB82 WEST 1234 5698 7654 32", True),
    (checksums.iban_valid, "gb82west12345698765432", True),
    (checksums.iban_valid, "GB82 WEST 1234 5698 7654 33", False),
    (checksums.iban_valid, "GB82WEST1234", False),
    (checksums.iban_valid, "1B82WEST12345698765432", False),
    (checksums.iban_valid, "GBX2WEST12345698765432", False),
    (checksums.iban_valid, "GB82WEST1234569876543!", False),
    (checksums.verhoeff_valid, "234123412346", True),
    (checksums.verhoeff_valid, "123412341234", False),
    (checksums.verhoeff_valid, "199999999996", False),
    (checksums.verhoeff_valid, "23412341234", False),
    (checksums.dni_valid, "12345678Z", True),
    (checksums.dni_valid, "12345678z", True),
    (checksums.dni_valid, "12345678A", False),
    (checksums.dni_valid, "1234567Z", False),
    (checksums.nie_valid, "X1234567L", True),
    (checksums.nie_valid, "A1234567L", False),
    (checksums.nino_valid, "AB123456C", True),
    (checksums.nino_valid, "QA123456C", False),
    (checksums.nino_valid, "AQ123456C", False),
    (checksums.nino_valid, "NT123456C", False),
    (checksums.nino_valid, "ſA123456C", False),
    (checksums.ssn_valid, "123-45-6789", True),
    (checksums.ssn_valid, "666-45-6789", False),
    (checksums.ssn_valid, "000-45-6789", False),
    (checksums.ssn_valid, "12-45-6789", False),
]


@pytest.mark.parametrize(("check", "text", "expected"), CHECKSUM_VECTORS)
def test_checksum(check: Callable[[str], bool], text: str, expected: bool) -> None:
    assert check(text) is expected


# --- Class gates (docs/spec/safety.md §6.3). -------------------------------------------------------------------------

# (class, a text that opens its gate, a text that keeps it closed)
GATE_VECTORS = [
    ("cpf_formatted", "1.-", "1.2"),
    ("cnpj_formatted", "1./-", "1.-"),
    ("cuit", "1-", "1"),
    ("iban", "A1", "a1"),
    ("credit_card", "1234567890 123", "123456789012"),
    ("cnpj_bare", "12345678901234", "1234567890123 4"),
    ("cpf_bare", "12345678901", "1234567890 1"),
    ("aadhaar_grouped", "123456789012 ", "123456789012"),
    ("aadhaar_grouped", "1234-5678-901-2", "1234.5678.9012"),
    ("aadhaar_keyword", "UiD", "u-i-d"),
    ("aadhaar_keyword", "आधार", "adhaar"),
    ("dni", "12345678 x", "12345678 -"),
    ("nie", "1234567 Y", "1234567 A"),
    ("nino", "123456 a", "123456 ."),
    ("ssn", "1-", "-"),
    ("rrn", "123456-", "12345-"),
    ("rfc", "123456", "12345"),
    ("pan_in", "1234 a", "123 a"),
    ("phone_e164", "+ 1234567", "1234567"),
    ("phone_nanp", "4155552671 or 1 2", "4155552671"),
    ("phone_nanp", "1) 2", "1 )2"),
    ("phone_nanp", "12345678901", "1234567890 "),
    ("phone_nanp", "1\t2", " 1 "),
    ("my_number", "マイナンバー", "マイナ"),
    ("my_number", "個人番号", "番号"),
    ("my_number", "MY phone NUMBER", "my numbr"),
]


@pytest.mark.parametrize(("name", "opens", "closed"), GATE_VECTORS)
def test_class_gate(name: str, opens: str, closed: str) -> None:
    gate = next(c for c in PII_CLASSES if c.name == name).gate
    assert gate(TextFacts(opens))
    assert not gate(TextFacts(closed))


def test_gate_facts_count_ascii_digits_only() -> None:
    facts = TextFacts("12 345 ٦٧ 6789")
    assert (facts.digits, facts.run) == (9, 4)


def test_gates_read_the_normalised_view() -> None:
    # Fullwidth digits and the fullwidth hyphen open the SSN gate once folded.
    assert sanitize_text("ssn １２３－４５－６７８９", SPEC).value == "ssn [REDACTED_PII_SSN]"


def test_bare_ten_digits_need_the_text_wide_phone_gate() -> None:
    assert sanitize_text("call 4155552671", SPEC).value == "call 4155552671"
    assert sanitize_text("call 4155552671 at 9.30", SPEC).value == "call [REDACTED_PII_PHONE] at 9.30"


# --- Detection. ------------------------------------------------------------------------------------------

LIKELY_PII = [
    ("CPF 529.982.247-25", True),
    ("CNPJ 11.222.333/0001-81", True),
    ("CUIT 20-12345678-6", True),
    ("GB82WEST12345698765432", True),
    ("aadhaar 2341 2341 2346", True),
    ("uid 234123412346", True),
    ("12345678Z", True),
    ("X1234567L", True),
    ("AB123456C", True),
    ("123-45-6789", True),
    ("900101-1234567", True),
    ("GODE561231GR8", True),
    ("ABCDE1234F", True),
    ("My Number 123456789012", True),
    ("4111111111111111", False),
    ("4111 1111 1111 1111", False),
    ("52998224725", False),
    ("11222333000181", False),
    ("+14155552671", False),
    ("415-555-2671", False),
    ("chat-5511987654321-1700000000000", False),
    ("CPF 529.982.247-26", False),
    ("", False),
]


@pytest.mark.parametrize(("text", "expected"), LIKELY_PII)
def test_has_likely_pii(text: str, expected: bool) -> None:
    assert has_likely_pii(text, SPEC) is expected
