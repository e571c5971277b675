"""Hypothesis on the contract's parsers: namespaces, reaches, filters, cursors and the wire JSON of every
request and response.

Whatever arrives, a parser answers a value or one of the contract's documented refusals: `InvalidRequestError`
from `Namespace.parse`, the cursor decoders and every `check()`, pydantic's `ValidationError` from a model.
What parses is stable: its dump parses back to an equal value, and parsing a normalised form again changes
nothing. The valid values are the contract property tests' strategies; the hostile ones are those valid
values with one part broken (`tests/fuzz/wire.py`).
"""

from __future__ import annotations

import contextlib
import json
from datetime import date
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from engines.contract import (
    Citation,
    EraseReport,
    EraseRequest,
    ExplorePage,
    ExploreRequest,
    Exported,
    ExportPage,
    Facet,
    FacetBucket,
    FetchMode,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    GetRequest,
    InvalidRequestError,
    ItemKind,
    ListPage,
    ListRequest,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Reach,
    RecallAnswer,
    RecallRequest,
    StoreReceipt,
    TimeHint,
    hit_of,
    parse_item,
)
from engines.cortex.ranked import fetch_cursor as cortex_fetch_cursor
from engines.cortex.ranked import fetch_offset as cortex_fetch_offset
from engines.cortex.reads import ListCursor
from engines.local.reads import fetch_cursor as local_fetch_cursor
from engines.local.reads import fetch_offset as local_fetch_offset
from engines.local.reads import list_after
from engines.reference.paging import cursor_offset
from tests.fuzz.profiles import fuzzed
from tests.fuzz.wire import EDGE_VALUES, broken
from tests.unit.engines.contract.test_properties import filters, ids, items, namespaces, opt_texts, reaches, texts

# --- Namespaces. ------------------------------------------------------------------------------------------

# Text made of the pieces a path is written with, so most draws get past the first segment.
_PATH_PIECES = ["user", "agent", "team", "service", "source", "project", ":", "/", "a", "B_1", "-", " ", "root"]
path_texts = st.text(max_size=60) | st.lists(st.sampled_from(_PATH_PIECES), max_size=20).map("".join)


@fuzzed(150)
@given(path_texts)
def test_namespace_parse_answers_a_path_or_invalid_request(text: str) -> None:
    try:
        parsed = Namespace.parse(text)
    except InvalidRequestError:
        with pytest.raises(ValidationError):
            MemoryMeta.model_validate({"namespace": text})
        return
    printed = str(parsed)
    assert Namespace.parse(printed) == parsed
    assert str(Namespace.parse(printed)) == printed
    assert MemoryMeta.model_validate({"namespace": text}).namespace == parsed


@fuzzed(50)
@given(namespaces, st.sampled_from(["", " ", "\t", "\n"]))
def test_a_printed_namespace_parses_back_whatever_blank_surrounds_it(ns: Namespace, blank: str) -> None:
    assert Namespace.parse(f"{blank}{ns}{blank}") == ns


# --- Reaches and filters. ---------------------------------------------------------------------------------


def _round_trips(model: type[BaseModel], value: Any) -> None:
    """`value` parses as `model` or is refused with a ValidationError; what parses dumps to a fixpoint."""
    try:
        parsed = model.model_validate(value)
    except ValidationError:
        return
    wire = parsed.model_dump(mode="json")
    again = model.model_validate(wire)
    assert again == parsed
    assert again.model_dump(mode="json") == wire
    assert model.model_validate_json(parsed.model_dump_json()) == parsed


