"""Splitting a large document into pieces that each fit one CortexDB event (docs/spec/cortexdb.md §9).

A body is cut into units at page breaks and headings, a unit still over the room is cut at blank lines, then at
line ends, then between characters, and the parts are packed greedily into pieces of at most `pack` escaped
bytes. Pieces are contiguous slices: joined in order they give back the body exactly. Sizes are JSON-escaped
UTF-8 byte lengths, added up part by part (escaping is per character), so no slice is measured twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from json.encoder import encode_basestring

from engines.chunking import heading_title

PAGE_BREAK = "\f"
DOCUMENT_CHUNK_TARGET_BYTES = 262_144
MAX_EVENT_TEXT_BYTES = 786_432
MAX_SECTION_CHARS = 120
SECTION_RESERVE = MAX_SECTION_CHARS * 6 + 32

_TWO_BYTE_ESCAPES = frozenset('"\\\n\r\t\b\f')
_NOT_BLANK = re.compile(r"[^\s\f]")


@dataclass(frozen=True)
class Piece:
    """One slice of a body, with the pages it spans (only when the body marks pages) and its section."""

    text: str
    pages: tuple[int, int] | None
    section: str | None


@dataclass(frozen=True)
class _Unit:
    start: int
    end: int
    page: int
    section: str | None


@dataclass(frozen=True)
class _Part:
    start: int
    end: int
    size: int
    unit: int


def escaped_len(text: str) -> int:
    """The UTF-8 length of `text` as a JSON string body (without its quotes)."""
    return len(encode_basestring(text).encode("utf-8")) - 2


def escaped_char_len(ch: str) -> int:
    if ch in _TWO_BYTE_ESCAPES:
        return 2
    if ch < " ":
        return 6
    return len(ch.encode("utf-8"))


def split(text: str, overhead: int, target: int, limit: int) -> list[Piece]:
    """The pieces of `text` given the envelope's `overhead`, the piece `target` and the event `limit` (bytes)."""
    room = max(limit - overhead, 1)
    pack = room if target == 0 else min(max(target - overhead, 1), room)
    paged = PAGE_BREAK in text
    size = escaped_len(text)
    if target != 0 and size <= pack:
        return [Piece(text, (1, text.count(PAGE_BREAK) + 1) if paged else None, None)]
    found = units(text)
    pieces: list[tuple[int, int, int, int]] = []  # start, end, first unit, last unit
    open_start = open_end = open_size = -1
    first_unit = last_unit = 0
    for part in (p for index, unit in enumerate(found) for p in parts(text, unit, index, pack)):
        if open_start >= 0 and target != 0 and open_size + part.size <= pack:
            open_end, open_size, last_unit = part.end, open_size + part.size, part.unit
            continue
        if open_start >= 0:
            pieces.append((open_start, open_end, first_unit, last_unit))
        open_start, open_end, open_size = part.start, part.end, part.size
        first_unit = last_unit = part.unit
    if open_start >= 0:
        pieces.append((open_start, open_end, first_unit, last_unit))
    return [
        Piece(text[s:e], (found[a].page, found[b].page) if paged else None, found[a].section) for s, e, a, b in pieces
    ]


def heading(text: str, at: int) -> str | None:
    """The title of the markdown heading whose line starts at `at`, cut to 120 characters, or None."""
    end = text.find("\n", at)
    # Only the line is handed over: slicing the rest of a 20 MB document at every line start would be quadratic.
    return heading_title(text[at : len(text) if end < 0 else end])


def units(text: str) -> list[_Unit]:
    """Cut at every page break and heading that follows text which is not blank."""
    out: list[_Unit] = []
    page, section, start, start_page = 1, None, 0, 1
    # Where the first character that is not blank lies at or after `start`: `text[start:at]` is blank
    # exactly when it lies at or after `at`.
    first_text = _first_not_blank(text, 0)
    for at in _points(text):
        brk = text[at] == PAGE_BREAK
        # Only a line that starts with `#` or a space can be a heading: most lines are not asked.
        line_start = at == 0 or text[at - 1] in "\n\f"
        title = heading(text, at) if line_start and text[at] in " #" else None
        if (brk or title) and first_text < at:
            out.append(_Unit(start, at, start_page, section))
            start, start_page = at, page
            first_text = _first_not_blank(text, at)
        if brk:
            page += 1
            start_page = page
        if title:
            section = title
    if start < len(text):
        out.append(_Unit(start, len(text), start_page, section))
    return out


