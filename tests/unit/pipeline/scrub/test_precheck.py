"""The scrubber's one-test shortcut (`precheck`) changes nothing: `sanitize_text` and `scrub_item` return
exactly what every stage run in full returns, for any text and item under every policy, and the shortcut is
taken for ordinary prose, not for anything a stage reacts to."""

from __future__ import annotations

import string
from importlib.resources import files

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.contract import (
    Conversation,
    Document,
    DocumentBody,
    Learning,
    LearningKind,
    MemoryMeta,
    Role,
    StoreItem,
    Turn,
)
from pipeline.scrub import Policy, sanitize_text, scrub_item
from pipeline.scrub.item import scrub_item_fully
from pipeline.scrub.precheck import nothing_to_scrub
from pipeline.scrub.text_stages import sanitize_fully
from tests.unit.engines.contract.test_properties import items as any_items
from tests.unit.pipeline.scrub.test_properties import _PIECES, POLICIES, POLICY_IDS, TRICKY_TEXT

# ASCII is where the shortcut applies: ordinary words, digits and the pieces every stage reacts to, in
# every case, so a test meets texts it takes and texts it must leave to the stages, and the seams between.
_WORDS = files("pipeline.scrub").joinpath("words.txt").read_text(encoding="utf-8").split()
_ASCII_PIECES = [piece for piece in _PIECES if piece.isascii()]
_TRIGGERS = ["PuTTY", "puTTy", "-----", "BEARER ", "Secret", "KEY", "Pwd", "AUTH", "sig=", "Signature=", "@"]
_TRIGGERS += ["verifier", "Discord", '"private_key_id"', "://", "a" * 19, "ab_cd-ef.gh/ij+kl=mn~op", "x:y@z"]
_ascii_piece = st.one_of(
    st.sampled_from(_WORDS),
    st.sampled_from(_WORDS).map(str.upper),
    st.sampled_from(_ASCII_PIECES + _TRIGGERS),
    st.integers(0, 10**12).map(str),
    st.text(alphabet=string.printable, max_size=4),
)
_gap = st.sampled_from([" ", " ", ", ", ". ", ": ", "=", "-", "/", "\n", "\t", "", "\x00"])
ASCII_TEXT = st.lists(st.tuples(_ascii_piece, _gap), max_size=24).map(lambda p: "".join(a + b for a, b in p))
TEXTS = ASCII_TEXT | TRICKY_TEXT | st.text(max_size=40)

_opt = st.none() | ASCII_TEXT
_metas = st.builds(MemoryMeta, url=_opt, tags=st.lists(ASCII_TEXT, max_size=2))
ASCII_ITEMS: st.SearchStrategy[StoreItem] = st.one_of(
    st.builds(Document, title=_opt, body=ASCII_TEXT.map(DocumentBody.of_text), meta=_metas),
    st.builds(Document, title=_opt, body=ASCII_TEXT.map(DocumentBody.of_uri), meta=_metas),
    st.builds(
        Conversation,
        turns=st.lists(st.builds(Turn, role=st.sampled_from(list(Role)), text=ASCII_TEXT), max_size=4),
        meta=_metas,
    ),
    st.builds(Learning, text=ASCII_TEXT, kind=st.sampled_from(list(LearningKind)), evidence=_opt, meta=_metas),
)


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
@settings(max_examples=400, deadline=None)
@given(text=TEXTS)
def test_a_text_scrubs_exactly_as_every_stage_in_full_scrubs_it(policy: Policy, text: str) -> None:
    assert sanitize_text(text, policy) == sanitize_fully(text, policy)


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
@settings(max_examples=400, deadline=None)
@given(text=TEXTS)
def test_a_text_the_shortcut_takes_is_one_the_stages_leave_alone(policy: Policy, text: str) -> None:
    if nothing_to_scrub([text], policy):
        full = sanitize_fully(text, policy)
        assert full.value == text and not full.report.changed()


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
@settings(max_examples=200, deadline=None)
@given(texts=st.lists(TEXTS, max_size=4))
def test_texts_tested_together_are_tested_as_each_alone(policy: Policy, texts: list[str]) -> None:
    alone = not policy.is_spec and all(nothing_to_scrub([text], policy) for text in texts)
    assert nothing_to_scrub(texts, policy) == alone


def _same(got: StoreItem, expected: StoreItem) -> None:
    assert type(got) is type(expected)
    assert got == expected
    assert got.identified() == expected.identified()
    assert got.model_fields_set == expected.model_fields_set
    assert got.meta.model_fields_set == expected.meta.model_fields_set


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
@settings(max_examples=200, deadline=None)
@given(item=ASCII_ITEMS | any_items)
def test_an_item_scrubs_exactly_as_every_text_in_full_scrubs_it(policy: Policy, item: StoreItem) -> None:
    before = item.model_copy(deep=True)
    got, expected = scrub_item(item, policy), scrub_item_fully(item, policy)
    _same(got.value, expected.value)
    assert got.report == expected.report
    assert got.value is not item
    _same(item, before)  # the input is not modified


@pytest.mark.parametrize(
    "text",
    [
        "",
        "note 100: alpha beta gamma",
        "Note 12",
        "k1: alpha\nbeta, gamma. 12 apples and 3 pears at 10:30",
        "see example.com/docs for the rest",
        # A link's long run of token characters holds no vendor token's needle (most of tldr-pages: 80%).
        "see https://example.com/docs/legacy-reference_guide.html for the rest",
        "tar --extract --file=path/to/archive.tar.gz --directory=path/to/directory",
    ],
)
def test_ordinary_prose_takes_the_shortcut(text: str) -> None:
    assert nothing_to_scrub([text], Policy())
    assert nothing_to_scrub([text, text.upper()], Policy())


@pytest.mark.parametrize(
    "text",
    [
        "-----BEGIN RSA PRIVATE KEY-----",
        "PuTTY-User-Key-File-2: ssh-rsa",
        "https://ots.example/secret/abc",
        "Bearer abcd1234",
        "postgres://user:pw@db/x",
        "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
        "the discord bot",
        "password: hunter22",
        "call +44 20 7946 0958 today",
        "see https://example.com/ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 for the rest",
        "export AWS=AKIAIOSFODNN7EXAMPLE/x",
        "caf\u00e9 au lait",
    ],
)
def test_anything_a_stage_reacts_to_is_left_to_the_stages(text: str) -> None:
    assert not nothing_to_scrub([text], Policy())
    assert not nothing_to_scrub(["plain words", text], Policy())


def test_the_spec_rules_never_take_the_shortcut() -> None:
    assert not nothing_to_scrub(["plain words"], Policy.spec_compatible())
