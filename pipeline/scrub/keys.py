"""Stage 1: private-key blocks (PEM, OpenSSH, PGP) are replaced whole.

safety.md's three patterns need the END line. The extended rules take any `BEGIN ... PRIVATE KEY` label
(`ENCRYPTED`, `DSA`, `EC`, `OPENSSH`, `PGP ... BLOCK`), never run one block into the next, and redact a
block whose END line is missing (a truncated paste) to the end of its base64 body: its header lines and
every following line that is base64 through and through, whether the lines break for real or as the
`\\n` escapes of a JSON string (a GCP service-account file). PuTTY key files are taken whole.
"""

from __future__ import annotations

import re

from pipeline.scrub.needles import FoldedText

PRIVATE_KEY_TOKEN = "[REDACTED_PRIVATE_KEY]"

BLOCK_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?is)-----BEGIN(?: [A-Z]+)? PRIVATE KEY-----.*?-----END(?: [A-Z]+)? PRIVATE KEY-----"),
    re.compile(r"(?is)-----BEGIN OPENSSH PRIVATE KEY-----.*?-----END OPENSSH PRIVATE KEY-----"),
    re.compile(r"(?is)-----BEGIN PGP PRIVATE KEY BLOCK-----.*?-----END PGP PRIVATE KEY BLOCK-----"),
)

# Labels are words before PRIVATE KEY (`RSA`, `ENCRYPTED`, `PGP`), never dashes: an END line cannot reach
# into the next block's BEGIN line.
_LABEL = r"(?: [A-Z0-9]+){0,3} PRIVATE KEY(?: BLOCK)?-----"
_BEGIN = r"-----BEGIN" + _LABEL
_END = r"-----END" + _LABEL
# A line break, real or escaped in a JSON string, then a line that is base64 to its end, or a header line.
_BREAK = r"(?:\r?\n|\\r?\\n)"
_BODY_LINE = (
    _BREAK
    + r"(?:[ \t]*[A-Za-z0-9+/=]+[ \t]*(?=\r?\n|\\[rn]|\Z|[\"'`])|[A-Za-z][A-Za-z-]*: [^\r\n\\]*|[ \t]*(?=\r?\n|\\[rn]))"
)
EXTENDED_BLOCK_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?i)" + _BEGIN + r"(?:(?:(?!-----BEGIN)[\s\S])*?" + _END + r"|(?:" + _BODY_LINE + r")*)"),
    re.compile(r"(?s)PuTTY-User-Key-File-[0-9]+: .*?Private-MAC: [0-9a-fA-F]+"),
)

# Every block pattern holds both literals; without them no pattern can match (see `needles`).
_NEEDLES = ("-----begin", "private key")


def _may_hold_block(probe: FoldedText) -> bool:
    # The dashes are ASCII and case-free, so their absence rules a block out without folding the text.
    return "-----" in probe.text and all(needle in probe.folded for needle in _NEEDLES)


def _without_block(text: str, extended: bool) -> bool:
    # Every block holds one or the other; a capital Y is rare in prose and found by memchr.
    return "-----" not in text and (not extended or "Y" not in text or "PuTTY" not in text)


def _patterns(probe: FoldedText, extended: bool) -> tuple[re.Pattern[str], ...]:
    if _without_block(probe.text, extended):
        return ()
    if not extended:
        return BLOCK_PATTERNS if _may_hold_block(probe) else ()
    # PuTTY files hold no dashes, so the two patterns are gated apart.
    pem, putty = EXTENDED_BLOCK_PATTERNS
    gated = ((pem, _may_hold_block(probe)), (putty, "PuTTY-User-Key-File-" in probe.text))
    return tuple(pattern for pattern, possible in gated if possible)


def redact_private_keys(probe: FoldedText, *, extended: bool = False) -> tuple[str, int]:
    """Replace every private-key block; return the new text and the number of blocks replaced."""
    text = probe.text
    if _without_block(text, extended):
        return text, 0  # the common case, settled before any pattern is chosen
    hits = 0
    for pattern in _patterns(probe, extended):
        text, count = pattern.subn(PRIVATE_KEY_TOKEN, text)
        hits += count
    return text, hits


def has_private_key(probe: FoldedText, *, extended: bool = False) -> bool:
    """True when some block pattern matches the text."""
    return any(pattern.search(probe.text) for pattern in _patterns(probe, extended))
