"""Stage 4: personal identifiers, matched on the normalised view and spliced back onto the original text
(docs/spec/safety.md §6.1, §6.8). The classes are in `classes` (safety.md's) and `identifiers` (the extended ones)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from pipeline.scrub.classes import LOOKBACK, SPEC_TABLE, ClassTable, PiiClass
from pipeline.scrub.emails import EMAIL_CLASS, find_emails
from pipeline.scrub.identifiers import EXTENDED_TABLE
from pipeline.scrub.report import DEFAULT_POLICY, Policy
from pipeline.scrub.view import MatchingView, TextFacts, matching_view


class PiiHit(NamedTuple):
    """A passing candidate: its span in the view and the class that found it."""

    start: int
    end: int
    pii_class: PiiClass


def table_for(policy: Policy) -> ClassTable:
    """The classes the policy's rule set runs."""
    return SPEC_TABLE if policy.is_spec else EXTENDED_TABLE


Window = tuple[int, int]


def _scan_start(pii_class: PiiClass, view: str, lo: int, hi: int) -> int | None:
    """Where the class's scan of the window `view[lo:hi]` may start, or None when its hint is not there."""
    hint = pii_class.hint.search(view, lo, hi)
    # Starting the scan later is exact: at a search position `\b` still sees the character before it.
    return None if hint is None else max(lo, hint.start() - LOOKBACK)


def _candidates(pii_class: PiiClass, view: str, lo: int = 0, hi: int | None = None) -> Iterator[re.Match[str]]:
    """The class's matches within the window `view[lo:hi]` (the whole view by default)."""
    hi = len(view) if hi is None else hi
    start = _scan_start(pii_class, view, lo, hi)
    return iter(()) if start is None else pii_class.pattern.finditer(view, start, hi)


def _windows(view: str, union: re.Pattern[str], digits: Window) -> list[Window]:
    """Where the table's matches can lie: the union's matches, widened by LOOKBACK on each side and merged.

    `digits` spans the view's digits: the union starts with one and is shorter than LOOKBACK, so its scan
    starts at the first digit and stops LOOKBACK after the last.

    A class match holds one of its hints, the union matches where that hint starts, and an occurrence of the
    union that its scan skipped starts inside one that the scan found; no match or hint is LOOKBACK long. So
    every match and every hint lies inside one window, and no match starts between windows. Scanning a
    window only, with `endpos` at its end, is exact: a match that the cut alone makes (a `\b` at the cut)
    would end at the cut, further than LOOKBACK from every hint it holds.
    """
    windows: list[list[int]] = []
    for match in union.finditer(view, digits[0], digits[1] + LOOKBACK):
        lo, hi = match.start() - LOOKBACK, match.end() + LOOKBACK
        if windows and lo <= windows[-1][1]:
            windows[-1][1] = hi
        else:
            windows.append([max(0, lo), hi])
    return [(lo, min(hi, len(view))) for lo, hi in windows]


def _class_hits(
    pii_class: PiiClass,
    view: str,
    windows: list[Window],
    facts: TextFacts,
    policy: Policy,
    kept: list[Window] | None = None,
) -> list[PiiHit]:
    """The class's passing hits; its late gate, if any, is asked once its hint has matched. With `kept`, the
    failing candidates its shield accepts are added there."""
    hits: list[PiiHit] = []
    late_gate = pii_class.late_gate
    shield = pii_class.shield if kept is not None else None
    for lo, hi in windows:
        start = _scan_start(pii_class, view, lo, hi)
        if start is None:
            continue
        if late_gate is not None:
            if not late_gate(facts):
                return hits
            late_gate = None
        for match in pii_class.pattern.finditer(view, start, hi):
            begin, end = match.span(pii_class.group)
            if pii_class.narrow is not None:
                narrowed = pii_class.narrow(view, begin, end, policy)
                if narrowed is not None:
                    hits.append(PiiHit(narrowed[0], narrowed[1], pii_class))
                    continue
            elif pii_class.check(view, begin, end, policy):
                hits.append(PiiHit(begin, end, pii_class))
                continue
            if shield is not None and kept is not None and shield(view, begin, end, policy):
                kept.append((begin, end))
    return hits


# Every byte but an ASCII digit becomes a space, so two digits side by side are the bytes `00`.
_DIGIT_MASK = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))


