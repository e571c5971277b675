"""Stages 1 and 3: private-key blocks and the 18 credential shapes (docs/spec/safety.md §3, §5), and the needle
pre-checks that let a scan be skipped."""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline.scrub import Policy, has_likely_secret, sanitize_text
from pipeline.scrub.keys import BLOCK_PATTERNS, redact_private_keys
from pipeline.scrub.needles import FoldedText, NeedleSet, fold, minimal_needles
from pipeline.scrub.shapes import CREDENTIAL_SHAPES, CredentialShape, _may_match, _may_match_any, redact_shapes

SPEC = Policy.spec_compatible()

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
PKCS8 = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----"
EC = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----"
OPENSSH = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n-----END OPENSSH PRIVATE KEY-----"
PGP = "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----"

# (name of the shape, text, expected output of stage 3 alone)
SHAPE_VECTORS = [
    ("bearer", "Authorization: Bearer abcdefgh", "Authorization: Bearer [REDACTED]"),
    ("bearer", "bearer\n\tab.cd~ef+gh/=-", "bearer\n\t[REDACTED]"),
    ("bearer", "BEARER abcdefg", "BEARER abcdefg"),
    ("api_key", "api_key=abcd1234efgh", "api_key=[REDACTED]"),
    ("api_key", "apikey: x", "apikey: [REDACTED]"),
    ("api_key", 'API-KEY = "secret-value"', 'API-KEY = "[REDACTED]"'),
    ("api_key", "api key: s3cr3t!", "api key: s3cr3t!"),
    ("named_secret", "password: hunter2", "[REDACTED]"),
    ("named_secret", "client-secret='abc' next", "[REDACTED]' next"),
    ("named_secret", "refresh_token=abc&scope=x", "[REDACTED]&scope=x"),
    ("named_secret", "mytoken=abc", "mytoken=abc"),
    ("named_secret", "the secret is out", "the [REDACTED] out"),
    ("openai", "key sk-abcdefghijklmnopqrstuvwx.", "key [REDACTED]."),
    ("openai", "sk-abcdefghijklmnopqrs", "sk-abcdefghijklmnopqrs"),
    ("github", "ghp_abcdefghijklmnopqrstuvwxyz0123", "[REDACTED]"),
    ("github", "gho_ABCDEFGHIJKLMNOPQRST ghs_0123456789abcdefghij", "[REDACTED] [REDACTED]"),
    ("github", "ghx_abcdefghijklmnopqrstuvwxyz0123", "ghx_abcdefghijklmnopqrstuvwxyz0123"),
    ("aws_key_id", "id AKIAABCDEFGHIJKLMNOP", "id [REDACTED]"),
    ("aws_key_id", "AKIAABCDEFGHIJKLMNO", "AKIAABCDEFGHIJKLMNO"),
    ("aws_sts_key_id", "ASIA0123456789ABCDEF", "[REDACTED]"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.abcdefghijk", "[REDACTED]"),
    ("jwt", "eyJhbGciOiJ.short.abcdefghijk", "eyJhbGciOiJ.short.abcdefghijk"),
    ("oauth", "code_verifier=abc", "[REDACTED]"),
    ("oauth", "authorization_code: xyz", "[REDACTED]"),
    ("oauth", "id_token 'abc'", "[REDACTED]'"),
    ("google_api_key", "AIzaSyA1234567890abcdefghijklmnopqrstuv", "[REDACTED]"),
    ("google_api_key", "AIzaSyA1234567890abcdefghijklmnopqrstu", "AIzaSyA1234567890abcdefghijklmnopqrstu"),
    ("anthropic", "sk-ant-api03-abcdefghijklmnop", "[REDACTED]"),
    ("openai_scoped", "sk-proj-abcdefghijkl", "[REDACTED]"),
    ("openai_scoped", "sk-org-ABCDEF_123456", "[REDACTED]"),
    ("stripe", "sk_live_abcdefghijklmnop1", "[REDACTED]"),
    ("stripe", "rk_test_abcdefghijklmnop", "[REDACTED]"),
    ("stripe", "pk_live_abcdefghijklmnop", "pk_live_abcdefghijklmnop"),
    ("slack", "xoxb-1234567890-abc", "[REDACTED]"),
    ("slack", "xoxq-1234567890-abc", "xoxq-1234567890-abc"),
    ("github_fine_grained", "github_pat_11ABCDEFG0123456789_abcdefghij", "[REDACTED]"),
    ("gitlab", "glpat-abcdefghijklmnop", "[REDACTED]"),
    ("gitlab", "glpat-abcdefghijklmno", "glpat-abcdefghijklmno"),
    ("npm", "npm_abcdefghijklmnopqrst1234", "[REDACTED]"),
    # `\b` cannot end a match on the trailing `-`, so the match gives it back.
    ("sendgrid", "SG.abcdefghijklmnop.ABCDEFGHIJKLMNOP_-", "[REDACTED]-"),
    ("sendgrid", "SG.short.ABCDEFGHIJKLMNOP", "SG.short.ABCDEFGHIJKLMNOP"),
]

# Texts that only the named shape matches, each with a clean boundary on both sides.
ONE_OF_EACH = {
    "bearer": "bearer abcdefgh",
    "api_key": "api_key=zz99yy88",
    "named_secret": "password=hunter2",
    "openai": "sk-abcdefghijklmnopqrstuvwx",
    "github": "ghp_abcdefghijklmnopqrstuvwxyz0123",
    "aws_key_id": "AKIAABCDEFGHIJKLMNOP",
    "aws_sts_key_id": "ASIAABCDEFGHIJKLMNOP",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.abcdefghijk",
    "oauth": "code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw",
    "google_api_key": "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "anthropic": "sk-ant-api03-abcdefghijklmnop",
    "openai_scoped": "sk-proj-abcdefghijkl",
    "stripe": "sk_test_abcdefghijklmnop",
    "slack": "xoxp-1234567890-abc",
    "github_fine_grained": "github_pat_abcdefghijklmnopqrstuv",
    "gitlab": "glpat-abcdefghijklmnop",
    "npm": "npm_abcdefghijklmnopqrst",
    "sendgrid": "SG.abcdefghijklmnop.ABCDEFGHIJKLMNOP",
}


def test_the_shapes_are_the_spec_shapes_in_order() -> None:
    assert [shape.name for shape in CREDENTIAL_SHAPES] == list(ONE_OF_EACH)
    assert len(CREDENTIAL_SHAPES) == 18
    kept_prefix = [shape.name for shape in CREDENTIAL_SHAPES if shape.keeps_prefix]
    assert kept_prefix == ["bearer", "api_key"]


@pytest.mark.parametrize(("name", "text", "expected"), SHAPE_VECTORS)
def test_shape_vector(name: str, text: str, expected: str) -> None:
    shape = next(s for s in CREDENTIAL_SHAPES if s.name == name)
    assert shape.pattern.search(text) is not None or text == expected
    assert redact_shapes(FoldedText(text))[0] == expected


@pytest.mark.parametrize(("name", "text"), ONE_OF_EACH.items())
def test_each_shape_is_redacted_and_detected(name: str, text: str) -> None:
    shape = next(s for s in CREDENTIAL_SHAPES if s.name == name)
    assert shape.pattern.fullmatch(text)
    embedded = f"one {text} two"
    result = sanitize_text(embedded, SPEC)
    assert result.report.text_redactions == 1
    assert result.value in ("one [REDACTED] two", "one bearer [REDACTED] two", "one api_key=[REDACTED] two")
    assert has_likely_secret(embedded, SPEC)


def test_shape_count_is_the_matches_each_pattern_sees() -> None:
    # Shape 3 takes `access_token=...` whole, so shape 9 (OAuth) sees only the token and counts nothing.
    assert sanitize_text("access_token=ya29.abc", SPEC).report.text_redactions == 1
    # Two matches of one shape count two.
    assert (
        sanitize_text(
            "ghp_abcdefghijklmnopqrstuvwxyz0123 ghp_abcdefghijklmnopqrstuvwxyz4567", SPEC
        ).report.text_redactions
        == 2
    )
    # A value redacted by shape 2 is not counted again by the later shapes.
    assert sanitize_text("api_key=sk-abcdefghijklmnopqrstuvwx", SPEC).report.text_redactions == 1


def test_a_value_already_redacted_is_not_counted_again() -> None:
    # Shape 2's value class admits `[`, so it matches its own output; replacing it with itself is no redaction.
    result = sanitize_text("api_key=[REDACTED] and API-KEY: '[REDACTED]'", SPEC)
    assert result.value == "api_key=[REDACTED] and API-KEY: '[REDACTED]'"
    assert not result.report.changed()


@pytest.mark.parametrize("block", [PEM, PKCS8, EC, OPENSSH, PGP])
def test_each_private_key_block_is_replaced_whole(block: str) -> None:
    result = sanitize_text(f"before\n{block}\nafter", SPEC)
    assert result.value == "before\n[REDACTED_PRIVATE_KEY]\nafter"
    assert result.report.blocked_secret_hits == 1
    assert result.report.text_redactions == 0
    assert has_likely_secret(block, SPEC)


def test_block_patterns_ignore_case_and_span_lines() -> None:
    block = "-----begin private key-----\nabc\n\ndef\n-----end private key-----"
    assert redact_private_keys(FoldedText(block)) == ("[REDACTED_PRIVATE_KEY]", 1)


def test_block_hits_count_per_pattern_on_the_text_it_sees() -> None:
    # The first pattern also takes the OpenSSH block, so the second sees only its token.
    assert redact_private_keys(FoldedText(f"{PEM} {OPENSSH} {PGP}")) == (
        "[REDACTED_PRIVATE_KEY] [REDACTED_PRIVATE_KEY] [REDACTED_PRIVATE_KEY]",
        3,
    )
    assert BLOCK_PATTERNS[1].search(OPENSSH) and BLOCK_PATTERNS[0].search(OPENSSH)


def test_an_unterminated_block_is_left_alone() -> None:
    text = "-----BEGIN RSA PRIVATE KEY-----\nMIIE truncated"
    assert sanitize_text(text, SPEC).value == text
    assert not has_likely_secret(text, SPEC)


def test_a_block_is_not_matched_across_two_kinds() -> None:
    # Lazy matching ends each block at its own END line.
    result = sanitize_text(f"{PEM}\nkeep me\n{PKCS8}", SPEC)
    assert result.value == "[REDACTED_PRIVATE_KEY]\nkeep me\n[REDACTED_PRIVATE_KEY]"
    assert result.report.blocked_secret_hits == 2


@pytest.mark.parametrize(
    "text",
    ["auth with Bearer s3cret", "see /secret/AbC123", "a bearer bond", "plain prose", "api key: s3cr3t!", ""],
)
def test_has_likely_secret_ignores_markers_and_prose(text: str) -> None:
    assert not has_likely_secret(text, SPEC)
    assert not has_likely_secret(text)


# --- Needles: a pre-check may only ever say "maybe" wrongly. ----------------------------------------------


def test_fold_maps_every_ignorecase_twin_of_an_ascii_letter_onto_it() -> None:
    everything = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000)
    folded = fold(everything)
    assert len(folded) == len(everything)
    for letter in "abcdefghijklmnopqrstuvwxyz":
        for match in re.finditer(f"(?i){letter}", everything):
            assert folded[match.start()] == letter, hex(ord(match.group()))


@settings(max_examples=300, deadline=None)
@given(st.text(), st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=6))
def test_needle_set_finds_exactly_what_substring_search_finds(haystack: str, needles: list[str]) -> None:
    needle_set = NeedleSet(needles)
    planted = haystack + needles[0] + haystack
    assert needle_set.occurs_in(planted)
    assert needle_set.occurs_in(haystack) == any(n in haystack for n in needles)


def test_minimal_needles_drop_the_needles_that_hold_another() -> None:
    assert minimal_needles(["token", "access_token", "sk-", "sk-ant-", "x"]) == ("sk-", "token", "x")


@pytest.mark.parametrize("shape", CREDENTIAL_SHAPES, ids=lambda s: s.name)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_match_of_a_shape_holds_one_of_its_needles(shape: CredentialShape, data: st.DataObject) -> None:
    text = data.draw(st.from_regex(shape.pattern))
    assume(shape.pattern.search(text))
    probe = FoldedText(text)
    assert _may_match(shape, probe)
    assert _may_match_any(probe)
