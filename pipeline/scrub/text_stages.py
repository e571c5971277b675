"""Scrubbing and probing free text: the four stages in order (docs/spec/safety.md §2) and the detection functions."""

from __future__ import annotations

from collections.abc import Callable

from pipeline.scrub.credentials import has_credential, redact_credentials
from pipeline.scrub.emails import has_email
from pipeline.scrub.keys import has_private_key, redact_private_keys
from pipeline.scrub.markers import redact_markers
from pipeline.scrub.needles import FoldedText
from pipeline.scrub.pii import has_identifier, redact_identifiers
from pipeline.scrub.precheck import nothing_to_scrub
from pipeline.scrub.report import DEFAULT_POLICY, SPEC_RULES, Policy, SanitizationReport, Sanitized
from pipeline.scrub.shapes import has_credential_shape, redact_shapes
from pipeline.scrub.values import is_placeholder
from pipeline.scrub.words import is_ordinary

_MAX_PASSES = 16


def _marker_value_accepted(value: str) -> bool:
    # "Bearer tokens are...", "/secret/create": a word or a placeholder after a marker is not its value.
    return not (is_placeholder(value) or is_ordinary(value))


OnePass = Callable[[str], "tuple[str, SanitizationReport | None]"]
"""One pass over a text: the new text, and the report of what it replaced or None when it replaced nothing."""


def _sanitize_once(text: str, policy: Policy) -> tuple[str, SanitizationReport | None]:
    """The four stages of docs/spec/safety.md §2, in order, each on the previous one's output.

    Under the extended rules stage 3 is `credentials` (URLs, vendor formats, values after secret-like
    names) instead of safety.md's 18 shapes, and stages 1, 2 and 4 run their extended variants.
    """
    extended = policy.rules is not SPEC_RULES
    # The stages share one fold of the text until one of them changes it.
    probe = FoldedText(text)
    text, blocks = redact_private_keys(probe, extended=extended)
    if blocks:
        probe = FoldedText(text)
    text, markers = redact_markers(probe, _marker_value_accepted if extended else None)
    if markers:
        probe = FoldedText(text)
    text, shapes = redact_credentials(probe) if extended else redact_shapes(probe)
    text, identifiers = redact_identifiers(text, policy)
    if not (blocks or markers or shapes or identifiers):
        return text, None  # most texts: no report to build for a pass that is then thrown away
    report = SanitizationReport(
        blocked_secret_hits=blocks, text_redactions=markers + shapes, pii_redactions=identifiers
    )
    return text, report


def sanitize_text(text: str, policy: Policy = DEFAULT_POLICY) -> Sanitized[str]:
    """Remove private keys, credential values and personal identifiers from `text`; never raises.

    Scrubbing the result again changes nothing and reports nothing. One pass of the four stages, which is
    all docs/spec/safety.md §2 describes, does not promise that: a value a stage consumed can hide a second marker,
    and a checksum-failing candidate can hide a valid identifier, until a later redaction uncovers them.
    So the stages repeat until a pass finds nothing, which costs one extra pass on the texts that had
    something to redact, and the report sums the passes. Every pass that changes the text removes some of
    what is not a redaction token, so the passes end; the bound is a backstop.
    """
    if nothing_to_scrub((text,), policy):
        return Sanitized(text, SanitizationReport())  # most texts: every stage's cheap exit, taken at once
    return sanitize_fully(text, policy)


def sanitize_fully(text: str, policy: Policy) -> Sanitized[str]:
    """`sanitize_text` without the shortcut of `precheck`: every stage runs (what the shortcut must equal)."""
    first, found = _sanitize_once(text, policy)
    if found is None:
        return Sanitized(first, SanitizationReport())  # most texts: one pass that replaced nothing
    return _until_stable(lambda current: _sanitize_once(current, policy), first, found)


def _until_stable(one_pass: OnePass, text: str, found: SanitizationReport | None = None) -> Sanitized[str]:
    """Repeat `one_pass` until it replaces nothing; `found` is the report of a pass already run on `text`."""
    report = SanitizationReport() if found is None else found
    for _ in range(_MAX_PASSES - (found is not None)):
        text, found = one_pass(text)
        if found is None or not found.changed():
            break
        report = report.merge(found)
    return Sanitized(text, report)


def redact_credential_markers(text: str) -> str:
    """Stage 2 alone, as docs/spec/safety.md §4 has it: replace the values after `/secret/` and `Bearer `.

    Returns the same object, uncopied, when neither marker occurs.
    """
    return redact_markers(FoldedText(text))[0]


def _redact_pii_once(text: str, policy: Policy) -> tuple[str, SanitizationReport | None]:
    text, identifiers = redact_identifiers(text, policy)
    return text, SanitizationReport(pii_redactions=identifiers)


def redact_pii(text: str, policy: Policy = DEFAULT_POLICY) -> Sanitized[str]:
    """Stage 4 alone: replace personal identifiers with `[REDACTED_PII_<CLASS>]` tokens.

    Repeated until stable, as `sanitize_text` is, so that the result is a fixed point too.
    """
    return _until_stable(lambda current: _redact_pii_once(current, policy), text)


def has_likely_secret(text: str, policy: Policy = DEFAULT_POLICY) -> bool:
    """True when a private-key block or a credential occurs; markers alone are not consulted."""
    probe = FoldedText(text)
    if policy.is_spec:
        return has_private_key(probe) or has_credential_shape(probe)
    return has_private_key(probe, extended=True) or has_credential(probe)


def has_likely_pii(text: str, policy: Policy = DEFAULT_POLICY) -> bool:
    """True when an identifier of a checked or keyword class occurs.

    Bare numbers (cards, bare CPF, CNPJ and Aadhaar, undashed RRN, phones) are left out: this guards
    namespaces and keys, where scanner-built ids (chat ids, numeric peer ids, millisecond timestamps)
    would be refused constantly.
    """
    return has_identifier(text, policy)


def has_likely_email(text: str) -> bool:
    """True when the text holds an email address. Addresses are detected; `Policy.redact_emails` redacts."""
    return has_email(text)
