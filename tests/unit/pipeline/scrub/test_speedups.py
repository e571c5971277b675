"""The scrubber's shortcuts change nothing: each is checked against the plain definition it stands in for.

- Stage 4 scans only windows around the union of hints (`_pii._windows`) and asks a keyword gate only once
  a hint has matched (`PiiClass.late_gate`): the hits equal those of every class scanned over the whole view.
- The vendor stage finds long runs with `bytes.find` and looks for needles once in the joined runs.
- A text with nothing to replace takes one pass and gets a report of its own.
"""

from __future__ import annotations

import re
import re._parser as sre_parse  # type: ignore[import-not-found]

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.scrub import Policy, sanitize_text
from pipeline.scrub.classes import LOOKBACK, SPEC_TABLE, ClassTable, PiiClass
from pipeline.scrub.identifiers import EXTENDED_TABLE
from pipeline.scrub.pii import PiiHit, find_hits
from pipeline.scrub.vendors import _NEEDLES, _RUN, _RUN_RARITY, _TOKEN_CHARS, _runs
from pipeline.scrub.view import TextFacts

TABLES = {"extended": EXTENDED_TABLE, "spec": SPEC_TABLE}
POLICIES = {"extended": Policy(), "spec": Policy.spec_compatible()}


def _width(pattern: re.Pattern[str]) -> int:
    return int(sre_parse.parse(pattern.pattern, pattern.flags).getwidth()[1])


@pytest.mark.parametrize("table", TABLES.values(), ids=TABLES.keys())
def test_no_match_or_hint_is_as_long_as_the_lookback(table: ClassTable) -> None:
    # The windows' exactness rests on this: a match lies within LOOKBACK of its hint, and a scan cut at a
    # window's end cannot make a match that reaches the cut.
    for pii_class in table.classes:
        assert _width(pii_class.pattern) < LOOKBACK, pii_class.name
        assert _width(pii_class.hint) < LOOKBACK, pii_class.name
        assert "(?=" not in pii_class.pattern.pattern and "(?!" not in pii_class.pattern.pattern, pii_class.name
        assert "(?=" not in pii_class.hint.pattern and "(?!" not in pii_class.hint.pattern, pii_class.name
    # The union starts with a digit and its scan stops LOOKBACK after the view's last digit.
    assert table.any_hint.pattern.startswith("[0-9]")
    assert _width(table.any_hint) < LOOKBACK


def _reference_hits(view: str, policy: Policy, table: ClassTable) -> list[PiiHit]:
    """Every class, gates and all, scanned over the whole view: what `find_hits` must yield, in its order."""
    facts = TextFacts(view)
    hits: list[PiiHit] = []
    for pii_class in table.classes:
        if not pii_class.gate(facts) or (pii_class.late_gate is not None and not pii_class.late_gate(facts)):
            continue
        for match in pii_class.pattern.finditer(view):
            start, end = match.span(pii_class.group)
            if pii_class.narrow is not None:
                span = pii_class.narrow(view, start, end, policy)
                if span is not None:
                    hits.append(PiiHit(span[0], span[1], pii_class))
            elif pii_class.check(view, start, end, policy):
                hits.append(PiiHit(start, end, pii_class))
    return hits


def _pieces(classes: tuple[PiiClass, ...]) -> st.SearchStrategy[str]:
    identifier = st.sampled_from(classes).flatmap(lambda c: st.from_regex(c.pattern, fullmatch=True))
    # Keywords that open the late gates, digits and separators that make hints, and fillers long enough to
    # part the windows.
    words = st.sampled_from(["SSN ", "NHS no ", "aadhaar ", "personnummer ", "tel ", "BSN ", "PESEL ", "Steuer-ID "])
    noise = st.text(alphabet=st.sampled_from("0123456789 -.:/()+ABxyz\n\t"), max_size=14)
    filler = st.integers(min_value=1, max_value=2 * LOOKBACK).map(lambda n: "x" * n + " ")
    return st.one_of(identifier, words, noise, filler)


@pytest.mark.parametrize("name", TABLES.keys())
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_windowed_scans_find_what_whole_view_scans_find(name: str, data: st.DataObject) -> None:
    table, policy = TABLES[name], POLICIES[name]
    view = "".join(data.draw(st.lists(_pieces(table.classes), max_size=8)))
    assert list(find_hits(view, policy, table=table)) == _reference_hits(view, policy, table)


def test_a_late_gate_opens_only_where_the_keyword_is() -> None:
    # A valid NHS number needs its name nearby. Without the word anywhere its keyword gate stays shut; with
    # the word far before it the gate opens, and the check still finds it too far.
    nhs = "9434765919"
    assert sanitize_text(f"number {nhs} here").value == f"number {nhs} here"
    assert sanitize_text(f"NHS number {nhs}").value == "NHS number [REDACTED_PII_NHS]"
    far = "NHS " + "x " * 60 + nhs
    assert sanitize_text(far).value == far
    assert list(find_hits(far, Policy(), table=EXTENDED_TABLE)) == _reference_hits(far, Policy(), EXTENDED_TABLE)


# --- The vendor stage. -----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab0_-./:= \n{}?&"), max_size=120))
def test_runs_by_bytes_find_are_the_runs_of_the_pattern(text: str) -> None:
    assert _runs(text) == [m.span() for m in _RUN.finditer(text)]
    assert _runs(text + "é") == [m.span() for m in _RUN.finditer(text + "é")]


def test_no_needle_spans_two_joined_runs() -> None:
    # The runs are joined with a space and searched once: no needle may hold a space or leave the runs.
    assert all(set(needle) <= set(_TOKEN_CHARS) for needle in _NEEDLES.needles)
    assert sorted(_RUN_RARITY) == sorted(_TOKEN_CHARS)


def test_a_token_in_a_later_run_is_found_past_runs_without_needles() -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    text = f"see https://example.com/docs/first-long-path and path/to/some_long_file.txt then {token}"
    assert sanitize_text(text).value.endswith("then [REDACTED]")


# --- One pass. -------------------------------------------------------------------------------------------


def test_a_clean_text_gets_a_report_of_its_own() -> None:
    first = sanitize_text("nothing to see here")
    first.report.text_redactions = 3
    second = sanitize_text("nothing to see here")
    assert second.value == "nothing to see here"
    assert not second.report.changed()
