"""JSON scrubbing (docs/spec/safety.md §7): member names, the depth cap, strings as text, everything else as is."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.scrub import Policy, sanitize_json
from pipeline.scrub.json_values import MAX_DEPTH, is_sensitive_key

SENSITIVE_KEYS = [
    "apikey",
    "API-Key",
    "api_key",
    "apiKey",
    "token",
    "Access-Token",
    "refresh_token",
    "Authorization",
    "password",
    "secret",
    "client_secret",
    "x-auth-token",
    "github.token",
    "stripeApiKey",
    "myClientSecret",
    "ssh_key",
    "publicKey",
    "monkey",
    "db_password_hash",
    "passwordHint",
    "SecretName",
    "topsecretstuff",
    "tok\u00e9n-key",
    "sec ret",
]
PLAIN_KEYS = ["note", "tokens", "keys", "author", "keyboard", "pass", "word", "", "authorizations", "t0ken"]


@pytest.mark.parametrize("key", SENSITIVE_KEYS)
def test_sensitive_key(key: str) -> None:
    assert is_sensitive_key(key)
    result = sanitize_json({key: {"deep": ["anything"]}})
    assert result.value == {key: "[REDACTED_SECRET]"}
    assert result.report.key_redactions == 1


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_plain_key(key: str) -> None:
    assert not is_sensitive_key(key)
    assert sanitize_json({key: "hello"}).value == {key: "hello"}


def test_key_normalisation_keeps_only_ascii_letters_and_digits() -> None:
    # "ｔｏｋｅｎ" in fullwidth letters normalises to nothing; the Kelvin sign is not a k.
    assert not is_sensitive_key("ｔｏｋｅｎ")
    assert not is_sensitive_key("\u212aey")
    assert is_sensitive_key("é-token")


def test_non_string_keys_are_judged_by_their_text() -> None:
    assert sanitize_json({1: "a", None: "b"}).value == {1: "a", None: "b"}


def test_a_sensitive_value_is_replaced_whatever_its_type() -> None:
    value = {"token": 12, "password": None, "secret": [1, 2], "apiKey": {"a": 1}, "clientSecret": True}
    result = sanitize_json(value)
    assert result.value == dict.fromkeys(value, "[REDACTED_SECRET]")
    assert result.report.key_redactions == 5


def test_members_keep_their_order() -> None:
    value = {"z": "1", "password": "x", "a": "2", "m": {"y": 1, "b": 2}}
    assert list(sanitize_json(value).value) == ["z", "password", "a", "m"]
    assert list(sanitize_json(value).value["m"]) == ["y", "b"]


def test_strings_run_through_sanitize_text_with_the_policy() -> None:
    value = {"ts": "1787178633773", "list": ["Bearer s3cret", "CPF 529.982.247-25", 7, 1.5, True, None]}
    result = sanitize_json(value)
    assert result.value == {
        "ts": "[REDACTED_PII_CREDIT_CARD]",
        "list": ["Bearer [REDACTED]", "CPF [REDACTED_PII_CPF]", 7, 1.5, True, None],
    }
    assert (result.report.text_redactions, result.report.pii_redactions) == (1, 2)
    assert sanitize_json(value, Policy.corroborated()).value["ts"] == "1787178633773"


def test_a_top_level_string_or_scalar() -> None:
    assert sanitize_json("password: hunter2").value == "password: [REDACTED]"
    assert sanitize_json("password: hunter2", Policy.spec_compatible()).value == "[REDACTED]"
    assert sanitize_json(3).value == 3
    assert sanitize_json(None).value is None


def test_the_input_is_not_modified() -> None:
    value: Any = {"password": "x", "list": [{"note": "Bearer s3cret"}], "n": 1}
    before = copy.deepcopy(value)
    result = sanitize_json(value)
    assert value == before
    assert result.value["list"] is not value["list"]


def test_tuples_are_walked_as_arrays() -> None:
    assert sanitize_json(("Bearer s3cret", 1)).value == ["Bearer [REDACTED]", 1]


def _nest(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    ("depth", "expected_cut"),
    [(MAX_DEPTH - 1, False), (MAX_DEPTH, True), (MAX_DEPTH + 50, True)],
)
def test_depth_cap(depth: int, expected_cut: bool) -> None:
    # The leaf string sits at `depth`; every value at MAX_DEPTH or deeper is replaced unread.
    result = sanitize_json(_nest("x", depth))
    leaf = result.value
    for _ in range(min(depth, MAX_DEPTH)):
        leaf = leaf["k"]
    assert leaf == ("[REDACTED_SECRET]" if expected_cut else "x")
    assert result.report.depth_redactions == int(expected_cut)


def test_each_subtree_cut_counts_once() -> None:
    # Inside the list each `deep` is at depth 1, its inner object at MAX_DEPTH - 1 and both members at the cap.
    deep = _nest({"a": "x", "b": ["y"]}, MAX_DEPTH - 2)
    result = sanitize_json([deep, deep])
    assert result.report.depth_redactions == 4


def test_a_secret_member_at_the_cap_counts_as_a_key_redaction() -> None:
    result = sanitize_json(_nest({"password": "x"}, MAX_DEPTH - 1))
    assert (result.report.key_redactions, result.report.depth_redactions) == (1, 0)


def test_a_much_deeper_value_does_not_recurse_past_the_cap() -> None:
    result = sanitize_json(_nest("x", 5000))
    assert result.report.depth_redactions == 1


def test_reports_of_all_parts_are_summed() -> None:
    value = {"a": ["Bearer s3cret", "Bearer t0ken"], "token": 1, "b": {"secret": 2, "c": "CPF 529.982.247-25"}}
    report = sanitize_json(value).report
    assert (report.text_redactions, report.key_redactions, report.pii_redactions) == (2, 2, 1)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(_JSON)
def test_never_raises_and_keeps_the_shape(value: Any) -> None:
    result = sanitize_json(value)
    assert type(result.value) is type(value) or result.value == "[REDACTED_SECRET]" or isinstance(value, str)
    if isinstance(value, dict):
        assert list(result.value) == list(value)