def _points(text: str) -> list[int]:
    """Every position that is a page break or a line start (the only places `units` can cut)."""
    breaks, newlines = _positions(text, PAGE_BREAK), _positions(text, "\n")
    points = {0} if text else set()
    points.update(breaks)
    points.update(at + 1 for at in (*breaks, *newlines) if at + 1 < len(text))
    return sorted(points)


def _positions(text: str, ch: str) -> list[int]:
    # str.find scans at memory speed; a regex over a 20 MB body is ten times slower.
    found, at = [], text.find(ch)
    while at >= 0:
        found.append(at)
        at = text.find(ch, at + 1)
    return found


def _first_not_blank(text: str, start: int) -> int:
    found = _NOT_BLANK.search(text, start)
    return found.start() if found else len(text)


class _Sizer:
    """Escaped sizes of slices of one unit. Most bodies are ASCII whose only escaped characters are line ends and
    page breaks: then a slice's size is its length plus those, counted without building the slice's JSON."""

    def __init__(self, text: str, start: int, end: int) -> None:
        self.text = text
        self.whole = escaped_len(text[start:end])
        self.simple = self.whole == end - start + self._escapes(start, end)

    def _escapes(self, a: int, b: int) -> int:
        return self.text.count("\n", a, b) + self.text.count(PAGE_BREAK, a, b)

    def size(self, a: int, b: int) -> int:
        return b - a + self._escapes(a, b) if self.simple else escaped_len(self.text[a:b])


def parts(text: str, unit: _Unit, index: int, cap: int) -> list[_Part]:
    """The unit as ranges of at most `cap` escaped bytes, cut at blank lines, line ends, then characters."""
    sizer = _Sizer(text, unit.start, unit.end)
    return [_Part(s, e, size, index) for s, e, size in _ranges(sizer, unit.start, unit.end, sizer.whole, cap)]


def _ranges(sizer: _Sizer, s: int, e: int, size: int, cap: int) -> list[tuple[int, int, int]]:
    if size <= cap:
        return [(s, e, size)]
    text = sizer.text
    for sep in ("\n\n", "\n"):
        cuts = _cut_after(text, s, e, sep)
        if len(cuts) > 1:
            merged: list[tuple[int, int, int]] = []
            for a, b in cuts:
                for ra, rb, rsize in _ranges(sizer, a, b, sizer.size(a, b), cap):
                    if merged and merged[-1][2] + rsize <= cap:
                        merged[-1] = (merged[-1][0], rb, merged[-1][2] + rsize)
                    else:
                        merged.append((ra, rb, rsize))
            return merged
    return _by_characters(text, s, e, size, cap)


def _cut_after(text: str, s: int, e: int, sep: str) -> list[tuple[int, int]]:
    """Ranges ending just after each occurrence of `sep` in `[s, e)`, never cutting at `e` itself."""
    cuts, start, at = [], s, text.find(sep, s, e)
    while at >= 0:
        end = at + len(sep)
        if end >= e:
            break
        cuts.append((start, end))
        start = end
        at = text.find(sep, end, e)
    cuts.append((start, e))
    return cuts


def _by_characters(text: str, s: int, e: int, size: int, cap: int) -> list[tuple[int, int, int]]:
    if size == e - s:
        # Every character costs one byte: cut at fixed offsets.
        return [(a, min(a + cap, e), min(a + cap, e) - a) for a in range(s, e, cap)]
    ranges, frm, used = [], s, 0
    for k in range(s, e):
        cost = escaped_char_len(text[k])
        if used + cost > cap and k > frm:
            ranges.append((frm, k, used))
            frm, used = k, 0
        used += cost
    ranges.append((frm, e, used))
    return ranges
