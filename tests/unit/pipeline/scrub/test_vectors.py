"""The test vectors of docs/spec/safety.md §11, as tables reused by several tests: the behaviour of
`Policy.spec_compatible()`, which must match the Rust implementation byte for byte."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import pytest

from pipeline.scrub import (
    BareCardGate,
    Policy,
    SanitizationReport,
    has_likely_email,
    has_likely_pii,
    has_likely_secret,
    redact_pii,
    sanitize_json,
    sanitize_text,
)


@dataclass(frozen=True)
class TextVector:
    number: int
    case: str
    text: str
    expected: str
    counters: dict[str, int]

    def __str__(self) -> str:
        return f"{self.number}-{self.case}"


SPEC = Policy.spec_compatible()
SPEC_CORROBORATED = replace(SPEC, bare_card=BareCardGate.CORROBORATED)


def nonzero(report: SanitizationReport) -> dict[str, int]:
    return {f.name: getattr(report, f.name) for f in fields(report) if getattr(report, f.name)}


# docs/spec/safety.md §11.1: sanitize_text with safety.md's default policy; the last column lists the non-zero counters.
TEXT_VECTORS = [
    TextVector(
        1,
        "marker: one-time-secret URL",
        "open https://ots.example/secret/AbC123 now",
        "open https://ots.example/secret/[REDACTED] now",
        {"text_redactions": 1},
    ),
    TextVector(
        2,
        "marker: short capital Bearer value",
        "auth with Bearer s3cret please",
        "auth with Bearer [REDACTED] please",
        {"text_redactions": 1},
    ),
    TextVector(
        3,
        "marker: the English word (non-match)",
        "the ring bearer walked down the aisle",
        "the ring bearer walked down the aisle",
        {},
    ),
    TextVector(4, "marker: value below floor", "Bearer or not, we go", "Bearer or not, we go", {}),
    TextVector(5, "marker: prose after lower-case bearer", "a bearer bond matured", "a bearer bond matured", {}),
    TextVector(
        6,
        "marker: header form",
        "Authorization: Bearer abcdefgh12345678",
        "Authorization: Bearer [REDACTED]",
        {"text_redactions": 1},
    ),
    TextVector(
        7,
        "marker: lower-case bearer, long plain word",
        "bearer plainwordsecret here",
        "bearer [REDACTED] here",
        {"text_redactions": 1},
    ),
    TextVector(
        8,
        "shape 1 after marker floor failed",
        "bearer shortword here",
        "bearer [REDACTED] here",
        {"text_redactions": 1},
    ),
    TextVector(
        9,
        "marker: extra space and wrapper kept",
        "Bearer  `tok3n` ok",
        "Bearer  `[REDACTED]` ok",
        {"text_redactions": 1},
    ),
    TextVector(
        10,
        "marker: continuation fragments",
        "Bearer part1234 part5678 and more",
        "Bearer [REDACTED] [REDACTED] and more",
        {"text_redactions": 2},
    ),
    TextVector(
        11,
        "marker: skipped text between fragments is lost",
        "Bearer abcd1234 , wxyz5678",
        "Bearer [REDACTED] [REDACTED]",
        {"text_redactions": 2},
    ),
    TextVector(12, "marker: secret key too short", "see /secret/short", "see /secret/short", {}),
    TextVector(
        13,
        "block: PEM private key",
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----\ndone",
        "key:\n[REDACTED_PRIVATE_KEY]\ndone",
        {"blocked_secret_hits": 1},
    ),
    TextVector(
        14,
        "block: OpenSSH private key",
        "x -----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY----- y",
        "x [REDACTED_PRIVATE_KEY] y",
        {"blocked_secret_hits": 1},
    ),
    TextVector(
        15, "shape 2: api_key keeps its prefix", "api_key=abcd1234efgh", "api_key=[REDACTED]", {"text_redactions": 1}
    ),
    TextVector(16, "shape 2: quoted value", "API-KEY: 'zz99yy88'", "API-KEY: '[REDACTED]'", {"text_redactions": 1}),
    TextVector(17, "shape 2 non-match: space inside the key name", "api key: s3cr3t!", "api key: s3cr3t!", {}),
    TextVector(18, "shape 3: password assignment", "password: hunter2", "[REDACTED]", {"text_redactions": 1}),
    TextVector(
        19, "shape 3: accepted false positive", "the secret is out", "the [REDACTED] out", {"text_redactions": 1}
    ),
    TextVector(20, "shape 3: stops at &", "token=abc&x=1", "[REDACTED]&x=1", {"text_redactions": 1}),
    TextVector(
        21, "shape 4: sk- key", "use sk-abcdefghijklmnopqrstuvwx now", "use [REDACTED] now", {"text_redactions": 1}
    ),
    TextVector(22, "shape 5: GitHub token", "ghp_abcdefghijklmnopqrstuvwxyz0123", "[REDACTED]", {"text_redactions": 1}),
    TextVector(23, "shape 6: AWS key id", "AKIAABCDEFGHIJKLMNOP", "[REDACTED]", {"text_redactions": 1}),
    TextVector(
        24,
        "shape 8: JWT",
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.abcdefghijk done",
        "jwt [REDACTED] done",
        {"text_redactions": 1},
    ),
    TextVector(25, "shape 9 (shape 3 fires first)", "access_token=ya29.abc", "[REDACTED]", {"text_redactions": 1}),
    TextVector(26, "shape 14: Slack token", "xoxb-1234567890-abc", "[REDACTED]", {"text_redactions": 1}),
    TextVector(27, "shape 16: GitLab token", "glpat-abcdefghijklmnop", "[REDACTED]", {"text_redactions": 1}),
    TextVector(28, "shape 13: Stripe key", "sk_live_abcdefghijklmnop1", "[REDACTED]", {"text_redactions": 1}),
    TextVector(29, "CPF valid", "CPF 529.982.247-25", "CPF [REDACTED_PII_CPF]", {"pii_redactions": 1}),
    TextVector(30, "CPF invalid check digit", "CPF 529.982.247-26", "CPF 529.982.247-26", {}),
    TextVector(31, "CPF bare valid", "cpf 52998224725", "cpf [REDACTED_PII_CPF]", {"pii_redactions": 1}),
    TextVector(32, "CNPJ valid", "CNPJ 11.222.333/0001-81", "CNPJ [REDACTED_PII_CNPJ]", {"pii_redactions": 1}),
    TextVector(33, "CNPJ invalid", "CNPJ 11.222.333/0001-82", "CNPJ 11.222.333/0001-82", {}),
    TextVector(
        34,
        "CNPJ bare + CPF bare",
        "id 11222333000181 and 52998224725",
        "id [REDACTED_PII_CNPJ] and [REDACTED_PII_CPF]",
        {"pii_redactions": 2},
    ),
    TextVector(35, "CUIT valid", "CUIT 20-12345678-6", "CUIT [REDACTED_PII_CUIT]", {"pii_redactions": 1}),
    TextVector(36, "CUIT invalid", "CUIT 20-12345678-5", "CUIT 20-12345678-5", {}),
    TextVector(
        37, "IBAN valid, grouped", "IBAN GB82 WEST 1234 5698 7654 32", "IBAN [REDACTED_PII_IBAN]", {"pii_redactions": 1}
    ),
    TextVector(38, "IBAN invalid", "IBAN GB82 WEST 1234 5698 7654 33", "IBAN GB82 WEST 1234 5698 7654 33", {}),
    TextVector(
        39, "IBAN valid, compact", "iban DE89370400440532013000.", "iban [REDACTED_PII_IBAN].", {"pii_redactions": 1}
    ),
    TextVector(
        40,
        "card separated, Luhn valid",
        "card 4111 1111 1111 1111",
        "card [REDACTED_PII_CREDIT_CARD]",
        {"pii_redactions": 1},
    ),
    TextVector(41, "card separated, Luhn invalid", "card 4111 1111 1111 1112", "card 4111 1111 1111 1112", {}),
    TextVector(
        42, "card hyphenated", "card 4111-1111-1111-1111", "card [REDACTED_PII_CREDIT_CARD]", {"pii_redactions": 1}
    ),
    TextVector(
        43,
        "card bare: trailing space swallowed",
        "card 4111111111111111 now",
        "card [REDACTED_PII_CREDIT_CARD]now",
        {"pii_redactions": 1},
    ),
    TextVector(
        44, "13-digit timestamp, LuhnOnly", "ts 1787178633773", "ts [REDACTED_PII_CREDIT_CARD]", {"pii_redactions": 1}
    ),
    TextVector(
        45,
        "Aadhaar grouped, Verhoeff valid",
        "aadhaar 2341 2341 2346",
        "aadhaar [REDACTED_PII_AADHAAR]",
        {"pii_redactions": 1},
    ),
    TextVector(46, "Aadhaar grouped, Verhoeff invalid", "aadhaar 2341 2341 2345", "aadhaar 2341 2341 2345", {}),
    TextVector(
        47,
        "Aadhaar keyword, digits only replaced",
        "Aadhaar no. 234123412346",
        "Aadhaar no. [REDACTED_PII_AADHAAR]",
        {"pii_redactions": 1},
    ),
    TextVector(48, "DNI valid", "DNI 12345678Z", "DNI [REDACTED_PII_DNI]", {"pii_redactions": 1}),
    TextVector(49, "DNI invalid letter", "DNI 12345678A", "DNI 12345678A", {}),
    TextVector(50, "NIE valid", "NIE X1234567L", "NIE [REDACTED_PII_DNI]", {"pii_redactions": 1}),
    TextVector(51, "NINO valid", "NINO AB123456C", "NINO [REDACTED_PII_NINO]", {"pii_redactions": 1}),
    TextVector(52, "NINO reserved prefix", "NINO BG123456A", "NINO BG123456A", {}),
    TextVector(53, "SSN valid", "SSN 123-45-6789", "SSN [REDACTED_PII_SSN]", {"pii_redactions": 1}),
    TextVector(54, "SSN area 666", "SSN 666-12-3456", "SSN 666-12-3456", {}),
    TextVector(55, "SSN area 000", "SSN 000-12-3456", "SSN 000-12-3456", {}),
    TextVector(56, "Korea RRN", "RRN 900101-1234567", "RRN [REDACTED_PII_RRN]", {"pii_redactions": 1}),
    TextVector(57, "Mexico RFC", "RFC GODE561231GR8", "RFC [REDACTED_PII_RFC]", {"pii_redactions": 1}),
    TextVector(58, "India PAN", "PAN ABCDE1234F", "PAN [REDACTED_PII_PAN_IN]", {"pii_redactions": 1}),
    TextVector(59, "phone E.164", "call +14155552671", "call [REDACTED_PII_PHONE]", {"pii_redactions": 1}),
    TextVector(60, "phone NANP", "call 415-555-2671", "call [REDACTED_PII_PHONE]", {"pii_redactions": 1}),
    TextVector(
        61, "phone NANP with country code", "tel 1-415-555-2671", "tel [REDACTED_PII_PHONE]", {"pii_redactions": 1}
    ),
    TextVector(
        62, "phone NANP, parenthesis kept", "call (415) 555-2671", "call ([REDACTED_PII_PHONE]", {"pii_redactions": 1}
    ),
    TextVector(63, "phone NANP exchange starting 1", "Phone: 555-123-4567", "Phone: 555-123-4567", {}),
    TextVector(64, "bare 10 digits not reached", "call 4155552671", "call 4155552671", {}),
    TextVector(
        65,
        "bare 10 digits reached via text-wide gate",
        "call 4155552671 or 1 2",
        "call [REDACTED_PII_PHONE] or 1 2",
        {"pii_redactions": 1},
    ),
    TextVector(66, "international with spaces (no class)", "phone +44 20 7946 0958", "phone +44 20 7946 0958", {}),
    TextVector(
        67,
        "My Number (Japanese keyword)",
        "マイナンバー: 123456789012",
        "マイナンバー: [REDACTED_PII_MYNUMBER]",
        {"pii_redactions": 1},
    ),
    TextVector(
        68,
        "My Number (English keyword)",
        "My Number 123456789012",
        "My Number [REDACTED_PII_MYNUMBER]",
        {"pii_redactions": 1},
    ),
    TextVector(
        69, "zero-width inside CPF", "CPF 529.982.247\u200b-25", "CPF [REDACTED_PII_CPF]", {"pii_redactions": 1}
    ),
    TextVector(
        70, "fullwidth CPF", "CPF ５２９．９８２．２４７－２５", "CPF [REDACTED_PII_CPF]", {"pii_redactions": 1}
    ),
    TextVector(71, "Arabic-Indic CPF", "٥٢٩.٩٨٢.٢٤٧-٢٥", "[REDACTED_PII_CPF]", {"pii_redactions": 1}),
    TextVector(
        72, "zero-width inside card", "4111\u200b1111 1111 1111", "[REDACTED_PII_CREDIT_CARD]", {"pii_redactions": 1}
    ),
    TextVector(73, "email is not redacted", "mail a.b@example.com", "mail a.b@example.com", {}),
    TextVector(74, "a date is not PII", "order 2026-01-02 shipped", "order 2026-01-02 shipped", {}),
]

# docs/spec/safety.md §11.2: the same input under both policies.
POLICY_VECTORS = [
    ("card 4111111111111111 now", "card [REDACTED_PII_CREDIT_CARD]now", "card [REDACTED_PII_CREDIT_CARD]now"),
    ("ts 1787178633773", "ts [REDACTED_PII_CREDIT_CARD]", "ts 1787178633773"),
    ("cc 1787178633773", "cc [REDACTED_PII_CREDIT_CARD]", "cc [REDACTED_PII_CREDIT_CARD]"),
    ("ref 30569309025904", "ref [REDACTED_PII_CREDIT_CARD]", "ref [REDACTED_PII_CREDIT_CARD]"),
    ("order 6011000000000004", "order [REDACTED_PII_CREDIT_CARD]", "order [REDACTED_PII_CREDIT_CARD]"),
]


def wrap_in_lists(value: Any, times: int) -> Any:
    for _ in range(times):
        value = [value]
    return value


# docs/spec/safety.md §11.3: JSON.
JSON_VECTORS = [
    (
        {"password": "x", "nested": {"apiKey": 1, "note": "Bearer s3cret"}, "monkey": "banana", "count": 3},
        {
            "password": "[REDACTED_SECRET]",
            "nested": {"apiKey": "[REDACTED_SECRET]", "note": "Bearer [REDACTED]"},
            "monkey": "[REDACTED_SECRET]",
            "count": 3,
        },
        {"key_redactions": 3, "text_redactions": 1},
    ),
    # The object is depth 0 and the outermost list depth 1, so 127 lists survive around the cut.
    ({"a": wrap_in_lists("x", 130)}, {"a": wrap_in_lists("[REDACTED_SECRET]", 127)}, {"depth_redactions": 1}),
]

# docs/spec/safety.md §11.3: detection.
DETECTION_VECTORS = [
    (lambda t: has_likely_pii(t, SPEC), "CPF 529.982.247-25", True),
    (lambda t: has_likely_pii(t, SPEC), "AB123456C", True),
    (lambda t: has_likely_pii(t, SPEC), "4111111111111111", False),
    (lambda t: has_likely_pii(t, SPEC), "+14155552671", False),
    (lambda t: has_likely_pii(t, SPEC), "415-555-2671", False),
    (has_likely_email, "mail a.b@example.com", True),
    (has_likely_email, "no at sign here", False),
    (lambda t: has_likely_secret(t, SPEC), "x ghp_abcdefghijklmnopqrstuvwxyz0123", True),
    (lambda t: has_likely_secret(t, SPEC), "auth with Bearer s3cret", False),
]


def test_the_vector_table_is_the_spec_table() -> None:
    assert [v.number for v in TEXT_VECTORS] == list(range(1, 75))


@pytest.mark.parametrize("vector", TEXT_VECTORS, ids=str)
def test_sanitize_text_vector(vector: TextVector) -> None:
    result = sanitize_text(vector.text, SPEC)
    assert result.value == vector.expected
    assert nonzero(result.report) == vector.counters
    assert result.report.changed() == bool(vector.counters)


@pytest.mark.parametrize("vector", TEXT_VECTORS, ids=str)
def test_sanitize_text_vector_is_stable(vector: TextVector) -> None:
    again = sanitize_text(vector.expected, SPEC)
    assert again.value == vector.expected
    assert not again.report.changed()


@pytest.mark.parametrize("vector", [v for v in TEXT_VECTORS if set(v.counters) <= {"pii_redactions"}], ids=str)
def test_redact_pii_agrees_on_pii_vectors(vector: TextVector) -> None:
    result = redact_pii(vector.text, SPEC)
    assert result.value == vector.expected
    assert nonzero(result.report) == vector.counters


@pytest.mark.parametrize(("text", "luhn_only", "corroborated"), POLICY_VECTORS)
def test_policy_vector(text: str, luhn_only: str, corroborated: str) -> None:
    assert sanitize_text(text, SPEC).value == luhn_only
    assert sanitize_text(text, SPEC_CORROBORATED).value == corroborated
    assert redact_pii(text, SPEC_CORROBORATED).value == corroborated


@pytest.mark.parametrize(("value", "expected", "counters"), JSON_VECTORS, ids=["members", "depth"])
def test_sanitize_json_vector(value: Any, expected: Any, counters: dict[str, int]) -> None:
    result = sanitize_json(value, SPEC)
    assert result.value == expected
    assert nonzero(result.report) == counters


@pytest.mark.parametrize(("detect", "text", "expected"), DETECTION_VECTORS)
def test_detection_vector(detect: Any, text: str, expected: bool) -> None:
    assert detect(text) is expected
