"""The shape of the labelled tables the scrubbing tests and `bench/scrub_quality.py` share.

A table row is a text, the class it stands for, and what must not survive scrubbing (the secret or the
identifier; empty for prose, which must come out unchanged). The rows are built in the test modules
from seeded random draws of each format's public shape, never from real secrets. This module also holds
the helpers that build and score them, and checks that every table is well formed.
"""

from __future__ import annotations

import random
import string
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.scrub import Policy, sanitize_text

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
LOWER_DIGITS = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
BASE64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


@dataclass(frozen=True)
class Labelled:
    """One row: `text` stands for `label`; none of `secrets` may survive (none given: text stays as it is)."""

    label: str
    text: str
    secrets: tuple[str, ...] = ()

    @property
    def positive(self) -> bool:
        return bool(self.secrets)

    def caught(self, scrubbed: str) -> bool:
        """Whether scrubbing did what the row asks: every secret gone, or the prose untouched."""
        if not self.positive:
            return scrubbed == self.text
        return all(secret not in scrubbed for secret in self.secrets)


def draw(rng: random.Random, alphabet: str, size: int) -> str:
    """`size` characters of `alphabet`, with a digit and a letter when the alphabet has both (as a
    generated token almost always does), so a sample never happens to spell an ordinary word."""
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(size))
        needs = [s for s in (string.digits, string.ascii_letters) if any(c in s for c in alphabet)]
        if size < 4 or all(any(c in s for c in value) for s in needs):
            return value


def recall(rows: Iterable[Labelled], policy: Policy | None = None) -> dict[str, tuple[int, int]]:
    """For each label, (rows caught, rows) under the policy."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        scrubbed = sanitize_text(row.text, policy or Policy()).value
        counts[row.label][0] += row.caught(scrubbed)
        counts[row.label][1] += 1
    return {label: (caught, total) for label, (caught, total) in counts.items()}


def misses(rows: Iterable[Labelled], policy: Policy | None = None) -> list[tuple[Labelled, str]]:
    """The rows scrubbing got wrong, each with what it made of the text."""
    out = []
    for row in rows:
        scrubbed = sanitize_text(row.text, policy or Policy()).value
        if not row.caught(scrubbed):
            out.append((row, scrubbed))
    return out


def well_formed(rows: list[Labelled]) -> None:
    """Every secret occurs in its text, and no row is there twice."""
    assert rows
    assert len({(r.label, r.text) for r in rows}) == len(rows)
    for row in rows:
        assert all(secret and secret in row.text for secret in row.secrets), row


def test_a_row_is_caught_when_its_secrets_are_gone_or_its_prose_untouched() -> None:
    positive = Labelled("x", "key abc123", ("abc123",))
    assert positive.caught("key [REDACTED]") and not positive.caught("key abc123")
    prose = Labelled("prose", "the token for")
    assert prose.caught("the token for") and not prose.caught("the [REDACTED] for")


def test_draws_are_seeded_and_mixed() -> None:
    assert draw(random.Random(1), ALNUM, 20) == draw(random.Random(1), ALNUM, 20)
    value = draw(random.Random(2), ALNUM, 12)
    assert any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def test_recall_counts_by_label() -> None:
    rows = [Labelled("a", "password: Tr0ub4dor&3x", ("Tr0ub4dor&3x",)), Labelled("b", "the token for")]
    assert recall(rows) == {"a": (1, 1), "b": (1, 1)}
    assert misses([Labelled("c", "nothing", ("nothing",))])[0][1] == "nothing"
