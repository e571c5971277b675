"""Cheap pre-checks that prove a pattern cannot match, so its regex scan can be skipped.

A pre-check may say "maybe" wrongly, never "no" wrongly: a needle is a literal every match of the pattern
must contain. For `(?i)` patterns the needle is looked up in a folded copy of the text; the fold must map
every character that Python's case-insensitive matching equates with an ASCII letter onto that letter.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

# Besides the ASCII letters themselves, `re.IGNORECASE` lets exactly these match ASCII letters (checked
# over every code point by the tests). `str.lower()` turns U+0130 into two characters, so it is replaced
# before lowering; the other three would survive `lower()` unchanged. With U+0130 gone, `lower()` keeps
# every length, so the fold has the text's offsets.
_IGNORECASE_TWINS = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))

# Characters roughly from rarest to commonest in English prose and markdown; a needle is searched for by
# its rarest character, which the regex engine skips ahead to.
_RARITY = "JzqxjKQZXVSGAIkv_wbpymfgcud.-"


def fold(text: str) -> str:
    """A lower-cased copy with the text's offsets, for needle lookups."""
    if not text.isascii():
        for twin, letter in _IGNORECASE_TWINS:
            if twin in text:
                text = text.replace(twin, letter)
    return text.lower()


class FoldedText:
    """A text and its fold, computed on first use, so several pre-checks on one text fold it once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._folded: str | None = None

    @property
    def folded(self) -> str:
        if self._folded is None:
            self._folded = fold(self.text)
        return self._folded


def minimal_needles(needles: Iterable[str]) -> tuple[str, ...]:
    """The needles no other needle is part of: a text holds some needle exactly when it holds one of these."""
    unique = set(needles)
    return tuple(sorted(n for n in unique if not any(m != n and m in n for m in unique)))


def _anchor(needle: str, rarity: str = _RARITY) -> int:
    return min(range(len(needle)), key=lambda i: rarity.find(needle[i]) % (len(rarity) + 1))


def _needle_pattern(needles: Iterable[str], rarity: str = _RARITY) -> re.Pattern[str]:
    """One regex that finds any of the needles, each anchored on its rarest character.

    Every alternative starts with a plain character, so the engine skips ahead to the next anchor
    character instead of trying a match at every position; lookarounds check the rest of the needle.
    """
    by_anchor: dict[str, list[str]] = defaultdict(list)
    for needle in needles:
        at = _anchor(needle, rarity)
        before = f"(?<={re.escape(needle[: at + 1])})" if at else ""
        after = f"(?={re.escape(needle[at + 1 :])})" if at + 1 < len(needle) else ""
        by_anchor[needle[at]].append(before + after)
    alternatives = [re.escape(char) + "(?:" + "|".join(rest) + ")" for char, rest in sorted(by_anchor.items())]
    return re.compile("|".join(alternatives))


class NeedleSet:
    """Answers whether any of several literals occurs in a text, in one scan of it."""

    def __init__(self, needles: Iterable[str]) -> None:
        self.needles = minimal_needles(needles)
        self._pattern = _needle_pattern(self.needles)

    def occurs_in(self, haystack: str) -> bool:
        return bool(self.needles) and self._pattern.search(haystack) is not None


class NeedleIndex:
    """Where several literals occur in a text: one scan finds candidates at each needle's rarest character,
    whose lookarounds confirm a needle there, and the needles sharing that character are then told apart.

    Unlike `NeedleSet` it keeps needles that hold another, since each may stand for a different pattern.
    `rarity` orders characters from rarest to commonest in the haystacks it will search.
    """

    def __init__(self, needles: Iterable[str], rarity: str = _RARITY) -> None:
        self.needles = tuple(sorted(set(needles)))
        self._by_anchor: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for needle in self.needles:
            at = _anchor(needle, rarity)
            self._by_anchor[needle[at]].append((needle, at))
        self.pattern = _needle_pattern(self.needles, rarity)
        """Matches at the rarest character of some needle's occurrence; with `pos` and `endpos` its lookbehinds
        still see before `pos`, while its lookaheads stop at `endpos`."""

    def occurrences(self, haystack: str) -> list[tuple[int, str]]:
        """Every (start, needle) in the haystack, in order of their rarest characters."""
        found: list[tuple[int, str]] = []
        for match in self.pattern.finditer(haystack):
            pos = match.start()
            for needle, at in self._by_anchor[haystack[pos]]:
                start = pos - at
                if start >= 0 and haystack.startswith(needle, start):
                    found.append((start, needle))
        return found
