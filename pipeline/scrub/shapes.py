"""Stage 3: credential shapes (API keys, tokens, passwords after their name) are replaced.

The 18 patterns run in the spec's order, each on the previous one's output. Each carries needles, literals
every match must contain (see `needles`), so the scans a text cannot match are skipped: most text holds
none of them, and a skipped scan saves a pass over the whole text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.scrub.needles import FoldedText, NeedleSet

REDACTED = "[REDACTED]"


@dataclass(frozen=True)
class CredentialShape:
    """One credential pattern, whether its replacement keeps the matched prefix, and the needles that gate
    its scan."""

    name: str
    pattern: re.Pattern[str]
    keeps_prefix: bool  # the spec's `\g<1>[REDACTED]`; otherwise the whole match becomes `[REDACTED]`
    needles: tuple[str, ...]
    ignores_case: bool  # then the needles are looked up in the fold of the text

    def replacement(self, match: re.Match[str]) -> str:
        # Built directly: `Match.expand` parses its template again on every call.
        return match.group(1) + REDACTED if self.keeps_prefix else REDACTED


_KEEP_PREFIX = True  # the replacement keeps group 1, the name and separator
_WHOLE = False  # the whole match is replaced


def _shape(name: str, pattern: str, keeps_prefix: bool, *needles: str) -> CredentialShape:
    compiled = re.compile(pattern)
    return CredentialShape(name, compiled, keeps_prefix, needles, bool(compiled.flags & re.IGNORECASE))


CREDENTIAL_SHAPES: tuple[CredentialShape, ...] = (
    _shape("bearer", r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}", _KEEP_PREFIX, "bearer"),
    _shape(
        "api_key",
        r"""(?i)(api[_-]?key\s*[=:\s]\s*["']?)[^\s"']+""",
        _KEEP_PREFIX,
        *("apikey", "api_key", "api-key"),
    ),
    _shape(
        "named_secret",
        r"""(?i)\b(token|access[_-]?token|refresh[_-]?token|client[_-]?secret|password|secret)\b"""
        r"""\s*[=:\s]\s*["']?[^\s"'&]+""",
        _WHOLE,
        *("token", "password", "secret"),
    ),
    _shape("openai", r"\bsk-[A-Za-z0-9]{20,}\b", _WHOLE, "sk-"),
    _shape("github", r"\bgh[pousr]_[A-Za-z0-9_]{20,}\b", _WHOLE, *("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    _shape("aws_key_id", r"\bAKIA[0-9A-Z]{16}\b", _WHOLE, "AKIA"),
    _shape("aws_sts_key_id", r"\bASIA[0-9A-Z]{16}\b", _WHOLE, "ASIA"),
    _shape("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9._-]{8,}\.[A-Za-z0-9._-]{8,}\b", _WHOLE, "eyJ"),
    _shape(
        "oauth",
        r"""(?i)\b(access_token|refresh_token|id_token|authorization_code|code_verifier|code_challenge)\b"""
        r"""\s*[=:\s]\s*["']?[^\s"'&]+""",
        _WHOLE,
        *(
            "access_token",
            "refresh_token",
            "id_token",
            "authorization_code",
            "code_verifier",
            "code_challenge",
        ),
    ),
    _shape("google_api_key", r"\bAIza[0-9A-Za-z\-_]{35}\b", _WHOLE, "AIza"),
    _shape("anthropic", r"\bsk-ant-[A-Za-z0-9\-_]{16,}\b", _WHOLE, "sk-ant-"),
    _shape("openai_scoped", r"\bsk-(?:proj|org)-[A-Za-z0-9\-_]{12,}\b", _WHOLE, *("sk-proj-", "sk-org-")),
    _shape(
        "stripe",
        r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b",
        _WHOLE,
        *("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
    ),
    _shape(
        "slack",
        r"\bxox(?:a|b|p|s|r)-[A-Za-z0-9-]{10,}\b",
        _WHOLE,
        *("xoxa-", "xoxb-", "xoxp-", "xoxs-", "xoxr-"),
    ),
    _shape("github_fine_grained", r"\bgithub_pat_[A-Za-z0-9_]{20,}\b", _WHOLE, "github_pat_"),
    _shape("gitlab", r"\bglpat-[A-Za-z0-9\-_]{16,}\b", _WHOLE, "glpat-"),
    _shape("npm", r"\bnpm_[A-Za-z0-9]{20,}\b", _WHOLE, "npm_"),
    _shape("sendgrid", r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}\b", _WHOLE, "SG."),
)


def _substitute(shape: CredentialShape, text: str) -> tuple[str, int]:
    """Substitute every match; count those whose replacement differs from what they matched.

    Only the api_key shape can match its own output (`api_key=[REDACTED]`: its value class admits `[`).
    Counting that no-op would make a second scrub report a redaction that changed nothing.
    """
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        replaced = shape.replacement(match)
        if replaced != match.group():
            count += 1
        return replaced

    return shape.pattern.sub(replace, text), count


_FOLDED_NEEDLES = NeedleSet(n for s in CREDENTIAL_SHAPES if s.ignores_case for n in s.needles)
_EXACT_NEEDLES = NeedleSet(n for s in CREDENTIAL_SHAPES if not s.ignores_case for n in s.needles)


def _may_match_any(probe: FoldedText) -> bool:
    # Most text holds no needle at all, and two scans settle that for every shape at once.
    return _FOLDED_NEEDLES.occurs_in(probe.folded) or _EXACT_NEEDLES.occurs_in(probe.text)


def _may_match(shape: CredentialShape, probe: FoldedText) -> bool:
    haystack = probe.folded if shape.ignores_case else probe.text
    return any(map(haystack.__contains__, shape.needles))


def redact_shapes(probe: FoldedText) -> tuple[str, int]:
    """Replace every credential shape, in order; return the new text and the number of replacements."""
    if not _may_match_any(probe):
        return probe.text, 0
    hits = 0
    for shape in CREDENTIAL_SHAPES:
        if not _may_match(shape, probe):
            continue
        text, count = _substitute(shape, probe.text)
        if count:
            hits += count
            probe = FoldedText(text)
    return probe.text, hits


def has_credential_shape(probe: FoldedText) -> bool:
    """True when some credential shape matches the text."""
    return _may_match_any(probe) and any(
        _may_match(shape, probe) and shape.pattern.search(probe.text) is not None for shape in CREDENTIAL_SHAPES
    )
