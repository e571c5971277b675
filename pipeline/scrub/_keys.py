"""Stage 1: private-key blocks (PEM, OpenSSH, PGP) are replaced whole."""

from __future__ import annotations

import re

from pipeline.scrub._needles import FoldedText

PRIVATE_KEY_TOKEN = "[REDACTED_PRIVATE_KEY]"

BLOCK_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?is)-----BEGIN(?: [A-Z]+)? PRIVATE KEY-----.*?-----END(?: [A-Z]+)? PRIVATE KEY-----"),
    re.compile(r"(?is)-----BEGIN OPENSSH PRIVATE KEY-----.*?-----END OPENSSH PRIVATE KEY-----"),
    re.compile(r"(?is)-----BEGIN PGP PRIVATE KEY BLOCK-----.*?-----END PGP PRIVATE KEY BLOCK-----"),
)

# Every block pattern holds both literals; without them no pattern can match (see `_needles`).
_NEEDLES = ("-----begin", "private key")


def _may_hold_block(probe: FoldedText) -> bool:
    # The dashes are ASCII and case-free, so their absence rules a block out without folding the text.
    return "-----" in probe.text and all(needle in probe.folded for needle in _NEEDLES)


def redact_private_keys(probe: FoldedText) -> tuple[str, int]:
    """Replace every private-key block; return the new text and the number of blocks replaced."""
    text = probe.text
    if not _may_hold_block(probe):
        return text, 0
    hits = 0
    for pattern in BLOCK_PATTERNS:
        text, count = pattern.subn(PRIVATE_KEY_TOKEN, text)
        hits += count
    return text, hits


def has_private_key(probe: FoldedText) -> bool:
    """True when some block pattern matches the text."""
    return _may_hold_block(probe) and any(pattern.search(probe.text) for pattern in BLOCK_PATTERNS)
