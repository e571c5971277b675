"""Properties of `sanitize_text` over generated text, under both rule sets: it never raises, a second scrub
changes and reports nothing, and a planted secret never survives whatever surrounds it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline.scrub import (
    BareCardGate,
    Policy,
    has_likely_email,
    has_likely_pii,
    has_likely_secret,
    redact_credential_markers,
    redact_pii,
    sanitize_text,
)

EXTENDED_POLICIES = [Policy(), Policy.corroborated(), Policy(redact_emails=True)]
SPEC_POLICIES = [Policy.spec_compatible(), replace(Policy.spec_compatible(), bare_card=BareCardGate.CORROBORATED)]
POLICIES = EXTENDED_POLICIES + SPEC_POLICIES
POLICY_IDS = ["extended", "extended_corroborated", "extended_emails", "spec", "spec_corroborated"]

# Surrogate-free text of every category, control characters included (hypothesis' default).
ANY_TEXT = st.text()

# Text built from the pieces the stages react to, so the properties meet markers, shapes, identifiers,
# separators and the folded characters far more often than random text would.
_PIECES = [
    "Bearer ", "bearer ", "/secret/", "api_key=", "API-KEY: ", "token=", "password: ", "secret ", "access_token=",
    "sk-abcdefghijklmnopqrstuvwx", "ghp_abcdefghijklmnopqrstuvwxyz0123", "AKIAABCDEFGHIJKLMNOP",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "529.982.247-25", "11.222.333/0001-81",
    "20-12345678-6", "GB82 WEST 1234 5698 7654 32", "4111 1111 1111 1111", "4111111111111111", "1787178633773",
    "2341 2341 2346", "Aadhaar no. 234123412346", "12345678Z", "X1234567L", "AB123456C", "123-45-6789",
    "900101-1234567", "GODE561231GR8", "ABCDE1234F", "+14155552671", "415-555-2671", "(415) 555-2671",
    "My Number 123456789012", "マイナンバー: 123456789012", "52998224725", "11222333000181", "cc ", "card ",
    " ", "  ", "\n", "\t", "-", ".", "/", ":", "(", ")", "+", "'", '"', "`", "&", ",", "=", "[", "]", "_",
    "0", "1", "2", "5", "9", "a", "Z", "x", "é", "\u200b", "５", "٥", "－", "‐", "ſ", "\u212a", "İ",
    "abcd1234", "part5678", "word", "1 2", "[REDACTED]", "[REDACTED_PII_CPF]",
    # What the extended rules react to.
    "https://u:", "@host/db", "postgres://", "{{", "}}", "<", ">", "$", "${", "`", "\\n", "-----BEGIN PRIVATE KEY-----",
    "glpat-", "xoxe-", "AIza", "eyJhbGciOiJub25lIn0", "eyJzdWIiOiIxIn0.", "SG.", "dckr_pat_", "hf_", "npm_",
    "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "api_key = \"", "DB_PASS=", "passwd: ",
    "token - '", " is ", "+44 20 7946 0958", "020 7946 0958", "(415) 555-2671", "943 476 5919", "NHS ", "SIN ",
    "046 454 286", "PESEL ", "44051401359", "RCCMNL83S18D969H", "131052-308T", "9001011234568", "12345678-Z",
    "AB 12 34 56 C", "123.45.6789", "2341:2341:2346", "234123412346", "a@b.co", "GB82 WEST 1234 5698 7654 32 X",
]  # fmt: skip
TRICKY_TEXT = st.lists(st.sampled_from(_PIECES) | st.text(max_size=3), max_size=14).map("".join)


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
@settings(max_examples=150, deadline=None)
@given(text=ANY_TEXT | TRICKY_TEXT)
def test_never_raises_and_is_idempotent(policy: Policy, text: str) -> None:
    once = sanitize_text(text, policy)
    twice = sanitize_text(once.value, policy)
    assert twice.value == once.value
    assert not twice.report.changed()
    assert once.report.changed() or once.value == text


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
@settings(max_examples=80, deadline=None)
@given(text=ANY_TEXT | TRICKY_TEXT)
def test_redact_pii_is_idempotent(policy: Policy, text: str) -> None:
    once = redact_pii(text, policy)
    again = redact_pii(once.value, policy)
    assert (again.value, again.report.changed()) == (once.value, False)


@settings(max_examples=200, deadline=None)
@given(text=ANY_TEXT | TRICKY_TEXT)
def test_detection_never_raises(text: str) -> None:
    for detect in (has_likely_secret, has_likely_pii, has_likely_email):
        assert detect(text) in (True, False)
    for policy in SPEC_POLICIES:
        assert has_likely_secret(text, policy) in (True, False)
        assert has_likely_pii(text, policy) in (True, False)
    assert isinstance(redact_credential_markers(text), str)


@pytest.mark.parametrize(
    "text", ["\ud800", "a\udfff b", "Bearer \ud83d abcd1234", "4111 1111 1111 1111\udc00", "uid\ud800 5299"]
)
def test_lone_surrogates_do_not_raise(text: str) -> None:
    for policy in POLICIES:
        sanitize_text(text, policy)
        has_likely_pii(text, policy)
        has_likely_secret(text, policy)


# --- Planted secrets. --------------------------------------------------------------------------------

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _run(alphabet: str, min_size: int, max_size: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=min_size, max_size=max_size or min_size + 12)


def _then_alnum(alphabet: str, min_size: int, max_size: int | None = None) -> st.SearchStrategy[str]:
    """A run that ends on a letter or digit, so a pattern's closing `\\b` falls right after it."""
    return st.builds(str.__add__, _run(alphabet, min_size - 1, max_size and max_size - 1), _run(_ALNUM, 1, 1))


