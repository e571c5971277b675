"""Hypothesis on the scrubber (`pipeline.scrub`) as the pipeline meets it: prose, JSON and whole items.

Under every policy: it never raises; a second scrub changes and reports nothing (idempotent), so an already
scrubbed text never grows; and every class of secret and personal identifier the rules name, planted in
generated prose, is gone from the output. The unit property tests (`tests/unit/pipeline/scrub/test_properties.py`)
plant the same secrets in adversarial character soup; here the surroundings are sentences, JSON documents and
the fields of an item, which is where a real secret sits.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from engines.contract import Conversation, Document, Learning
from pipeline.scrub import sanitize_json, sanitize_text, scrub_item
from tests.fuzz.profiles import fuzzed
from tests.fuzz.wire import JSON_VALUES
from tests.unit.engines.contract.test_properties import items
from tests.unit.pipeline.scrub.test_properties import (
    EXTENDED_PLANTED,
    EXTENDED_POLICIES,
    PLANTED,
    POLICIES,
    POLICY_IDS,
    SPEC_POLICIES,
    TRICKY_TEXT,
)

# Prose: the scrubber's own list of ordinary words (what it must leave alone), capitalised now and then, with
# punctuation and line breaks, and no digits, so the text around a planted value never extends its shape.
WORDS = files("pipeline.scrub").joinpath("words.txt").read_text(encoding="utf-8").split()
_PUNCTUATION = [" ", " ", " ", ", ", ". ", "; ", ": ", " - ", "\n", "\n\n", " (", ") ", ' "', '" ', "! ", "? "]
_words = st.sampled_from(WORDS) | st.sampled_from(WORDS).map(str.capitalize)
PROSE = st.lists(st.tuples(_words, st.sampled_from(_PUNCTUATION)), max_size=30).map(
    lambda pairs: "".join(word + gap for word, gap in pairs)
)

# One valid value of each personal identifier class of docs/spec/safety.md §6.4 and the part of it that must not
# survive (for the keyword classes, the number after the keyword).
PLANTED_PII: dict[str, tuple[str, str]] = {
    "cpf": ("529.982.247-25", "529.982.247-25"),
    "cpf_bare": ("52998224725", "52998224725"),
    "cnpj": ("11.222.333/0001-81", "11.222.333/0001-81"),
    "cnpj_bare": ("11222333000181", "11222333000181"),
    "cuit": ("20-12345678-6", "12345678"),
    "iban": ("GB82 WEST 1234 5698 7654 32", "1234 5698 7654"),
    "credit_card": ("4111 1111 1111 1111", "4111 1111 1111"),
    "aadhaar": ("2341 2341 2346", "2341 2341 2346"),
    "aadhaar_keyword": ("Aadhaar no. 234123412346", "234123412346"),
    "dni": ("12345678Z", "12345678Z"),
    "nie": ("X1234567L", "X1234567L"),
    "nino": ("AB123456C", "AB123456C"),
    "ssn": ("123-45-6789", "123-45-6789"),
    "rrn": ("900101-1234568", "900101-1234568"),
    "rfc": ("GODE561231GR8", "GODE561231GR8"),
    "pan": ("ABCDE1234F", "ABCDE1234F"),
    "phone_e164": ("+14155552671", "4155552671"),
    "phone_nanp": ("415-555-2671", "555-2671"),
    "my_number": ("My Number 123456789012", "123456789012"),
}

ANY_TEXT = st.text() | TRICKY_TEXT | PROSE
MIXED_PROSE = st.lists(PROSE | TRICKY_TEXT, max_size=4).map(" ".join)


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
@fuzzed(30)
@given(text=ANY_TEXT | MIXED_PROSE)
def test_text_scrub_never_raises_is_idempotent_and_never_grows_scrubbed_text(policy: Any, text: str) -> None:
    once = sanitize_text(text, policy)
    twice = sanitize_text(once.value, policy)
    assert twice.value == once.value
    assert len(twice.value) <= len(once.value)
    assert not twice.report.changed()
    assert once.report.changed() or once.value == text


def _planted_in_prose(before: str, planted: str, after: str) -> str:
    # A space, then a line break after: a shape needs its word boundary, and the keyword rule never crosses
    # a line, as it would be in a real sentence.
    return f"{before} {planted} \n{after}"


@pytest.mark.parametrize("kind", PLANTED)
@fuzzed(4)
@given(data=st.data(), before=PROSE, after=PROSE)
def test_a_secret_in_prose_is_caught_by_the_spec_rules(kind: str, data: st.DataObject, before: str, after: str) -> None:
    planted, secret = data.draw(PLANTED[kind])
    text = _planted_in_prose(before, planted, after)
    assume(text.count(secret) == 1)
    for policy in SPEC_POLICIES:
        scrubbed = sanitize_text(text, policy)
        assert secret not in scrubbed.value
        assert scrubbed.report.changed()


@pytest.mark.parametrize("kind", EXTENDED_PLANTED)
@fuzzed(4)
@given(data=st.data(), before=PROSE, after=PROSE)
def test_a_secret_in_prose_is_caught_by_the_extended_rules(
    kind: str, data: st.DataObject, before: str, after: str
) -> None:
    planted, secret = data.draw(EXTENDED_PLANTED[kind])
    text = _planted_in_prose(before, planted, after)
    assume(text.count(secret) == 1)
    for policy in EXTENDED_POLICIES[:2]:
        scrubbed = sanitize_text(text, policy)
        assert secret not in scrubbed.value, scrubbed.value
        assert scrubbed.report.changed()


@pytest.mark.parametrize("kind", PLANTED_PII)
@fuzzed(4)
@given(before=PROSE, after=PROSE)
def test_a_personal_identifier_in_prose_is_caught(kind: str, before: str, after: str) -> None:
    planted, identifier = PLANTED_PII[kind]
    text = _planted_in_prose(before, planted, after)
    for policy in POLICIES:
        scrubbed = sanitize_text(text, policy)
        assert identifier not in scrubbed.value, (policy, scrubbed.value)
        assert scrubbed.report.pii_redactions >= 1


# --- JSON and items. --------------------------------------------------------------------------------------

_SECRET_JSON = st.sampled_from(list(PLANTED.values())).flatmap(lambda planted: planted).map(lambda pair: pair[0])
SCRUB_JSON = st.recursive(
    JSON_VALUES | ANY_TEXT | _SECRET_JSON,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["token", "apiKey", "note", "monkey", "body", "x"]) | st.text(max_size=8), inner
        )
    ),
    max_leaves=10,
)


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"child": value}
    return value


def _dumped(value: Any) -> str:
    # NaN is not equal to itself; its JSON text is.
    return json.dumps(value, sort_keys=False, ensure_ascii=False)


@fuzzed(60)
@given(SCRUB_JSON | st.builds(_nested, st.integers(100, 160), ANY_TEXT))
def test_json_scrub_never_raises_is_idempotent_and_never_grows(value: Any) -> None:
    for policy in (POLICIES[0], SPEC_POLICIES[0]):
        once = sanitize_json(value, policy)
        twice = sanitize_json(once.value, policy)
        assert _dumped(twice.value) == _dumped(once.value)
        assert len(_dumped(twice.value)) <= len(_dumped(once.value))
        # docs/spec/safety.md §7 counts a sensitive member and a cut subtree whatever they already hold, so a second
        # pass counts the `[REDACTED_SECRET]` it left in place again; no text is replaced twice.
        again = twice.report
        assert (again.blocked_secret_hits, again.text_redactions, again.pii_redactions) == (0, 0, 0)
        assert (again.key_redactions, again.depth_redactions) == (
            once.report.key_redactions,
            once.report.depth_redactions,
        )


def _identity(item: Document | Conversation | Learning) -> dict[str, Any]:
    """What scrubbing never rewrites: the item's metadata but its URL (docs/spec/safety.md §8)."""
    return item.meta.model_dump(mode="json", exclude={"url"})


@fuzzed(40)
@given(items, st.sampled_from(POLICIES))
def test_item_scrub_is_idempotent_and_keeps_every_identifier(item: Any, policy: Any) -> None:
    once = scrub_item(item, policy)
    twice = scrub_item(once.value, policy)
    assert twice.value == once.value
    assert twice.value.fingerprint() == once.value.fingerprint()
    assert not twice.report.changed()
    assert _identity(once.value) == _identity(item)
    assert once.report.changed() or once.value == item
