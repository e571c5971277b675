"""The public surface of `pipeline.scrub` (docs/spec/safety.md §1, plus `RuleSet`), the policy and the report
(docs/spec/safety.md §9)."""

from __future__ import annotations

import inspect
from dataclasses import FrozenInstanceError, fields, replace
from types import ModuleType

import pytest

import pipeline.scrub as scrub
from pipeline.scrub import BareCardGate, Policy, RuleSet, SanitizationReport, Sanitized, sanitize_json, sanitize_text
from pipeline.scrub.text_stages import _sanitize_once

SPEC_SURFACE = {
    "BareCardGate",
    "Policy",
    "SanitizationReport",
    "Sanitized",
    "sanitize_text",
    "sanitize_json",
    "scrub_item",
    "redact_credential_markers",
    "redact_pii",
    "has_likely_secret",
    "has_likely_pii",
    "has_likely_email",
    "RuleSet",
}


def test_all_is_sorted_complete_and_the_spec_surface() -> None:
    public = {
        name for name, value in vars(scrub).items() if not name.startswith("_") and not isinstance(value, ModuleType)
    }
    assert scrub.__all__ == sorted(scrub.__all__)
    assert set(scrub.__all__) == public == SPEC_SURFACE


@pytest.mark.parametrize("name", sorted(SPEC_SURFACE))
def test_every_public_name_has_a_docstring(name: str) -> None:
    assert inspect.getdoc(getattr(scrub, name))


def test_policy_defaults_to_the_strictest_gate_and_the_extended_rules() -> None:
    assert Policy().bare_card is BareCardGate.LUHN_ONLY
    assert (Policy().rules, Policy().redact_emails) == (RuleSet.EXTENDED, False)
    assert Policy.spec_compatible() == Policy(rules=RuleSet.SPEC)
    assert [r.value for r in RuleSet] == ["extended", "spec"]
    assert Policy.corroborated() == Policy(bare_card=BareCardGate.CORROBORATED)
    assert [g.value for g in BareCardGate] == ["luhn_only", "corroborated"]
    with pytest.raises(FrozenInstanceError):
        Policy().bare_card = BareCardGate.CORROBORATED  # type: ignore[misc]


def test_every_function_defaults_to_the_default_policy() -> None:
    for name in ("sanitize_text", "sanitize_json", "scrub_item", "redact_pii", "has_likely_secret", "has_likely_pii"):
        assert inspect.signature(getattr(scrub, name)).parameters["policy"].default == Policy()


def test_report_changed_is_any_positive_counter() -> None:
    assert not SanitizationReport().changed()
    for field in fields(SanitizationReport):
        assert SanitizationReport(**{field.name: 1}).changed()


def test_report_merge_is_a_field_wise_sum_that_modifies_neither() -> None:
    a = SanitizationReport(1, 2, 3, 4, 5)
    b = SanitizationReport(10, 20, 30, 40, 50)
    assert a.merge(b) == SanitizationReport(11, 22, 33, 44, 55)
    assert (a, b) == (SanitizationReport(1, 2, 3, 4, 5), SanitizationReport(10, 20, 30, 40, 50))


def test_report_field_order_is_the_spec_order() -> None:
    names = [f.name for f in fields(SanitizationReport)]
    assert names == ["blocked_secret_hits", "text_redactions", "key_redactions", "depth_redactions", "pii_redactions"]


def test_sanitized_holds_the_value_and_its_report() -> None:
    result = sanitize_text("nothing here")
    assert isinstance(result, Sanitized)
    assert (result.value, result.report) == ("nothing here", SanitizationReport())


def test_the_report_never_holds_an_original_value() -> None:
    secret = "hunter2-s3cret-value"
    result = sanitize_json({"note": f"password: {secret}", "token": secret})
    assert secret not in repr(result.report)
    assert all(isinstance(getattr(result.report, f.name), int) for f in fields(result.report))


def test_counters_of_one_text_across_stages() -> None:
    text = (
        "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"
        "Bearer ab12 cd34 then ghp_abcdefghijklmnopqrstuvwxyz0123 and CPF 529.982.247-25"
    )
    result = sanitize_text(text)
    assert result.value == (
        "[REDACTED_PRIVATE_KEY]\nBearer [REDACTED] [REDACTED] then [REDACTED] and CPF [REDACTED_PII_CPF]"
    )
    report = result.report
    assert (report.blocked_secret_hits, report.text_redactions, report.pii_redactions) == (1, 3, 1)
    assert (report.key_redactions, report.depth_redactions) == (0, 0)


SECOND_PASS_VECTORS = [
    # The marker stage takes the first "bearer" as the first marker's (short) value, which hides the second
    # marker, until the shape stage redacts that value as an api key.
    (
        Policy.spec_compatible(),
        "API-KEY: bearer bearer API-KEY: ",
        "API-KEY: [REDACTED] bearer API-KEY: ",
        "API-KEY: [REDACTED] bearer [REDACTED]: ",
    ),
    # The card candidate "45-6789-1787178633773" fails Luhn, and finditer does not retry shorter ones, so
    # the valid 13-digit card inside stays hidden until the SSN before it is redacted.
    (
        Policy.spec_compatible(),
        "123-45-6789-1787178633773",
        "[REDACTED_PII_SSN]-1787178633773",
        "[REDACTED_PII_SSN]-[REDACTED_PII_CREDIT_CARD]",
    ),
    # Under CORROBORATED the bare 13-digit run has no issuer prefix and no keyword nearby, until the token
    # that replaces its neighbour puts "CREDIT_CARD" within 64 bytes of it.
    (
        replace(Policy.spec_compatible(), bare_card=BareCardGate.CORROBORATED),
        "1787178633773\u20104111111111111111",
        "1787178633773\u2010[REDACTED_PII_CREDIT_CARD]",
        "[REDACTED_PII_CREDIT_CARD]\u2010[REDACTED_PII_CREDIT_CARD]",
    ),
]


@pytest.mark.parametrize(("policy", "text", "one_pass", "stable"), SECOND_PASS_VECTORS)
def test_passes_repeat_until_nothing_is_found(policy: Policy, text: str, one_pass: str, stable: str) -> None:
    assert _sanitize_once(text, policy)[0] == one_pass
    result = sanitize_text(text, policy)
    assert result.value == stable
    assert not sanitize_text(stable, policy).report.changed()
    first, second = _sanitize_once(text, policy)[1], _sanitize_once(one_pass, policy)[1]
    assert first is not None and second is not None
    assert result.report == first.merge(second)
    assert _sanitize_once(stable, policy) == (stable, None)
