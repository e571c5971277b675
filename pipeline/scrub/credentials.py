"""Stage 3 of the extended rules: credentials in URLs, vendor tokens and values after secret-like names.

The three finders report spans on the same text; overlaps are resolved as the PII stage resolves them
(earliest, then longest, wins), and each kept span becomes `[REDACTED]` in one splice. So
`api_key=sk-...` is one redaction, not one per rule that saw it, and a rule never sees another's output
within a pass.
"""

from __future__ import annotations

from pipeline.scrub.assignments import find_assignments
from pipeline.scrub.needles import FoldedText
from pipeline.scrub.urls import find_url_credentials
from pipeline.scrub.vendors import find_vendor_tokens

REDACTED = "[REDACTED]"
Span = tuple[int, int]


def find_credentials(probe: FoldedText) -> list[Span]:
    """The spans to redact, sorted and without overlaps."""
    spans = find_url_credentials(probe.text) + find_vendor_tokens(probe) + find_assignments(probe)
    if len(spans) < 2:
        return spans
    kept: list[Span] = []
    last_end = 0
    for start, end in sorted(spans, key=lambda s: (s[0], s[0] - s[1])):
        if start >= last_end and end > start:
            kept.append((start, end))
            last_end = end
    return kept


def redact_credentials(probe: FoldedText) -> tuple[str, int]:
    """Replace every credential; return the new text and the number of spans replaced."""
    spans = find_credentials(probe)
    if not spans:
        return probe.text, 0
    text = probe.text
    out: list[str] = []
    pos = 0
    for start, end in spans:
        out.extend((text[pos:start], REDACTED))
        pos = end
    out.append(text[pos:])
    return "".join(out), len(spans)


def has_credential(probe: FoldedText) -> bool:
    """True when some credential would be redacted."""
    return bool(find_credentials(probe))
