"""Stage 4 mechanics: the normalised view and its map (docs/spec/safety.md §6.2), overlaps and splicing
(docs/spec/safety.md §6.8), the card policy (docs/spec/safety.md §6.6), and the hints that let a class scan be
skipped."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipeline.scrub import Policy, redact_pii, sanitize_text
from pipeline.scrub.cards import card_passes, keyword_window, plausible_issuer
from pipeline.scrub.checksums import luhn_valid
from pipeline.scrub.classes import ANY_HINT, LOOKBACK, PII_CLASSES, PiiClass
from pipeline.scrub.pii import PiiHit, _candidates, resolve_overlaps
from pipeline.scrub.view import matching_view

# --- Normalisation and the position map. --------------------------------------------------------------

FOLDING_VECTORS = [
    ("\u200b\u200c\u200d\u200e\u200f\u2060\u180e\ufeff", ""),
    ("０１２３４５６７８９", "0123456789"),
    ("٠١٢٣٤٥٦٧٨٩", "0123456789"),
    ("۰۱۲۳۴۵۶۷۸۹", "0123456789"),
    ("－．／：", "-./:"),
    ("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-------"),
    ("a\u00a0b\u2016\uff1b", "a\u00a0b\u2016\uff1b"),
]


@pytest.mark.parametrize(("text", "view"), FOLDING_VECTORS)
def test_folding(text: str, view: str) -> None:
    assert matching_view(text).text == view


def test_map_points_each_view_offset_at_its_original_character() -> None:
    text = "\u200ba\u200b\u200bb５\u200b"
    view = matching_view(text)
    assert view.text == "ab5"
    assert [view.original(i) for i in range(4)] == [1, 4, 5, len(text)]
    assert all(text[view.original(i)] in "ab５" for i in range(3))


SPLICE_VECTORS = [
    # Zero-width characters before a match stay, inside and directly after it go with it.
    ("\u200b529.982.247-25\u200b\u200b!", "\u200b[REDACTED_PII_CPF]!"),
    ("529\u200b.982.247-25 ok", "[REDACTED_PII_CPF] ok"),
    # Fullwidth text around an identifier is kept as typed.
    ("ＣＰＦ：５２９．９８２．２４７－２５。", "ＣＰＦ：[REDACTED_PII_CPF]。"),
    ("tel\u2060: 415\u2011555\u20112671", "tel\u2060: [REDACTED_PII_PHONE]"),
]


@pytest.mark.parametrize(("text", "expected"), SPLICE_VECTORS)
def test_splice(text: str, expected: str) -> None:
    assert sanitize_text(text).value == expected


# --- Overlaps. ---------------------------------------------------------------------------------------


def _hit(start: int, end: int, name: str) -> PiiHit:
    return PiiHit(start, end, next(c for c in PII_CLASSES if c.name == name))


def test_the_earliest_then_longest_hit_wins() -> None:
    hits = [_hit(5, 9, "ssn"), _hit(0, 4, "phone_nanp"), _hit(0, 6, "credit_card"), _hit(6, 8, "rrn")]
    assert resolve_overlaps(hits) == [_hit(0, 6, "credit_card"), _hit(6, 8, "rrn")]


def test_equal_spans_keep_the_earlier_class() -> None:
    hits = [_hit(0, 14, "credit_card"), _hit(0, 14, "cnpj_bare")]
    assert resolve_overlaps(hits) == [_hit(0, 14, "credit_card")]
    assert resolve_overlaps(list(reversed(hits))) == [_hit(0, 14, "cnpj_bare")]


def test_touching_hits_are_both_kept() -> None:
    hits = [_hit(0, 4, "pan_in"), _hit(4, 8, "rfc")]
    assert resolve_overlaps(hits) == hits


def test_a_card_is_not_also_partly_a_phone() -> None:
    # A Luhn-valid 16-digit number that starts with a NANP phone: the longer card wins, counted once.
    number = "415 555 2671 0000 03"
    assert luhn_valid(number)
    result = sanitize_text(f"pay {number} now", Policy.spec_compatible())
    assert result.value == "pay [REDACTED_PII_CREDIT_CARD]now"
    assert result.report.pii_redactions == 1


def test_a_card_beats_a_bare_cnpj_of_the_same_span() -> None:
    # 11222333000181 is a valid CNPJ; with a valid Luhn too it would be a card, which comes first.
    assert redact_pii("id 11222333000181").value == "id [REDACTED_PII_CNPJ]"
    assert redact_pii("ref 30569309025904").value == "ref [REDACTED_PII_CREDIT_CARD]"


def test_kept_hits_are_what_is_counted() -> None:
    result = redact_pii("a 529.982.247-25 b 123-45-6789 c 4111 1111 1111 1111")
    assert result.value == "a [REDACTED_PII_CPF] b [REDACTED_PII_SSN] c [REDACTED_PII_CREDIT_CARD]"
    assert result.report.pii_redactions == 3


# --- Credit cards and the policy. ------------------------------------------------------------------------

ISSUER_VECTORS = [
    ("4111111111111", True),
    ("4111111111111111", True),
    ("4111111111111111111", True),
    ("41111111111111", False),
    ("5555555555554444", True),
    ("55555555555544", False),
    ("5018000000000", True),
    ("5600000000000000000", True),
    ("5041000000000000", True),
    ("5080000000000000", True),
    ("50800000000000", False),
    ("5900000000000000", False),
    ("2221000000000009", True),
    ("2720999999999999", True),
    ("2200000000000000", True),
    ("2205000000000000", False),
    ("378282246310005", True),
    ("3782822463100050", False),
    ("3530111333300000", True),
    ("353011133330000", False),
    ("30569309025904", True),
    ("3095000000000000", True),
    ("38000000000000", True),
    ("3000000000000", False),
    ("6011000000000004", True),
    ("60110000000000000", False),
    ("6011000000000000000", True),
    ("6440000000000000", True),
    ("6500000000000000", True),
    ("6200000000000000000", True),
    ("6304000000000", True),
    ("6000000000000000", True),
    ("60000000000000000", False),
    ("8100000000000002", True),
    ("8300000000000000", False),
    ("1787178633773", False),
    ("9000000000001", False),
    ("4111", False),
]


@pytest.mark.parametrize(("digits", "expected"), ISSUER_VECTORS)
def test_plausible_issuer(digits: str, expected: bool) -> None:
    assert plausible_issuer(digits) is expected


CORROBORATED_VECTORS = [
    # Separated numbers are cards under both policies.
    ("ts 1787 1786 33773", "ts [REDACTED_PII_CREDIT_CARD]"),
    # Keywords are bounded by non-word characters or underscores; compound and CJK terms are substrings.
    ("card_number=1787178633773", "card_number=[REDACTED_PII_CREDIT_CARD]"),
    ("japan 1787178633773", "japan 1787178633773"),
    ("mycreditcard:1787178633773", "mycreditcard:[REDACTED_PII_CREDIT_CARD]"),
    ("カード: 1787178633773", "カード: [REDACTED_PII_CREDIT_CARD]"),
    # A letter is a word character in any script, so no card starts right after one.
    ("カード1787178633773", "カード1787178633773"),
    ("1787178633773 (Visa)", "[REDACTED_PII_CREDIT_CARD] (Visa)"),
    ("CVV and 1787178633773", "CVV and [REDACTED_PII_CREDIT_CARD]"),
    ("American Express 1787178633773", "American Express [REDACTED_PII_CREDIT_CARD]"),
    ("карта 1787178633773", "карта [REDACTED_PII_CREDIT_CARD]"),
    ("cartão 1787178633773", "cartão [REDACTED_PII_CREDIT_CARD]"),
    ("discard 1787178633773", "discard 1787178633773"),
]


@pytest.mark.parametrize(("text", "expected"), CORROBORATED_VECTORS)
def test_corroborated_policy(text: str, expected: str) -> None:
    assert redact_pii(text, Policy.corroborated()).value == expected


def test_keyword_window_is_64_utf8_bytes_each_side() -> None:
    digits = "1787178633773"
    for gap, found in ((62, True), (63, False)):
        text = "cc" + " " * gap + digits
        start = text.index(digits)
        assert card_passes(text, start, start + len(digits), Policy.corroborated()) is found
    for gap, found in ((62, True), (63, False)):
        text = digits + " " * gap + "cc"
        assert card_passes(text, 0, len(digits), Policy.corroborated()) is found


def test_keyword_window_widens_outward_to_whole_characters() -> None:
    # "карта" is 10 bytes. With 55 spaces the window's edge falls inside its first letter, which the
    # window then takes whole; with 56 it falls on the second letter, and "арта" is no keyword.
    digits = "1787178633773"
    for gap, found in ((55, True), (56, False)):
        text = "карта" + " " * gap + digits
        start = text.index(digits)
        window = keyword_window(text, start, start + len(digits))
        assert window.startswith("карта") is found
        assert card_passes(text, start, start + len(digits), Policy.corroborated()) is found


def test_keyword_window_at_the_edges_of_the_text() -> None:
    assert keyword_window("1234", 0, 4) == "1234"
    assert keyword_window("é" * 40 + "12" + "€" * 30, 40, 42) == "é" * 32 + "12" + "€" * 22


# --- Hints: each must hold in every match of its class, and skipping by it must change nothing. ------------


def test_every_hint_starts_with_a_plain_digit_and_is_in_the_union() -> None:
    for pii_class in PII_CLASSES:
        assert pii_class.hint.pattern.startswith("[0-9]")
        assert pii_class.hint_tail in ANY_HINT.pattern


_NOISE = st.text(alphabet=st.sampled_from("0123456789 -.:/()+Aaxyz\n\u200b５\t#No"), max_size=30)


@pytest.mark.parametrize("pii_class", PII_CLASSES, ids=lambda c: c.name)
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_hint_holds_in_every_match(pii_class: PiiClass, data: st.DataObject) -> None:
    text = data.draw(_NOISE) + data.draw(st.from_regex(pii_class.pattern)) + data.draw(_NOISE)
    assume(pii_class.pattern.search(text))
    assert pii_class.hint.search(text) is not None
    assert ANY_HINT.search(text) is not None
    expected = [m.span() for m in pii_class.pattern.finditer(text)]
    assert [m.span() for m in _candidates(pii_class, text)] == expected


@pytest.mark.parametrize("pii_class", PII_CLASSES, ids=lambda c: c.name)
def test_skipping_ahead_keeps_the_word_boundary(pii_class: PiiClass) -> None:
    # A match that the text before the hint would make impossible stays impossible from the skip point.
    prefix = "x" * (LOOKBACK + 5)
    for text in (prefix + "123-45-6789", prefix + " 123-45-6789"):
        assert [m.span() for m in _candidates(pii_class, text)] == [m.span() for m in pii_class.pattern.finditer(text)]
