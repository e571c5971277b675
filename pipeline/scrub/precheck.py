"""One cheap test that a text holds nothing any stage would replace, so `sanitize_text` returns it at once.

Most texts a backfill meets hold no secret and no identifier, and each stage already proves that for itself
with a cheap exit before its patterns run. Taken one stage after another, those exits still cost a fold, a
probe object and a dozen calls per text. Here the same exits are taken together, for an ASCII text under the
extended rules (anything else takes the full path):

- stage 1 (`keys`) returns the text unless it holds `-----` or `PuTTY`;
- stage 2 (`markers`) unless it holds `/secret/` or, folded, `bearer `;
- stage 3 (`credentials`): URL passwords need an `@`; vendor tokens a run of token characters long enough
  for one that holds a needle of the formats found in runs (`_vendors.may_hold_run_token`: a link or a path
  holds none) or, folded, a needle of the shapes without a literal; the keyword rule one of its needles,
  folded;
- stage 4 (`pii`) finds nothing when the view (an ASCII text is its own) lacks the digits every class needs
  (`_pii._digit_span`) or the union of hints has no match from the first digit to LOOKBACK past the last,
  which is the range its windows come from; emails need an `@`.

Every literal is looked for in the lowered text, which for ASCII is the fold, and holds every case-sensitive
literal's lowering: a literal found there may be absent from the text (the full path then runs, and finds
nothing), but one absent there is absent from the text. So the test may say "maybe" wrongly, never "clean"
wrongly, and a clean text's result is the one pass that replaced nothing: the text itself and an empty
report. `tests/unit/pipeline/scrub/test_precheck.py` compares the two paths.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.scrub.assignments import NEEDLES as ASSIGNMENT_NEEDLES
from pipeline.scrub.classes import LOOKBACK
from pipeline.scrub.identifiers import EXTENDED_TABLE
from pipeline.scrub.markers import BEARER_MARKER, SECRET_MARKER
from pipeline.scrub.needles import minimal_needles
from pipeline.scrub.pii import _digit_span
from pipeline.scrub.report import SPEC_RULES, Policy
from pipeline.scrub.vendors import _SCAN_NEEDLES, may_hold_run_token

PRIVATE_KEY_LITERALS = ("-----", "PuTTY")
"""Stage 1 looks for a block only in a text holding one of these (`_keys._without_block`)."""
URL_CREDENTIAL_LITERAL = "@"
"""Stage 3 looks for URL passwords only in a text holding this (`_urls.find_url_credentials`); so does the
email class of stage 4."""

_LITERALS = minimal_needles(
    literal.lower()
    for literal in (
        *PRIVATE_KEY_LITERALS,
        SECRET_MARKER,
        BEARER_MARKER,
        URL_CREDENTIAL_LITERAL,
        *(needle for needle, _ in _SCAN_NEEDLES),
        *ASSIGNMENT_NEEDLES,
    )
)
"""Lowered, and none part of another: a lowered text holds some literal exactly when it holds one of these."""


def nothing_to_scrub(texts: Sequence[str], policy: Policy) -> bool:
    """True only when `sanitize_text(text, policy)` would return each of `texts` itself with an empty report.

    Several texts are tested together as one, joined by NUL: no literal holds a NUL, and a NUL is neither a
    token character nor a digit, so nothing found in the join spans two texts. Only where the join holds
    digits side by side is each text's search for the hints made on its own.
    """
    text = texts[0] if len(texts) == 1 else "\x00".join(texts)
    if policy.rules is SPEC_RULES or not text.isascii():
        return False
    if _holds_literal(text.lower()) or may_hold_run_token(text):
        return False
    if len(texts) == 1:
        return _without_identifier(text)
    return _digit_span(text, EXTENDED_TABLE) is None or all(_without_identifier(part) for part in texts)


def _holds_literal(lowered: str) -> bool:
    # A substring search each is cheaper here than one scan with `NeedleSet`'s pattern (short texts, and
    # every literal starts with a character common in prose).
    return any(literal in lowered for literal in _LITERALS)


def _without_identifier(text: str) -> bool:
    """Whether stage 4 finds nothing in an ASCII text (no `@` in it) under the extended rules."""
    digits = _digit_span(text, EXTENDED_TABLE)
    return digits is None or EXTENDED_TABLE.any_hint.search(text, digits[0], digits[1] + LOOKBACK) is None
