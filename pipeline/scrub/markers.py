"""Stage 2: the value after a credential marker (`/secret/`, `Bearer `) is replaced, the marker kept.

Shape matching misses one-time-secret links, whose key looks like nothing in particular, and bearer values
shorter than the 8-character floor of shape 1. Both are found by their marker instead. The walk below is the
spec's reference algorithm (docs/spec/safety.md §4), kept step for step because its quirks (text skipped between
continuation fragments is dropped) are part of the behaviour the Rust implementation has.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pipeline.scrub.needles import FoldedText

ValueFilter = Callable[[str], bool]
"""Whether a value that passed its floor is redacted; the extended rules spare placeholders and words."""

REDACTED = "[REDACTED]"
SECRET_MARKER = "/secret/"
BEARER_MARKER = "bearer "

_TOKEN_RUN = re.compile(r"[A-Za-z0-9\-_.+/~=]*")
_ASCII_DIGIT = re.compile(r"[0-9]")
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]*")
# `\s` is the `str.isspace()` set, the characters the spec's `tail.lstrip()` removes.
_SPACES = re.compile(r"\s*")
_WRAPPERS = ("`", "'", '"')


def _run_end(text: str, start: int, run: re.Pattern[str] = _TOKEN_RUN) -> int:
    """Index of the first character at or after `start` that `run` does not take (or `len(text)`)."""
    match = run.match(text, start)
    return match.end() if match else start


def _first_floor(value: str, aggressive: bool) -> int:
    if _ASCII_DIGIT.search(value):
        return 4
    if aggressive or not _ASCII_ALNUM.fullmatch(value):
        return 6
    return 12


def _continuation_floor(fragment: str) -> int:
    return 4 if _ASCII_DIGIT.search(fragment) else 8


def _redact_continuations(text: str, cursor: int, out: list[str]) -> tuple[int, int]:
    """Redact space-separated fragments after a redacted value ending at `cursor`; return (new cursor,
    hits). Offsets are into the whole text: slicing off each value would copy the text once per marker."""
    hits = 0
    while (space := text.find(" ", cursor)) >= 0:
        start = space + 1
        end = _run_end(text, start)
        if end == start:
            # A repeated space or punctuation: keep probing; what is skipped is not copied.
            cursor = start
            continue
        if end - start < _continuation_floor(text[start:end]):
            break  # prose resumes
        out.append(" " + REDACTED)
        hits += 1
        cursor = end
    return cursor, hits


def _redact_adjacent(text: str, cursor: int, out: list[str], accepts: ValueFilter) -> tuple[int, int]:
    """The extended rules' continuation: only fragments one space apart on the same line, each accepted,
    and nothing between them is dropped."""
    hits = 0
    while text.startswith(" ", cursor):
        start = cursor + 1
        end = _run_end(text, start)
        fragment = text[start:end]
        if end == start or end - start < _continuation_floor(fragment) or not accepts(fragment):
            break
        out.append(" " + REDACTED)
        hits += 1
        cursor = end
    return cursor, hits


def _redact_value(
    text: str, start: int, aggressive: bool, out: list[str], accepts: ValueFilter | None
) -> tuple[int, int]:
    """Handle the value starting at `start`; return (where the unhandled text begins, hits)."""
    end = _run_end(text, start)
    value = text[start:end]
    if end - start < _first_floor(value, aggressive) or (accepts is not None and not accepts(value)):
        if accepts is not None:
            # Not a value, so perhaps the next marker: "bearer Bearer eyJ…" hides the token behind a word.
            return start, 0
        out.append(text[start:end])  # too short to be a secret (safety.md's walk skips it)
        return end, 0
    out.append(REDACTED)
    if text[end : end + 1] != " ":
        return end, 1  # only a space stop continues the run
    if accepts is not None:
        cursor, hits = _redact_adjacent(text, end, out, accepts)
    else:
        cursor, hits = _redact_continuations(text, end, out)
    return cursor, hits + 1


def _next_marker(probe: FoldedText, pos: int) -> tuple[int, str] | None:
    """The earliest marker at or after `pos`: its offset and which marker it is.

    `bearer ` is looked up in the fold, which has the text's offsets; only `B` and `b` fold to `b`, and
    likewise for `e`, `a` and `r`, so there the fold is exactly the ASCII lowering the spec asks for.
    """
    secret = probe.text.find(SECRET_MARKER, pos)
    bearer = probe.folded.find(BEARER_MARKER, pos)
    if bearer < 0 or 0 <= secret < bearer:
        return None if secret < 0 else (secret, SECRET_MARKER)
    return bearer, BEARER_MARKER


def redact_markers(probe: FoldedText, accepts: ValueFilter | None = None) -> tuple[str, int]:
    """Replace the values after credential markers; return the new text (the same object when no marker
    occurs) and the number of values and continuation fragments replaced.

    `accepts`, when given, must also accept each value and fragment, and fragments then continue only
    one space apart on the same line, with nothing between them dropped (the extended rules); safety.md
    has neither.
    """
    text = probe.text
    marker = _next_marker(probe, 0)
    if marker is None:
        return text, 0
    out: list[str] = []
    hits = 0
    pos = 0
    while marker is not None:
        at, name = marker
        # Capital `Bearer ` is the header spelling; lower-case "bearer" is also an English word.
        aggressive = name == SECRET_MARKER or text[at].isupper()
        # Kept: everything up to the marker, the marker, extra whitespace after it and one leading wrapper.
        start = _run_end(text, at + len(name), _SPACES)
        if text[start : start + 1] in _WRAPPERS:
            start += 1
        out.append(text[pos:start])
        pos, value_hits = _redact_value(text, start, aggressive, out, accepts)
        hits += value_hits
        marker = _next_marker(probe, pos)
    out.append(text[pos:])
    return "".join(out), hits