def _digit_span(view: str, table: ClassTable) -> Window | None:
    """From the view's first digit to just past its last, or None when the view cannot hold a match of the
    table: it has no digit, or lacks the run of digits every class of the table holds (most prose does).

    For an ASCII view a bytes translation settles it, faster than a scan of the regex engine.
    """
    if not view.isascii():
        if table.min_run > 1 and TextFacts(view).run < table.min_run:
            return None
        return 0, len(view)
    mask = view.encode("ascii").translate(_DIGIT_MASK)
    first = mask.find(b"0")
    if first < 0 or (table.min_run > 1 and b"0" * table.min_run not in mask):
        return None
    return first, mask.rfind(b"0") + 1


def find_hits(
    view: str,
    policy: Policy,
    *,
    include_bare: bool = True,
    table: ClassTable | None = None,
    digits: Window | None = None,
    kept: list[Window] | None = None,
) -> Iterator[PiiHit]:
    """Yield the passing hits of every class whose gate opens, in class order (overlaps not resolved).

    `digits` is the view's `_digit_span` when the caller has it already. `kept`, when given, receives the
    spans of failing candidates that their class's shield keeps (`resolve_overlaps` takes them).
    """
    table = table or table_for(policy)
    digits = digits or _digit_span(view, table)
    if digits is None:
        return
    windows = _windows(view, table.any_hint, digits)
    if not windows:
        return
    facts = TextFacts(view)
    others = not table.alone or any(table.others_hint.search(view, lo, hi) for lo, hi in windows)
    for pii_class in table.classes:
        if not (others or pii_class.name in table.alone) or (pii_class.bare_numeric and not include_bare):
            continue
        if pii_class.gate(facts):
            yield from _class_hits(pii_class, view, windows, facts, policy, kept)


def resolve_overlaps(hits: list[PiiHit], kept: Sequence[Window] = ()) -> list[PiiHit]:
    """Keep the earliest, then longest hit; for equal spans the earlier class (the sort is stable).

    A kept span takes part as a hit that wins ties and is then dropped: what it wins over stays unredacted.
    No class whose hit can have the same span as another's kept span keeps it (an SSN-shaped ITIN is not
    kept by the SSN classes), so a tie is always a weaker reading of the same characters (a card, a phone).
    """
    if not kept and len(hits) < 2:
        return hits
    entries: list[tuple[int, int, PiiHit | None]] = [(start, end, None) for start, end in kept]
    entries.extend((hit.start, hit.end, hit) for hit in hits)
    resolved: list[PiiHit] = []
    last_end = 0
    for start, end, hit in sorted(entries, key=lambda e: (e[0], e[0] - e[1])):
        if start >= last_end:
            last_end = end
            if hit is not None:
                resolved.append(hit)
    return resolved


def _splice(text: str, view: MatchingView, hits: list[PiiHit]) -> str:
    out: list[str] = []
    pos = 0
    for hit in hits:
        start, end = view.original(hit.start), view.original(hit.end)
        out.extend((text[pos:start], hit.pii_class.token))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def redact_identifiers(text: str, policy: Policy) -> tuple[str, int]:
    """Replace every kept PII hit with its class token; return the new text and the number replaced."""
    table = table_for(policy)
    # An ASCII text is its own view, so its digits are known before the view is made.
    ascii_text = text.isascii()
    digits = _digit_span(text, table) if ascii_text else None
    if ascii_text and digits is None and not (policy.redact_emails and "@" in text):
        return text, 0
    view = matching_view(text)
    kept: list[Window] = []
    hits = (
        []
        if ascii_text and digits is None
        else list(find_hits(view.text, policy, table=table, digits=digits, kept=kept))
    )
    if policy.redact_emails:
        hits.extend(PiiHit(start, end, EMAIL_CLASS) for start, end in find_emails(view.text))
    hits = resolve_overlaps(hits, kept)
    if not hits:
        return text, 0
    return _splice(text, view, hits), len(hits)


def has_identifier(text: str, policy: Policy = DEFAULT_POLICY) -> bool:
    """True when a class other than the bare-numeric ones has a passing hit that no kept span covers."""
    view = matching_view(text)
    kept: list[Window] = []
    hits = list(find_hits(view.text, policy, include_bare=False, kept=kept))
    return bool(resolve_overlaps(hits, kept))
