"""`VendorFormat`: one credential format a secret scanner knows by its shape, and how it is written down.

The formats themselves are tables in `vendors` (and its families, `vendors_cloud`, `vendors_saas`); this module
only says what a format is, so that every table can be written with `fmt` and the lookarounds below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Span = tuple[int, int]

# Lookarounds for "not inside a longer token" over the common token alphabet.
L = r"(?<![A-Za-z0-9_-])"
R = r"(?![A-Za-z0-9_-])"


@dataclass(frozen=True)
class VendorFormat:
    """One token format: its pattern, the group that is the secret (0 for the whole match), its needles,
    and how many characters before a needle a match may start (`lead`, the least and the most).

    A format whose shape holds no literal is `scan`: its needles are words (folded to lower case) whose presence
    gates a search; with `near`, only within that many characters either side of the word, as a keyword names
    the value beside it (trufflehog's keyword pre-filter, held to the neighbourhood).
    """

    name: str
    pattern: re.Pattern[str]
    needles: tuple[str, ...]
    group: int = 0
    lead: tuple[int, int] = (0, 0)
    scan: bool = False
    near: int = 0

    def spans_at(self, text: str, needle_at: int) -> list[Span]:
        """The match that the needle at `needle_at` belongs to, if any."""
        least, most = self.lead
        for start in range(max(0, needle_at - most), needle_at - least + 1):
            match = self.pattern.match(text, start)
            if match is not None:
                return [match.span(self.group)]
        return []

    def spans_near(self, text: str, folded: str, needle: str) -> set[Span]:
        """The matches of a `scan` format: in the whole text, or within `near` of each occurrence of `needle`."""
        if not self.near:
            return {match.span(self.group) for match in self.pattern.finditer(text)}
        spans: set[Span] = set()
        at = folded.find(needle)
        while at >= 0:
            lo, hi = max(0, at - self.near), min(len(text), at + len(needle) + self.near)
            spans.update(match.span(self.group) for match in self.pattern.finditer(text, lo, hi))
            at = folded.find(needle, at + 1)
        return spans


def fmt(
    name: str,
    pattern: str,
    *needles: str,
    group: int = 0,
    lead: tuple[int, int] = (0, 0),
    scan: bool = False,
    near: int = 0,
) -> VendorFormat:
    """A format from its pattern's text; see `VendorFormat` for the rest."""
    return VendorFormat(name, re.compile(pattern), needles, group, lead, scan, near)
