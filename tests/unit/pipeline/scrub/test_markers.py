"""Stage 2, credential markers (docs/spec/safety.md §4): the floors, the aggressive spelling and the continuation walk.

The spec's reference algorithm is transcribed below as an oracle; the implementation walks offsets into
the whole text instead of slicing, and must agree with it on any text.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.scrub import redact_credential_markers, sanitize_text
from pipeline.scrub.markers import redact_markers
from pipeline.scrub.needles import FoldedText

# --- The spec's pseudocode, kept as close to the text of docs/spec/safety.md §4 as Python allows. --------------------

_TOKEN = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.+/~=")
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _run_of_token_chars(value: str, i: int) -> int:
    while i < len(value) and value[i] in _TOKEN:
        i += 1
    return i


def _has_digit(value: str) -> bool:
    return any(c in "0123456789" for c in value)


def _first_floor(value: str, aggressive: bool) -> int:
    if _has_digit(value):
        return 4
    only_alnum = all(c.isascii() and c.isalnum() for c in value)
    return 6 if aggressive or not only_alnum else 12


def _continuation_floor(fragment: str) -> int:
    return 4 if _has_digit(fragment) else 8


def _find_bearer(text: str) -> int:
    return text.translate(_LOWER).find("bearer ")


def _next_marker(rest: str) -> tuple[int, str] | None:
    found = [(p, m) for p, m in ((rest.find("/secret/"), "/secret/"), (_find_bearer(rest), "bearer ")) if p >= 0]
    return min(found) if found else None


def reference_redact_markers(text: str) -> tuple[str, int]:
    if "/secret/" not in text and _find_bearer(text) < 0:
        return text, 0
    out, hits, rest = [], 0, text
    while (m := _next_marker(rest)) is not None:
        pos, marker = m
        out.append(rest[: pos + len(marker)])
        aggressive = marker == "/secret/" or rest[pos].isupper()
        tail = rest[pos + len(marker) :]
        ws = len(tail) - len(tail.lstrip())
        out.append(tail[:ws])
        value = tail[ws:]
        wrap = 1 if value[:1] in ("`", "'", '"') else 0
        out.append(value[:wrap])
        value = value[wrap:]
        end = _run_of_token_chars(value, 0)
        consumed = end
        if end >= _first_floor(value[:end], aggressive):
            out.append("[REDACTED]")
            hits += 1
            if value[end : end + 1] == " ":
                cursor = end
                while (sp := value.find(" ", cursor)) >= 0:
                    start = sp + 1
                    length = _run_of_token_chars(value, start) - start
                    if length == 0:
                        cursor = start
                        continue
                    fragment = value[start : start + length]
                    if len(fragment) < _continuation_floor(fragment):
                        break
                    out.append(" [REDACTED]")
                    hits += 1
                    cursor = start + length
                consumed = cursor
        else:
            out.append(value[:end])
        rest = tail[ws + wrap + consumed :]
    out.append(rest)
    return "".join(out), hits


# --- Vectors. ----------------------------------------------------------------------------------------

# (input, output of stage 2 alone, values and fragments replaced)
MARKER_VECTORS = [
    # Floors of the first value: 4 with a digit; 6 when aggressive or not only letters and digits; else 12.
    ("Bearer ab1", "Bearer ab1", 0),
    ("Bearer ab12", "Bearer [REDACTED]", 1),
    ("Bearer abcde", "Bearer abcde", 0),
    ("Bearer abcdef", "Bearer [REDACTED]", 1),
    ("bearer abcdef", "bearer abcdef", 0),
    ("bearer abc-ef", "bearer [REDACTED]", 1),
    ("bearer abcdefghijk", "bearer abcdefghijk", 0),
    ("bearer abcdefghijkl", "bearer [REDACTED]", 1),
    ("bearer ab12", "bearer [REDACTED]", 1),
    ("/secret/abcde", "/secret/abcde", 0),
    ("/secret/abcdef", "/secret/[REDACTED]", 1),
    ("/secret/x1y2", "/secret/[REDACTED]", 1),
    # Only a capital B is the header spelling; any other case of the marker is found but not aggressive.
    ("BEARER abcdef", "BEARER [REDACTED]", 1),
    ("bEARER abcdef", "bEARER abcdef", 0),
    # `/secret/` is case-sensitive; `bearer ` needs its trailing space and is found inside words.
    ("/SECRET/abcdef", "/SECRET/abcdef", 0),
    ("bearer\tabcdef1", "bearer\tabcdef1", 0),
    ("the cupbearer x1y2z3 came", "the cupbearer [REDACTED] came", 1),
    # Extra whitespace and one leading wrapper are kept; the closing wrapper stops the value.
    ("Bearer   'ab12' x", "Bearer   '[REDACTED]' x", 1),
    ('Bearer "ab12"', 'Bearer "[REDACTED]"', 1),
    ("Bearer ``ab12``", "Bearer ``ab12``", 0),
    # Continuation: only after a space stop, fragments over their own floor (4 with a digit, else 8).
    ("Bearer ab12 cd34 and", "Bearer [REDACTED] [REDACTED] and", 2),
    ("Bearer ab12 abcdefgh more", "Bearer [REDACTED] [REDACTED] more", 2),
    ("Bearer ab12 abcdefg more", "Bearer [REDACTED] abcdefg more", 1),
    ("Bearer ab12,cd34", "Bearer [REDACTED],cd34", 1),
    ("Bearer ab12  cd34", "Bearer [REDACTED] [REDACTED]", 2),
    # Skipped text between fragments is not copied, and a space consumed while probing stays consumed.
    ("Bearer abcd1234 , wxyz5678", "Bearer [REDACTED] [REDACTED]", 2),
    ("Bearer abcd1234 ,5 6", "Bearer [REDACTED],5 6", 1),
    # Several markers, each handled after the previous value.
    ("Bearer ab12 then /secret/cd34ef", "Bearer [REDACTED] then /secret/[REDACTED]", 2),
    ("/secret/bearer x1y2", "/secret/[REDACTED] [REDACTED]", 2),
    # A marker at the very end, or followed only by whitespace, leaves the text as it was.
    ("Bearer ", "Bearer ", 0),
    ("Bearer    ", "Bearer    ", 0),
    ("/secret/", "/secret/", 0),
    # Non-ASCII: the value is ASCII token characters only, and K (U+212A) is not an ASCII k.
    ("Bearer ab12é", "Bearer [REDACTED]é", 1),
    ("Bearer abcdéfgh", "Bearer abcdéfgh", 0),
    ("bearer\u00a0abcdef1", "bearer\u00a0abcdef1", 0),
    ("Bearer \u00a0ab12", "Bearer \u00a0[REDACTED]", 1),
]


@pytest.mark.parametrize(("text", "expected", "hits"), MARKER_VECTORS)
def test_marker_vector(text: str, expected: str, hits: int) -> None:
    assert redact_markers(FoldedText(text)) == (expected, hits)
    assert redact_credential_markers(text) == expected


@pytest.mark.parametrize(("text", "expected", "hits"), MARKER_VECTORS)
def test_oracle_agrees_with_vector(text: str, expected: str, hits: int) -> None:
    assert reference_redact_markers(text) == (expected, hits)


def test_no_marker_returns_the_same_object() -> None:
    text = "nothing to see here, just a bear and a secret"
    assert redact_credential_markers(text) is text


def test_marker_counts_one_text_redaction_per_value_and_fragment() -> None:
    report = sanitize_text("Bearer ab12 cd34 ef56 done").report
    assert report.text_redactions == 3


_MARKER_PIECES = ["Bearer ", "bearer ", "BEARER ", "/secret/", " ", "  ", "\t", "\u00a0", ",", "`", "'", '"']
_VALUE_PIECES = ["-", "=", "/", "ab12", "abcdefgh", "abcdefghijklm", "x", "é", "K", "İ", "ſ", "[REDACTED]", "\n"]
_MARKER_ALPHABET = st.sampled_from([*_MARKER_PIECES, *_VALUE_PIECES])


@settings(max_examples=400, deadline=None)
@given(st.lists(_MARKER_ALPHABET, max_size=14).map("".join))
def test_matches_reference_algorithm_on_marker_rich_text(text: str) -> None:
    assert redact_markers(FoldedText(text)) == reference_redact_markers(text)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_matches_reference_algorithm_on_any_text(text: str) -> None:
    assert redact_markers(FoldedText(text)) == reference_redact_markers(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A word after a marker is not its value, and may be the next marker: the token behind it is found.
        ("bEARER Bearer 00000000 ", "bEARER Bearer [REDACTED] "),
        ("the bearer Bearer abcdefgh12345 ok", "the bearer Bearer [REDACTED] ok"),
        ("Bearer tokens are fine", "Bearer tokens are fine"),
        ("bearer bearer bearer", "bearer bearer bearer"),
    ],
)
def test_the_extended_rules_look_for_a_marker_right_after_a_word_that_is_no_value(text: str, expected: str) -> None:
    assert sanitize_text(text).value == expected