# Each strategy draws (text to plant, the part that must not survive). The part is at least 8 characters
# long, so that finding it in the output means it survived rather than that a token or the
# surrounding text happens to spell it. These are safety.md's shapes, planted under its rules.
PLANTED: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "private_key": _run(_ALNUM + "+/=\n", 8, 60).map(
        lambda body: (f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----", body)
    ),
    "openssh_key": _run(_ALNUM + "+/=\n", 8, 60).map(
        lambda body: (f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----", body)
    ),
    "pgp_key": _run(_ALNUM + "+/=\n", 8, 60).map(
        lambda body: (f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n{body}\n-----END PGP PRIVATE KEY BLOCK-----", body)
    ),
    "bearer_header": _run(_ALNUM + "._~+/=-", 8)
    .filter(lambda v: any(c.isdigit() for c in v))
    .map(lambda v: (f"Bearer {v}", v)),
    "bearer_long": _run(_ALNUM + "._~+/=-", 12).map(lambda v: (f"bearer {v}", v)),
    "one_time_secret": _run(_ALNUM + "-_", 8).map(lambda v: (f"https://ots.example/secret/{v}", v)),
    "api_key": _run(_ALNUM, 8).map(lambda v: (f"api_key={v}", v)),
    "named_secret": _run(_ALNUM, 1).map(lambda v: (f"password: {v}", f"password: {v}")),
    "openai": _run(_ALNUM, 20).map(lambda v: (f"sk-{v}", v)),
    "github": st.tuples(st.sampled_from("pousr"), _then_alnum(_ALNUM + "_", 20)).map(
        lambda t: (f"gh{t[0]}_{t[1]}", t[1])
    ),
    "aws_key_id": _run(_UPPER_DIGITS, 16, 16).map(lambda v: (f"AKIA{v}", v)),
    "aws_sts_key_id": _run(_UPPER_DIGITS, 16, 16).map(lambda v: (f"ASIA{v}", v)),
    "jwt": st.tuples(*[_then_alnum(_ALNUM + "_-", 8)] * 3).map(
        lambda t: (f"eyJ{t[0]}.{t[1]}.{t[2]}", f"{t[1]}.{t[2]}")
    ),
    "oauth": _run(_ALNUM + ".", 1).map(lambda v: (f"code_verifier={v}", f"code_verifier={v}")),
    "google_api_key": _then_alnum(_ALNUM + "-_", 35, 35).map(lambda v: (f"AIza{v}", v)),
    "anthropic": _then_alnum(_ALNUM + "-_", 16).map(lambda v: (f"sk-ant-{v}", v)),
    "openai_scoped": st.tuples(st.sampled_from(["proj", "org"]), _then_alnum(_ALNUM + "-_", 12)).map(
        lambda t: (f"sk-{t[0]}-{t[1]}", t[1])
    ),
    "stripe": st.tuples(st.sampled_from(["sk_live_", "rk_test_"]), _run(_ALNUM, 16)).map(lambda t: (t[0] + t[1], t[1])),
    "slack": st.tuples(st.sampled_from("abpsr"), _then_alnum(_ALNUM + "-", 10)).map(
        lambda t: (f"xox{t[0]}-{t[1]}", t[1])
    ),
    "github_fine_grained": _then_alnum(_ALNUM + "_", 20).map(lambda v: (f"github_pat_{v}", v)),
    "gitlab": _then_alnum(_ALNUM + "-_", 16).map(lambda v: (f"glpat-{v}", v)),
    "npm": _run(_ALNUM, 20).map(lambda v: (f"npm_{v}", v)),
    "sendgrid": st.tuples(_then_alnum(_ALNUM + "_-", 16), _then_alnum(_ALNUM + "_-", 16)).map(
        lambda t: (f"SG.{t[0]}.{t[1]}", f"{t[0]}.{t[1]}")
    ),
}


@pytest.mark.parametrize("kind", PLANTED)
@settings(max_examples=60, deadline=None)
@given(data=st.data(), before=ANY_TEXT | TRICKY_TEXT, after=ANY_TEXT | TRICKY_TEXT)
def test_a_planted_secret_never_survives_the_spec_rules(
    kind: str, data: st.DataObject, before: str, after: str
) -> None:
    planted, secret = data.draw(PLANTED[kind])
    # A space on each side: a credential shape needs a word boundary, as it would have in real text.
    text = f"{before} {planted} {after}"
    assume(text.count(secret) == 1)
    for policy in SPEC_POLICIES:
        scrubbed = sanitize_text(text, policy)
        assert secret not in scrubbed.value
        assert scrubbed.report.changed()


def _generated(alphabet: str, size: int) -> st.SearchStrategy[str]:
    """A value as a generator makes one: it starts with a letter or a digit, holds a letter and a digit at
    least, and no character makes most of it."""
    return st.builds(str.__add__, _run(_ALNUM, 1, 1), _then_alnum(alphabet, size - 1, size + 11)).filter(
        lambda v: any(c.isdigit() for c in v) and any(c.isalpha() for c in v) and len(set(v)) >= len(v) // 3
    )


# The extended rules' planted secrets: realistic values (generated, mixed), each after a line break so
# that the keyword rule's "never crosses a line" holds whatever `before` ends with.
EXTENDED_PLANTED: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "private_key": PLANTED["private_key"],
    "unterminated_key": _run(_ALNUM + "+/=", 16, 60).map(lambda b: (f"-----BEGIN EC PRIVATE KEY-----\n{b}\n", b)),
    "bearer_header": PLANTED["bearer_header"],
    "one_time_secret": _generated(_ALNUM + "-_", 8).map(lambda v: (f"https://ots.example/secret/{v}", v)),
    "url_password": _generated(_ALNUM, 8).map(lambda v: (f"postgres://app:{v}@db.internal:5432/main", v)),
    "api_key": _generated(_ALNUM, 8).map(lambda v: (f"api_key={v}", v)),
    "password_yaml": _generated(_ALNUM + "!#%", 8).map(lambda v: (f"\n  password: {v}", v)),
    "client_secret_json": _generated(_ALNUM + "-_", 16).map(lambda v: (f'"client_secret": "{v}"', v)),
    "quoted_phrase": st.lists(st.sampled_from(["amber", "rotor", "quilt", "vivid", "north"]), min_size=3, max_size=5)
    .map(" ".join)
    .map(lambda v: (f'\npassphrase = "{v}"', v)),
    "openai": _generated(_ALNUM, 20).map(lambda v: (f"sk-{v}", v)),
    "github": PLANTED["github"],
    "aws_key_id": PLANTED["aws_key_id"],
    "jwt": PLANTED["jwt"],
    "google_api_key": PLANTED["google_api_key"],
    "stripe": PLANTED["stripe"],
    "slack": st.tuples(st.sampled_from("abpsr"), _then_alnum(_ALNUM + "-", 14)).map(
        lambda t: (f"xox{t[0]}-{t[1]}", t[1])
    ),
    "gitlab": PLANTED["gitlab"],
    "sendgrid": PLANTED["sendgrid"],
}


@pytest.mark.parametrize("kind", EXTENDED_PLANTED)
@settings(max_examples=25, deadline=None)
@given(data=st.data(), before=ANY_TEXT | TRICKY_TEXT, after=ANY_TEXT | TRICKY_TEXT)
def test_a_planted_secret_never_survives_the_extended_rules(
    kind: str, data: st.DataObject, before: str, after: str
) -> None:
    planted, secret = data.draw(EXTENDED_PLANTED[kind])
    text = f"{before} {planted} \n{after}"
    assume(text.count(secret) == 1)
    for policy in EXTENDED_POLICIES[:2]:
        scrubbed = sanitize_text(text, policy)
        assert secret not in scrubbed.value, scrubbed.value
        assert scrubbed.report.changed()
