"""The matching view of stage 4: folded digits and dashes, zero-width characters removed (docs/spec/safety.md §6.2),
with the map back to the original text, and the text-wide facts the class gates read (docs/spec/safety.md §6.3)."""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property

_ZERO_WIDTH = "\u200b\u200c\u200d\u200e\u200f\u2060\u180e\ufeff"
_FOLDS: dict[int, str | None] = {ord(c): None for c in _ZERO_WIDTH}
for _base in (0xFF10, 0x0660, 0x06F0):
    _FOLDS.update({_base + i: str(i) for i in range(10)})
_FOLDS.update({0xFF0D: "-", 0xFF0E: ".", 0xFF0F: "/", 0xFF1A: ":", 0x2212: "-"})
_FOLDS.update({code: "-" for code in range(0x2010, 0x2016)})

_NEEDS_FOLDING = re.compile("[" + "".join(re.escape(chr(code)) for code in sorted(_FOLDS)) + "]")
_ZERO_WIDTH_CHAR = re.compile("[" + _ZERO_WIDTH + "]")


@dataclass(frozen=True)
class MatchingView:
    """The normalised text and the map of its offsets back to the original.

    `removed_at` lists, for each removed character, the view offset of the character that followed it, so
    the original offset of view offset `i` is `i` plus the number of entries `<= i`.
    """

    text: str
    removed_at: tuple[int, ...] = ()

    def original(self, index: int) -> int:
        """The original offset of view offset `index`; `len(view)` maps to the original's length, so
        zero-width characters directly after a match are replaced with it."""
        return index + bisect_right(self.removed_at, index) if self.removed_at else index


def matching_view(text: str) -> MatchingView:
    """Normalise `text` for matching; most text holds nothing to fold and is its own view."""
    if text.isascii() or _NEEDS_FOLDING.search(text) is None:
        return MatchingView(text)
    removed = [match.start() - i for i, match in enumerate(_ZERO_WIDTH_CHAR.finditer(text))]
    return MatchingView(text.translate(_FOLDS), tuple(removed))


# Every byte but an ASCII digit becomes a space, so splitting the UTF-8 of a view yields its digit runs
# (no byte of a multi-byte character is below 0x80, so none is taken for a digit).
_DIGITS_ONLY = bytes(b if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_ASCII_LETTER = re.compile(r"[A-Za-z]")
_ASCII_UPPER = re.compile(r"[A-Z]")
_ASCII_SPACE = re.compile(r"[ \t\n\r\x0b\x0c]")
_NIE_LETTER = re.compile(r"[XYZxyz]")
# A NANP separator with a digit or `)` before it and a digit after it (so neither first nor last).
_NANP_SEPARATOR = re.compile(r"[0-9)][ \t.\-][0-9]")
_AADHAAR_NEEDLES = (b"aadhaar", b"aadhar", b"uidai", b"uid", "आधार".encode())
_MY_NUMBER_NEEDLES = ("マイナンバー", "個人番号")


class TextFacts:
    """What the class gates ask of a view: ASCII characters only, as docs/spec/safety.md §6.3 says.

    The digit counts are computed at once; the rest are cheap searches a gate runs when it asks.
    """

    def __init__(self, view: str) -> None:
        self.view = view
        # bytes.lower() lowers ASCII only and keeps the UTF-8 of everything else: the ASCII-case-insensitive
        # probe the spec asks for. surrogatepass keeps a lone surrogate from raising.
        self._utf8 = view.encode("utf-8", "surrogatepass")
        self._lowered: bytes | None = None
        runs = [len(run) for run in self._utf8.translate(_DIGITS_ONLY).split()]
        self.digits = sum(runs)
        """The number of ASCII digits."""
        self.run = max(runs, default=0)
        """The length of the longest run of consecutive ASCII digits."""

    @property
    def has_digit(self) -> bool:
        return self.digits > 0

    def has(self, char: str) -> bool:
        return char in self.view

    # Several gates ask the same question of one view, so each answer is kept once found.
    @cached_property
    def _letter(self) -> bool:
        return _ASCII_LETTER.search(self.view) is not None

    @cached_property
    def _upper(self) -> bool:
        return _ASCII_UPPER.search(self.view) is not None

    @cached_property
    def _space(self) -> bool:
        return _ASCII_SPACE.search(self.view) is not None

    def has_letter(self) -> bool:
        return self._letter

    def has_upper(self) -> bool:
        return self._upper

    def has_space(self) -> bool:
        return self._space

    def has_nie_letter(self) -> bool:
        return _NIE_LETTER.search(self.view) is not None

    def nanp_separator(self) -> bool:
        return _NANP_SEPARATOR.search(self.view) is not None

    @property
    def lowered(self) -> bytes:
        """The view's UTF-8 with ASCII letters lowered, computed once."""
        if self._lowered is None:
            self._lowered = self._utf8.lower()
        return self._lowered

    def has_any(self, needles: tuple[bytes, ...]) -> bool:
        """True when one of the (lower-case UTF-8) needles occurs, ASCII letters compared in any case."""
        lowered = self.lowered
        return any(needle in lowered for needle in needles)

    def aadhaar_keyword(self) -> bool:
        return self.has_any(_AADHAAR_NEEDLES)

    def my_number_keyword(self) -> bool:
        if any(needle in self.view for needle in _MY_NUMBER_NEEDLES):
            return True
        lowered = self.lowered
        return b"my" in lowered and b"number" in lowered
