"""The shared splitter against docs/spec/cortexdb.md §9: worked examples, edge cases, and a literal transcription of the
spec's reference algorithm as the oracle for property tests."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.chunking import (
    DOCUMENT_CHUNK_TARGET_BYTES,
    MAX_EVENT_TEXT_BYTES,
    MAX_SECTION_CHARS,
    PAGE_BREAK,
    SECTION_RESERVE,
    Piece,
    _units,
    escaped_char_len,
    escaped_len,
    heading_title,
    passages,
    split,
)

# --- The reference algorithm of docs/spec/cortexdb.md §9.3–9.5, transcribed literally (quadratic: small inputs) ---


def ref_heading(rest: str) -> str | None:
    line = rest.split("\n", 1)[0]
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return None
    hashes = len(stripped) - len(stripped.lstrip("#"))
    if not 1 <= hashes <= 6 or not stripped[hashes:].startswith(" "):
        return None
    title = stripped[hashes:].strip().rstrip("#").strip()
    return title[:120] or None


def ref_blank(s: str) -> bool:
    return all(c == "\f" or c.isspace() for c in s)


RefUnit = tuple[int, int, int, str | None]


def ref_units(text: str) -> list[RefUnit]:
    section: str | None
    out: list[RefUnit]
    out, page, section, start, start_page, line_start = [], 1, None, 0, 1, 0
    for at, ch in enumerate(text):
        brk = ch == "\f"
        title = ref_heading(text[at:]) if at == line_start else None
        if (brk or title) and not ref_blank(text[start:at]):
            out.append((start, at, start_page, section))
            start, start_page = at, page
        if brk:
            page += 1
            if ref_blank(text[start:at]):
                start_page = page
        if title:
            section = title
        if ch == "\n" or brk:
            line_start = at + 1
    if start < len(text):
        out.append((start, len(text), start_page, section))
    return out


def ref_char_len(ch: str) -> int:
    if ch in '"\\\n\r\t\b\f':
        return 2
    if ord(ch) < 0x20:
        return 6
    return len(ch.encode("utf-8"))


def ref_len(s: str) -> int:
    return sum(ref_char_len(ch) for ch in s)


def ref_cut_after(text: str, s: int, e: int, sep: str) -> list[tuple[int, int]]:
    cuts, frm, k = [], s, s
    while True:
        k = text.find(sep, k, e)
        if k < 0 or k + len(sep) >= e:
            break
        cuts.append((frm, k + len(sep)))
        frm = k = k + len(sep)
    cuts.append((frm, e))
    return cuts


def ref_parts(text: str, s: int, e: int, cap: int) -> list[tuple[int, int]]:
    if ref_len(text[s:e]) <= cap:
        return [(s, e)]
    for sep in ("\n\n", "\n"):
        cuts = ref_cut_after(text, s, e, sep)
        if len(cuts) > 1:
            merged: list[tuple[int, int]] = []
            for a, b in (r for c in cuts for r in ref_parts(text, *c, cap)):
                if merged and ref_len(text[merged[-1][0] : b]) <= cap:
                    merged[-1] = (merged[-1][0], b)
                else:
                    merged.append((a, b))
            return merged
    ranges, frm, used = [], s, 0
    for k in range(s, e):
        size = ref_char_len(text[k])
        if used + size > cap and k > frm:
            ranges.append((frm, k))
            frm, used = k, 0
        used += size
    ranges.append((frm, e))
    return ranges


def ref_split(text: str, overhead: int, target: int, limit: int) -> list[Piece]:
    room = max(limit - overhead, 1)
    pack = room if target == 0 else min(max(target - overhead, 1), room)
    paged = "\f" in text
    if target != 0 and ref_len(text) <= pack:
        return [Piece(text, 0, len(text), (1, text.count("\f") + 1) if paged else None, None)]
    pieces: list[Piece] = []
    group: list[tuple[int, int, int, str | None]] = []  # (start, end, page, section) of each part

    def close() -> None:
        start, end = group[0][0], group[-1][1]
        pages = (group[0][2], group[-1][2]) if paged else None
        pieces.append(Piece(text[start:end], start, end, pages, group[0][3]))

    for us, ue, page, section in ref_units(text):
        for a, b in ref_parts(text, us, ue, pack):
            if group and target != 0 and ref_len(text[group[0][0] : b]) <= pack:
                group.append((a, b, page, section))
                continue
            if group:
                close()
            group = [(a, b, page, section)]
    if group:
        close()
    return pieces


# --- Constants and sizes ---


def test_constants() -> None:
    assert PAGE_BREAK == "\f"
    assert DOCUMENT_CHUNK_TARGET_BYTES == 262_144
    assert MAX_EVENT_TEXT_BYTES == 786_432
    assert MAX_SECTION_CHARS == 120
    assert SECTION_RESERVE == 752


ESCAPE_CLASSES = [
    ('"', 2),
    ("\\", 2),
    ("\n", 2),
    ("\r", 2),
    ("\t", 2),
    ("\b", 2),
    ("\f", 2),
    ("\x00", 6),
    ("\x01", 6),
    ("\x0b", 6),
    ("\x1b", 6),
    ("\x1f", 6),
    (" ", 1),
    ("a", 1),
    ("/", 1),
    ("\x7f", 1),
    ("é", 2),
    ("\u2028", 3),
    ("€", 3),
    ("漢", 3),
    ("😀", 4),
]


@pytest.mark.parametrize(("ch", "size"), ESCAPE_CLASSES)
def test_escaped_len_of_each_class(ch: str, size: int) -> None:
    assert escaped_char_len(ch) == size
    assert escaped_len(ch) == size
    assert escaped_len(ch * 1000) == size * 1000


@pytest.mark.parametrize("text", ["", "ab"])
def test_escaped_char_len_takes_one_character(text: str) -> None:
    with pytest.raises(ValueError, match="one character"):
        escaped_char_len(text)


def test_escaped_len_sums_mixed_text() -> None:
    text = "".join(ch for ch, _ in ESCAPE_CLASSES)
    assert escaped_len(text) == sum(size for _, size in ESCAPE_CLASSES)
    assert escaped_len("") == 0


@given(st.text())
def test_escaped_len_is_compact_json_length(text: str) -> None:
    # json.dumps with ensure_ascii=False writes exactly the escapes docs/spec/cortexdb.md §9.2 prices.
    assert escaped_len(text) == len(json.dumps(text, ensure_ascii=False).encode()) - 2


# --- Headings ---


@pytest.mark.parametrize(
    ("rest", "title"),
    [
        ("# Title", "Title"),
        ("###### Six", "Six"),
        ("####### Seven", None),
        ("#NoSpace", None),
        ("   # Three spaces", "Three spaces"),
        ("    # Four spaces", None),
        ("# Trailing ##", "Trailing"),
        ("# Closed #", "Closed"),
        ("# Hash#", "Hash"),
        ("## C# and F#", "C# and F"),
        ("#", None),
        ("# ", None),
        ("#  ##  ", None),
        ("#\tTab", None),
        ("\t# Tab indent", None),
        ("#  Padded  \r", "Padded"),
        ("# First line\n# Second", "First line"),
        ("text\n# Not at start", None),
        ("\f# After break", None),
        ("# " + "x" * 200, "x" * 120),
        ("# " + "y" * 119 + " z", "y" * 119 + " "),
    ],
)
def test_heading_title(rest: str, title: str | None) -> None:
    assert heading_title(rest) == title
    assert heading_title(rest) == ref_heading(rest)


# --- Worked example A (docs/spec/cortexdb.md §9.6) ---

EXAMPLE_A = "Preface text.\n\f# Alpha\n" + "a" * 30 + "\n\n" + "b" * 30 + "\n## Beta\nshort beta\n\f\f  \n" + "c" * 50


def test_example_a_text() -> None:
    assert len(EXAMPLE_A) == 160
    assert escaped_len(EXAMPLE_A) == 171


def test_example_a_units() -> None:
    assert [tuple(u) for u in _units(EXAMPLE_A)] == [
        (0, 14, 1, None),
        (14, 86, 2, "Alpha"),
        (86, 105, 2, "Beta"),
        (105, 160, 4, "Beta"),
    ]
    assert [escaped_len(EXAMPLE_A[u.start : u.end]) for u in _units(EXAMPLE_A)] == [15, 77, 21, 58]


def test_example_a_pieces() -> None:
    pieces = split(EXAMPLE_A, overhead=20, target=60, limit=200)
    expected = [
        ("Preface text.\n\f# Alpha\n", 26, (1, 2), None),
        ("a" * 30 + "\n\n", 34, (2, 2), "Alpha"),
        ("b" * 30 + "\n", 32, (2, 2), "Alpha"),
        ("## Beta\nshort beta\n\f\f  \n", 29, (2, 4), "Beta"),
        ("c" * 40, 40, (4, 4), "Beta"),
        ("c" * 10, 10, (4, 4), "Beta"),
    ]
    assert [(p.text, escaped_len(p.text), p.pages, p.section) for p in pieces] == expected
    assert [(p.start, p.end) for p in pieces] == [
        (0, 23),
        (23, 55),
        (55, 86),
        (86, 110),
        (110, 150),
        (150, 160),
    ]
    assert pieces == ref_split(EXAMPLE_A, 20, 60, 200)


# --- Worked example B (docs/spec/cortexdb.md §9.7) ---

LINE = "x" * 99 + "\n"
EXAMPLE_B_OVERHEAD = 1007


def test_example_b_pages() -> None:
    body = PAGE_BREAK.join([LINE * 1500, LINE * 1500, LINE * 200])
    assert (len(body), escaped_len(body)) == (320_002, 323_204)
    assert [escaped_len(body[u.start : u.end]) for u in _units(body)] == [151_500, 151_502, 20_202]
    pieces = split(body, EXAMPLE_B_OVERHEAD, DOCUMENT_CHUNK_TARGET_BYTES, MAX_EVENT_TEXT_BYTES)
    assert [(escaped_len(p.text), p.pages, p.section) for p in pieces] == [
        (151_500, (1, 1), None),
        (171_704, (2, 3), None),
    ]
    assert "".join(p.text for p in pieces) == body


def test_example_b_headings() -> None:
    body = "".join(f"# {name}\n" + LINE * 2000 for name in ("One", "Two", "Three"))
    pieces = split(body, EXAMPLE_B_OVERHEAD, DOCUMENT_CHUNK_TARGET_BYTES, MAX_EVENT_TEXT_BYTES)
    assert [(escaped_len(p.text), p.pages, p.section) for p in pieces] == [
        (202_007, None, "One"),
        (202_007, None, "Two"),
        (202_009, None, "Three"),
    ]


# --- The one-piece case and the parameter edges of docs/spec/cortexdb.md §9.3 ---


@pytest.mark.parametrize(
    ("text", "pages"),
    [
        ("", None),
        ("# Heading\nbody", None),
        ("page one\fpage two\f", (1, 3)),
        ("\f", (1, 2)),
    ],
)
def test_one_piece_when_the_text_fits(text: str, pages: tuple[int, int] | None) -> None:
    assert split(text, overhead=10, target=1000, limit=2000) == [Piece(text, 0, len(text), pages, None)]


def test_fitting_exactly_is_one_piece_and_one_byte_more_is_not() -> None:
    text = "a" * 40
    assert len(split(text, overhead=20, target=60, limit=200)) == 1
    assert len(split(text + "a", overhead=20, target=60, limit=200)) == 2


def test_target_zero_makes_each_part_a_piece() -> None:
    text = "one\n\ntwo\n\nthree"
    pieces = split(text, overhead=0, target=0, limit=7)
    assert [p.text for p in pieces] == ["one\n\n", "two\n\n", "three"]
    assert split("", overhead=0, target=0, limit=7) == []


def test_no_room_cuts_by_single_characters() -> None:
    # limit - overhead < 1: room is 1, so every character (even a 6-byte one) stands alone.
    pieces = split("ab\x00", overhead=50, target=10, limit=10)
    assert [p.text for p in pieces] == ["a", "b", "\x00"]


def test_long_section_title_is_cut() -> None:
    text = "# " + "t" * 300 + "\n" + "body " * 20
    pieces = split(text, overhead=0, target=50, limit=1000)
    assert {p.section for p in pieces} == {"t" * MAX_SECTION_CHARS}


# --- passages ---


def test_passages_count_characters() -> None:
    # Example A sized in characters: the Alpha unit (72 characters) cuts at its blank line into 41 + 31, the
    # first of which cuts at line ends into 9 + 31 + 1, merged back into 40 and, with the b-line, 32.
    pieces = passages(EXAMPLE_A, 40)
    assert [(p.text, p.pages, p.section) for p in pieces] == [
        ("Preface text.\n", (1, 1), None),
        ("\f# Alpha\n" + "a" * 30 + "\n", (2, 2), "Alpha"),
        ("\n" + "b" * 30 + "\n", (2, 2), "Alpha"),
        ("## Beta\nshort beta\n\f\f  \n", (2, 4), "Beta"),
        ("c" * 40, (4, 4), "Beta"),
        ("c" * 10, (4, 4), "Beta"),
    ]


def test_passages_keep_a_short_text_whole() -> None:
    assert passages("short\ftext", 100) == [Piece("short\ftext", 0, 10, (1, 2), None)]
    # Sized in characters, not bytes: 10 CJK characters are 30 escaped bytes but fit a 10-character passage.
    assert len(passages("漢" * 10, 10)) == 1


def test_passages_refuse_a_target_below_one() -> None:
    with pytest.raises(ValueError, match="target_chars"):
        passages("text", 0)


# --- Properties against the reference ---

FRAGMENTS = st.sampled_from(
    [
        "a",
        "word ",
        " ",
        "\n",
        "\n\n",
        "\f",
        "\t",
        '"',
        "\\",
        "\x00",
        "é",
        "漢",
        "😀",
        "\u2028",
        "\xa0",
        "#",
        "# ",
        "# Title\n",
        "## Sub ##\n",
        "   ### Deep\n",
        "    # Indented\n",
        "####### Seven\n",
        "#NoSpace\n",
        "# \n",
    ]
)
TEXTS = st.lists(FRAGMENTS | st.text(max_size=4), max_size=40).map("".join)


@given(TEXTS)
def test_fast_units_agree_with_the_reference(text: str) -> None:
    assert [tuple(u) for u in _units(text)] == ref_units(text)


@settings(max_examples=300)
@given(
    TEXTS,
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=0, max_value=120),
    st.integers(min_value=0, max_value=200),
)
def test_split_agrees_with_the_reference(text: str, overhead: int, target: int, limit: int) -> None:
    assert split(text, overhead, target, limit) == ref_split(text, overhead, target, limit)


@given(TEXTS, st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=300))
def test_split_properties(text: str, overhead: int, target: int) -> None:
    limit = 200
    room = max(limit - overhead, 1)
    pack = room if target == 0 else min(max(target - overhead, 1), room)
    pieces = split(text, overhead, target, limit)

    assert "".join(p.text for p in pieces) == text
    assert all(p.text == text[p.start : p.end] for p in pieces)
    assert all(escaped_len(p.text) <= pack or len(p.text) == 1 for p in pieces)

    pages = [page for p in pieces if p.pages is not None for page in p.pages]
    if PAGE_BREAK in text:
        assert len(pages) == 2 * len(pieces)
        assert pages == sorted(pages)
        assert all(1 <= page <= text.count(PAGE_BREAK) + 1 for page in pages)
    else:
        assert pages == []


@given(TEXTS, st.integers(min_value=1, max_value=60))
def test_passages_properties(text: str, target: int) -> None:
    pieces = passages(text, target)
    assert "".join(p.text for p in pieces) == text
    assert all(len(p.text) <= target for p in pieces)
    if len(text) > target:
        units = {(u.start, u.section) for u in _units(text)}
        starts = sorted(units)
        for piece in pieces:
            owner = max(s for s in starts if s[0] <= piece.start)
            assert piece.section == owner[1]


# --- Scale ---


def test_a_twenty_megabyte_text_splits() -> None:
    page = "# Chapter\n" + ('Some "quoted" words, tabs\tand é.\n' * 30 + "\n") * 60
    text = PAGE_BREAK.join([page] * (20_000_000 // len(page)))
    assert len(text) > 19_000_000
    pack = DOCUMENT_CHUNK_TARGET_BYTES - 1007
    pieces = split(text, 1007, DOCUMENT_CHUNK_TARGET_BYTES, MAX_EVENT_TEXT_BYTES)
    assert "".join(p.text for p in pieces) == text
    assert all(escaped_len(p.text) <= pack for p in pieces)
    chunks = passages(text, 4000)
    assert "".join(p.text for p in chunks) == text
    assert all(len(p.text) <= 4000 for p in chunks)
