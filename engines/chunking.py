"""Cutting long texts into contiguous pieces that keep their page and section (docs/spec/cortexdb.md §9).

One algorithm serves two callers. `split` counts sizes in JSON-escaped UTF-8 bytes, because a CortexDB event's
text travels inside a JSON envelope with a byte limit. `passages` counts characters, for an engine that cuts a
long document into search passages of a given length. Both cut a text into units at page breaks and markdown
headings, cut a unit that is too big at blank lines, then at line ends, then between characters, and pack the
resulting parts greedily into pieces. Joined in order, the pieces always give back the text exactly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

PAGE_BREAK = "\f"
DOCUMENT_CHUNK_TARGET_BYTES = 262_144
MAX_EVENT_TEXT_BYTES = 786_432
MAX_SECTION_CHARS = 120
# A section title of MAX_SECTION_CHARS characters that all escape to six bytes, plus its key and punctuation.
SECTION_RESERVE = MAX_SECTION_CHARS * 6 + 32

# The size of `text[start:end]`: escaped bytes for events, characters for passages. It must be additive over
# concatenation (and at least 1 a character), which lets sizes be summed from parts instead of measured again.
_Measure = Callable[[str, int, int], int]

_SHORT_ESCAPES = '"\\\n\r\t\b\f'
_SHORT_ESCAPE_BYTES = _SHORT_ESCAPES.encode()
_UNESCAPED_BYTES = bytes(b for b in range(0x20, 0x100) if b not in _SHORT_ESCAPE_BYTES)
_SEPARATORS = ("\n\n", "\n")

# What can end a unit: a run of page breaks, or the opening of a heading line; a line starts at the text's
# start (`_HEADING_OPENING.match`) or after "\n" or "\f". `heading_title` decides whether it has a title.
# The pattern opens with a character class so the regex engine skips ahead to "\f" and "\n" in C.
_HEADING = r" {0,3}#{1,6} "
_HEADING_OPENING = re.compile(_HEADING)
_UNIT_EVENTS = re.compile(rf"[\f\n](?:(?<=\f)(?P<run>\f*)(?P<after_break>{_HEADING})?|(?P<after_newline>{_HEADING}))")
# `\s` in a str pattern is exactly `str.isspace`, the spec's stand-in for Unicode whitespace ("\f" included).
_SOLID = re.compile(r"\S")


@dataclass(frozen=True, slots=True)
class Piece:
    """A contiguous slice `text[start:end]` of the split text.

    `pages` is `(first, last)`, counted from 1, only when the text holds a page break. `section` is the title
    of the last heading at or before the start of the unit the piece starts in; a text kept whole has none.
    """

    text: str
    start: int
    end: int
    pages: tuple[int, int] | None
    section: str | None


class _Unit(NamedTuple):
    start: int
    end: int
    page: int
    section: str | None


class _Part(NamedTuple):
    start: int
    end: int
    size: int


def escaped_len(s: str) -> int:
    """The length of `s` as JSON-escaped UTF-8 (docs/spec/cortexdb.md §9.2).

    `"`, `\\`, `\\n`, `\\r`, `\\t`, `\\b`, `\\f` cost 2, other characters below U+0020 cost 6, every other
    character its UTF-8 length. Additive: `escaped_len(a + b) == escaped_len(a) + escaped_len(b)`. A lone
    surrogate counts its three bytes.
    """
    raw = s.encode("utf-8", "surrogatepass")
    # Every byte below 0x80 in UTF-8 is a whole ASCII character, so the escaped characters can be counted as
    # bytes: one pass over the text keeps them, the rest runs over that (usually short) remainder.
    escaped = raw.translate(None, _UNESCAPED_BYTES)
    if not escaped:
        return len(raw)
    short = len(escaped) - len(escaped.translate(None, _SHORT_ESCAPE_BYTES))
    return len(raw) + short + 5 * (len(escaped) - short)


def escaped_char_len(ch: str) -> int:
    """`escaped_len` of the single character `ch`."""
    if len(ch) != 1:
        raise ValueError(f"escaped_char_len takes one character, got {len(ch)}; use escaped_len for strings")
    if ch in _SHORT_ESCAPES:
        return 2
    if ch < " ":
        return 6
    return len(ch.encode("utf-8", "surrogatepass"))


def heading_title(rest: str) -> str | None:
    """The title of the markdown heading that opens `rest`, or None when its first line is no heading.

    `rest` must start at a line start. A heading is up to 3 spaces, 1 to 6 `#`, a space, then a title that
    is not empty once surrounding whitespace and trailing `#`s are removed; the title is cut to
    MAX_SECTION_CHARS characters.
    """
    end = rest.find("\n")
    line = rest if end < 0 else rest[:end]
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return None
    hashes = len(stripped) - len(stripped.lstrip("#"))
    if not 1 <= hashes <= 6 or not stripped[hashes:].startswith(" "):
        return None
    title = stripped[hashes:].strip().rstrip("#").strip()
    return title[:MAX_SECTION_CHARS] or None


def split(text: str, overhead: int, target: int, limit: int) -> list[Piece]:
    """Cut `text` into pieces whose escaped size plus `overhead` stays within `target` and `limit`
    (docs/spec/cortexdb.md §9.3–9.5).

    One piece (the whole text, no section) means the text fits and is written unsplit. Otherwise every piece
    is at most `pack` escaped bytes unless it is a single character that alone is bigger. `target == 0` makes
    every part its own piece, with parts as big as `limit - overhead` allows (so an empty text gives none).
    """
    room = max(limit - overhead, 1)
    pack = room if target == 0 else min(max(target - overhead, 1), room)
    if target != 0 and escaped_len(text) <= pack:
        return [_whole(text)]
    return _pieces(text, pack, _escaped_size, each_part_alone=target == 0)


def passages(text: str, target_chars: int) -> list[Piece]:
    """Cut `text` into search passages of at most `target_chars` characters, keeping pages and sections.

    The units, parts and packing of `split`, sized in characters with no overhead. A text that fits is one
    passage (an empty text included).
    """
    if target_chars < 1:
        raise ValueError(f"target_chars must be at least 1, got {target_chars}; pass a passage length")
    if len(text) <= target_chars:
        return [_whole(text)]
    return _pieces(text, target_chars, _char_size, each_part_alone=False)


def _whole(text: str) -> Piece:
    pages = (1, text.count(PAGE_BREAK) + 1) if PAGE_BREAK in text else None
    return Piece(text, 0, len(text), pages, None)


def _escaped_size(text: str, start: int, end: int) -> int:
    return escaped_len(text[start:end])


def _char_size(text: str, start: int, end: int) -> int:
    return end - start


def _pieces(text: str, pack: int, measure: _Measure, *, each_part_alone: bool) -> list[Piece]:
    paged = PAGE_BREAK in text
    labelled = ((part, unit) for unit in _units(text) for part in _parts(text, unit.start, unit.end, pack, measure))
    return [_piece(text, group, paged) for group in _packed(labelled, pack, each_part_alone)]


def _packed(
    labelled: Iterable[tuple[_Part, _Unit]], pack: int, each_part_alone: bool
) -> list[list[tuple[_Part, _Unit]]]:
    # Greedy: a part joins the open piece while the sum fits, else it opens the next piece.
    groups: list[list[tuple[_Part, _Unit]]] = []
    used = 0
    for part, unit in labelled:
        if groups and not each_part_alone and used + part.size <= pack:
            groups[-1].append((part, unit))
            used += part.size
        else:
            groups.append([(part, unit)])
            used = part.size
    return groups


def _piece(text: str, group: list[tuple[_Part, _Unit]], paged: bool) -> Piece:
    (first, first_unit), (last, last_unit) = group[0], group[-1]
    pages = (first_unit.page, last_unit.page) if paged else None
    return Piece(text[first.start : last.end], first.start, last.end, pages, first_unit.section)


def _units(text: str) -> list[_Unit]:
    """The units of docs/spec/cortexdb.md §9.4's reference `units()`, in linear time.

    The reference visits every character; only page breaks and heading lines can end a unit, so this visits
    those alone, and knows whether the open unit holds anything but whitespace from the first non-whitespace
    position after its start, found once per unit.
    """
    out: list[_Unit] = []
    page, section, start, start_page = 1, None, 0, 1
    solid = _first_solid(text, 0)
    for at, breaks in _unit_events(text):
        title = None if breaks else heading_title(text[at : _line_end(text, at)])
        if not breaks and title is None:
            continue
        if solid < at:
            out.append(_Unit(start, at, start_page, section))
            start, start_page, solid = at, page, _first_solid(text, at)
        if breaks:
            # Whatever came before, the open unit now holds only whitespace and breaks, so its page moves on.
            page += breaks
            start_page = page
        else:
            section = title
    if start < len(text):
        out.append(_Unit(start, len(text), start_page, section))
    return out


def _unit_events(text: str) -> Iterator[tuple[int, int]]:
    """`(position, breaks)` in order: a run of `breaks` page breaks, or a heading opening (`breaks == 0`)."""
    if _HEADING_OPENING.match(text):
        yield 0, 0
    for event in _UNIT_EVENTS.finditer(text):
        if event.start("run") >= 0:
            yield event.start(), event.end("run") - event.start()
            if event.start("after_break") >= 0:
                yield event.start("after_break"), 0
        else:
            yield event.start("after_newline"), 0


def _first_solid(text: str, at: int) -> int:
    found = _SOLID.search(text, at)
    return len(text) if found is None else found.start()


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end


def _parts(text: str, start: int, end: int, cap: int, measure: _Measure) -> list[_Part]:
    """docs/spec/cortexdb.md §9.4's `parts`: ranges of at most `cap`, cut at blank lines, then line ends, then
    characters."""
    size = measure(text, start, end)
    if size <= cap:
        return [_Part(start, end, size)]
    return _cut(text, start, end, cap, measure)


def _cut(text: str, start: int, end: int, cap: int, measure: _Measure) -> list[_Part]:
    for separator in _SEPARATORS:
        found = text.find(separator, start, end)
        if found >= 0 and found + len(separator) < end:
            return _merged(text, _ranges_after(text, start, end, separator), cap, measure)
    return _by_characters(text, start, end, cap, measure)


def _ranges_after(text: str, start: int, end: int, separator: str) -> Iterator[tuple[int, int]]:
    """`[start, end)` cut just after each non-overlapping `separator`, scanning left to right.

    A separator that ends the range makes no cut, so no range is empty. Lazy, because a text of blank lines
    has as many ranges as characters.
    """
    found = text.find(separator, start, end)
    while found >= 0 and found + len(separator) < end:
        cut = found + len(separator)
        yield start, cut
        start = cut
        found = text.find(separator, start, end)
    yield start, end


def _merged(text: str, ranges: Iterable[tuple[int, int]], cap: int, measure: _Measure) -> list[_Part]:
    """The parts of every range, neighbours merged greedily while their sum fits in `cap`."""
    merged: list[_Part] = []
    # The open part lives in locals: a long text can have a million ranges here, most of them merged away.
    open_start = open_end = open_size = 0
    for a, b in ranges:
        size = measure(text, a, b)
        for part in (_Part(a, b, size),) if size <= cap else _cut(text, a, b, cap, measure):
            if open_end > open_start and open_size + part.size <= cap:
                open_end, open_size = part.end, open_size + part.size
                continue
            if open_end > open_start:
                merged.append(_Part(open_start, open_end, open_size))
            open_start, open_end, open_size = part
    merged.append(_Part(open_start, open_end, open_size))
    return merged


def _by_characters(text: str, start: int, end: int, cap: int, measure: _Measure) -> list[_Part]:
    parts: list[_Part] = []
    while True:
        cut = _longest_fit(text, start, end, cap, measure)
        parts.append(_Part(start, cut, measure(text, start, cut)))
        if cut >= end:
            return parts
        start = cut


def _longest_fit(text: str, start: int, end: int, cap: int, measure: _Measure) -> int:
    """The largest `cut` in `(start, end]` with `measure(text, start, cut) <= cap`, and never less than one
    character, which is where the reference's character-by-character loop cuts."""
    # Every character measures at least 1, so no more than `cap` of them fit.
    low, high = start + 1, min(end, start + cap)
    high_size = measure(text, start, high)
    if high_size <= cap:
        return high
    low_size = measure(text, start, low)
    if low_size > cap:
        return low
    # `low` fits and `high` does not. Interpolation finds the cut in a few probes on text of even density
    # (all CJK, say); alternating with bisection bounds the worst case at twice a plain binary search.
    interpolate = True
    while low < high - 1:
        guess = low + (high - low) * (cap - low_size) // (high_size - low_size) if interpolate else (low + high) // 2
        middle = min(max(guess, low + 1), high - 1)
        # Sizes are additive, so only the stretch beyond `low` is measured.
        size = low_size + measure(text, low, middle)
        if size <= cap:
            low, low_size = middle, size
        else:
            high, high_size = middle, size
        interpolate = not interpolate
    return low
