"""Secret and PII scrubbing of item text before it is stored (spec: safety.md).

Regular expressions and checksums only: no network, no model, and no function here raises. The host runs
`scrub_item` between document conversion and `store`, and computes the item's fingerprint afterwards. It
prefers redacting a harmless string to letting a secret into a long-lived store.
"""

from pipeline.scrub._item import scrub_item
from pipeline.scrub._json import sanitize_json
from pipeline.scrub._report import BareCardGate, Policy, SanitizationReport, Sanitized
from pipeline.scrub._text import (
    has_likely_email,
    has_likely_pii,
    has_likely_secret,
    redact_credential_markers,
    redact_pii,
    sanitize_text,
)

__all__ = [
    "BareCardGate",
    "Policy",
    "SanitizationReport",
    "Sanitized",
    "has_likely_email",
    "has_likely_pii",
    "has_likely_secret",
    "redact_credential_markers",
    "redact_pii",
    "sanitize_json",
    "sanitize_text",
    "scrub_item",
]