def _names(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(sorted({info.alias or name for name, info in model.model_fields.items()} | set(model.model_fields)))


@fuzzed(50)
@given(st.data(), reaches)
def test_a_broken_reach_is_refused_or_stable(data: st.DataObject, reach: Reach) -> None:
    _round_trips(Reach, data.draw(broken(reach.model_dump(mode="json"), _names(Reach))))


@fuzzed(60)
@given(st.data(), filters)
def test_a_broken_filter_is_refused_or_stable(data: st.DataObject, filter: MetaFilter) -> None:
    _round_trips(MetaFilter, data.draw(broken(filter.model_dump(mode="json"), _names(MetaFilter))))


@fuzzed(40)
@given(filters)
def test_filter_normalisation_is_idempotent(filter: MetaFilter) -> None:
    # Instants are normalised to UTC and the empty lists and None are left out; a second pass changes nothing.
    once = MetaFilter.model_validate(filter.model_dump(mode="json"))
    assert once.model_dump(mode="json") == filter.model_dump(mode="json")
    assert once.is_empty() is filter.is_empty()


# --- Cursors: every engine's decoder answers an offset or InvalidRequestError, and reads back its own. ---

_CURSOR_PIECES = ["s", "o", "l", "0", "1", "9", "7b", "22", "7d", "ff", "-", "+", " ", "٣", "e"]
cursor_texts = (
    st.text(max_size=40)
    | st.lists(st.sampled_from(_CURSOR_PIECES), max_size=30).map("".join)
    | st.sampled_from([e for e in EDGE_VALUES if isinstance(e, str)])
    | st.binary(max_size=40).map(lambda b: "l" + b.hex())
    | st.binary(max_size=40).map(lambda b: "o" + b.hex())
)
DECODERS = {
    "local_list": list_after,
    "local_fetch": local_fetch_offset,
    "reference": cursor_offset,
    "cortex_fetch": cortex_fetch_offset,
}


@fuzzed(200)
@given(cursor_texts)
def test_an_offset_cursor_decodes_or_is_invalid(cursor: str) -> None:
    for decode in DECODERS.values():
        try:
            offset = decode(cursor)
        except InvalidRequestError:
            continue
        assert isinstance(offset, int) and offset >= 0


@fuzzed(150)
@given(cursor_texts)
def test_a_cortex_list_cursor_decodes_or_is_invalid(cursor: str) -> None:
    try:
        decoded = ListCursor.decode(cursor)
    except InvalidRequestError:
        return
    assert ListCursor.decode(decoded.encode()) == decoded


@fuzzed(60)
@given(st.integers(0, 2**63 - 1))
def test_every_engine_reads_back_the_cursor_it_wrote(offset: int) -> None:
    assert list_after(f"s{offset}") == offset
    assert local_fetch_offset(local_fetch_cursor(offset)) == offset
    assert cortex_fetch_offset(cortex_fetch_cursor(offset)) == offset
    assert cursor_offset(str(offset)) == min(offset, 10**18)


@fuzzed(60)
@given(texts, st.none() | texts, st.integers(0, 2**70), st.none() | texts)
def test_a_cortex_list_cursor_round_trips(scope: str, page: str | None, skip: int, last: str | None) -> None:
    cursor = ListCursor(scope, page, skip, last)
    assert ListCursor.decode(cursor.encode()) == cursor


# --- Wire JSON of every request and response. -------------------------------------------------------------

limits = st.integers(1, 1000)
time_hints = st.builds(
    TimeHint,
    from_=st.dates(date(1, 1, 1), date(9999, 12, 31)),
    to=st.dates(date(1, 1, 1), date(9999, 12, 31)),
    zone=st.none() | st.sampled_from(["UTC", "Asia/Tokyo", "America/Sao_Paulo", "Nowhere/Else"]),
)
opt_hints = st.none() | time_hints
item_kinds = st.lists(st.sampled_from(list(ItemKind)), max_size=3)
hits = st.builds(hit_of, ids, items, st.floats(-1e6, 1e6))
citations = st.builds(
    Citation, id=ids, kind=st.sampled_from(list(ItemKind)), snippet=texts, score=st.none() | st.floats(0, 1)
)
REQUESTS: dict[type[BaseModel], st.SearchStrategy[Any]] = {
    RecallRequest: st.builds(
        RecallRequest, question=texts, filter=filters, limit=limits, instructions=opt_texts, refers_to=opt_hints
    ),
    FetchRequest: st.builds(
        FetchRequest,
        query=texts,
        mode=st.sampled_from(list(FetchMode)),
        filter=filters,
        limit=limits,
        cursor=opt_texts,
        refers_to=opt_hints,
    ),
    ListRequest: st.builds(ListRequest, filter=filters, limit=limits, cursor=opt_texts),
    ForgetTarget: st.one_of(st.lists(ids, max_size=3).map(ForgetTarget.by_ids), filters.map(ForgetTarget.by_filter)),
    EraseRequest: st.builds(EraseRequest, reach=reaches, kinds=item_kinds, whole_tree=st.booleans()),
    ExploreRequest: st.builds(
        ExploreRequest, facet=st.sampled_from(list(Facet)), filter=filters, limit=limits, scan_limit=limits
    ),
    GetRequest: st.builds(GetRequest, ids=st.lists(ids, max_size=3), reach=st.none() | reaches),
}
RESPONSES: dict[type[BaseModel], st.SearchStrategy[Any]] = {
    FetchPage: st.builds(FetchPage, hits=st.lists(hits, max_size=2), next_cursor=opt_texts),
    ListPage: st.builds(ListPage, items=st.lists(hits, max_size=2), next_cursor=opt_texts),
    RecallAnswer: st.builds(RecallAnswer, answer=texts, citations=st.lists(citations, max_size=2), model=opt_texts),
    ExportPage: st.builds(
        ExportPage,
        items=st.lists(st.builds(Exported, id=ids, item=items), max_size=2),
        incomplete=st.lists(ids, max_size=2),
        next_cursor=opt_texts,
    ),
    ExplorePage: st.builds(
        ExplorePage,
        facet=st.sampled_from(list(Facet)),
        buckets=st.lists(st.builds(FacetBucket, value=texts, count=st.integers(0, 100)), max_size=2),
        total=st.integers(0, 100),
        truncated=st.booleans(),
    ),
    StoreReceipt: st.builds(StoreReceipt, id=ids, replayed=st.booleans()),
    ForgetReport: st.builds(ForgetReport, forgotten=st.integers(0, 2**40)),
    EraseReport: st.builds(EraseReport, erased_scopes=st.integers(0, 100), receipts=st.lists(texts, max_size=2)),
}
MODELS = {**REQUESTS, **RESPONSES}


def _checked(model: type[BaseModel], value: Any) -> None:
    """Refused with ValidationError, or parsed, stable, and `check()` answering nothing or InvalidRequestError."""
    _round_trips(model, value)
    try:
        parsed = model.model_validate(value)
    except ValidationError:
        return
    check = getattr(parsed, "check", None)
    if check is not None:
        with contextlib.suppress(InvalidRequestError):
            check()


@fuzzed(150)
@given(data=st.data(), model=st.sampled_from(list(MODELS)))
def test_broken_wire_json_is_refused_or_stable(data: st.DataObject, model: type[BaseModel]) -> None:
    valid = data.draw(MODELS[model])
    _checked(model, data.draw(broken(valid.model_dump(mode="json"), _names(model))))


@fuzzed(50)
@given(data=st.data(), model=st.sampled_from(list(REQUESTS)))
def test_broken_wire_text_is_refused_or_stable(data: st.DataObject, model: type[BaseModel]) -> None:
    # As the API reads a body: JSON text, where `\ud800` escapes decode to lone surrogates.
    hostile = data.draw(broken(data.draw(REQUESTS[model]).model_dump(mode="json"), _names(model)))
    text = json.dumps(hostile, ensure_ascii=True)
    try:
        parsed = model.model_validate_json(text)
    except ValidationError:
        return
    assert model.model_validate_json(parsed.model_dump_json()) == parsed


@fuzzed(50)
@given(st.data(), items)
def test_a_broken_item_is_refused_or_stable(data: st.DataObject, item: Any) -> None:
    hostile = data.draw(broken(item.wire_dict(), ("type", "meta", "text", "title", "body", "turns", "kind")))
    try:
        parsed = parse_item(hostile)
    except ValidationError:
        return
    assert parse_item(parsed.wire_json()) == parsed
    assert parse_item(parsed.wire_json()).fingerprint() == parsed.fingerprint()
