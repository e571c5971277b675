"""`fetch` and `recall`: one exact pack per scope, merged rank by rank, and one answer (docs/spec/cortexdb.md §11.3,
§11.4).

Every pack is `view: "granular"` over one scope: a parent-scope pack is an unranked sample of its children in
storage order, so it is never asked for. The answer is grounded on the pack that admitted the most events; a pack
the server dropped (they live 60 s, and any forget or erasure drops them all) is rebuilt, at most three rounds.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from engines.contract import (
    Citation,
    EngineError,
    FetchPage,
    FetchRequest,
    Hit,
    InvalidRequestError,
    ItemKind,
    MetaFilter,
    NotFoundError,
    RecallAnswer,
    RecallRequest,
    TimeHint,
)
from engines.cortex.chunks import MAX_EVENT_TEXT_BYTES
from engines.cortex.envelope import Envelope
from engines.cortex.held import Held, admits, decoded, is_split, item_hit, piece_hit, rebuild
from engines.cortex.labels import narrowing_labels
from engines.cortex.layout import KindScope
from engines.cortex.lookup import lookup
from engines.cortex.scopes import Selector
from engines.cortex.together import all_of
from engines.cortex.wire import Wire, read_event

logger = logging.getLogger(__name__)

FETCH_TAG = "f"
PACKS_IN_FLIGHT = 4
MAX_PACK_EVENTS = 1000
MAX_TOKENS = 8_388_608
ANSWER_ROUNDS = 3
RECALL_LAYERS = ["events", "facts", "beliefs", "episodes", "understanding"]
_LOUD_WARNINGS = ("parent_pack_unranked_sample", "evict")

_T = TypeVar("_T")


@dataclass(frozen=True)
class _Pack:
    scope: KindScope
    pack_id: str | None
    admitted: list[Envelope]


def fetch_offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        if not cursor.startswith(FETCH_TAG):
            raise ValueError("tag")
        offset = json.loads(bytes.fromhex(cursor[1:]).decode("utf-8"))["offset"]
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError("offset")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError):
        raise InvalidRequestError(f"unknown cursor `{cursor[:80]}`") from None
    return offset


def fetch_cursor(offset: int) -> str:
    return FETCH_TAG + json.dumps({"offset": offset}, separators=(",", ":")).encode("utf-8").hex()


def layer_limits(limit: int) -> dict[str, int]:
    """`limit` spread over facts, beliefs, episodes and understanding, the remainder to the first layers."""
    share, extra = divmod(limit, 4)
    names = RECALL_LAYERS[1:]
    return {"events": 2 * limit} | {name: share + (1 if n < extra else 0) for n, name in enumerate(names)}


async def _bounded(calls: Sequence[Callable[[], Awaitable[_T]]]) -> list[_T]:
    gate = asyncio.Semaphore(PACKS_IN_FLIGHT)

    async def one(call: Callable[[], Awaitable[_T]]) -> _T:
        async with gate:
            return await call()

    return await all_of(one(call) for call in calls)


def _rank_by_hint(envelopes: list[Envelope], hint: TimeHint | None) -> list[Envelope]:
    if hint is None:
        return envelopes
    inside = [e for e in envelopes if e.meta.observed_at is not None and hint.matches(e.meta.observed_at)]
    chosen = {id(e) for e in inside}
    return inside + [e for e in envelopes if id(e) not in chosen]


def _interleave(ranked: Sequence[list[Envelope]]) -> list[Envelope]:
    """Every scope's best item, then every scope's second, …, each item once."""
    merged: list[Envelope] = []
    taken: set[str] = set()
    for rank in range(max((len(r) for r in ranked), default=0)):
        for envelopes in ranked:
            if rank < len(envelopes) and envelopes[rank].id not in taken:
                taken.add(envelopes[rank].id)
                merged.append(envelopes[rank])
    return merged


class Ranker:
    """Ranked reads through one wire."""

    def __init__(self, wire: Wire, selector: Selector) -> None:
        self.wire = wire
        self.selector = selector

    async def _pack(self, scope: KindScope, body: dict[str, Any], filter: MetaFilter) -> _Pack:
        pack = await self.wire.recall({"scope": scope.path, **body})
        _log_warnings(scope, pack.get("warnings"))
        layers = pack.get("layers")
        raw = layers.get("events") if isinstance(layers, dict) else None
        admitted: list[Envelope] = []
        seen: set[str] = set()
        for entry in raw if isinstance(raw, list) else []:
            event = read_event(entry)
            held: Held | None = decoded(event) if event is not None else None
            if held is None or held.envelope.kind is not scope.kind or held.item_id in seen:
                continue
            if admits(filter, held.envelope):
                seen.add(held.item_id)
                admitted.append(held.envelope)
        pack_id = pack.get("pack_id")
        return _Pack(scope, pack_id if isinstance(pack_id, str) else None, admitted)

    # -- fetch ----------------------------------------------------------------------------------------

    async def fetch(self, req: FetchRequest) -> FetchPage:
        offset = fetch_offset(req.cursor)
        end = offset + req.limit
        scopes = await self.selector.read(req.filter)
        if not scopes:
            return FetchPage()
        events = min((end + 1) * 3, MAX_PACK_EVENTS)
        body: dict[str, Any] = {
            "query": req.query,
            "view": "granular",
            "include": ["events"],
            "budgets": {
                "max_tokens": min(events * MAX_EVENT_TEXT_BYTES, MAX_TOKENS),
                "per_layer_limits": {"events": events},
            },
        }
        labels = narrowing_labels(req.filter)
        if labels:
            body["filters"] = {"metadata": {"labels": labels}}
        packs = await _bounded([partial(self._pack, s, body, req.filter) for s in scopes])
        merged = _rank_by_hint(_interleave([p.admitted for p in packs]), req.refers_to)
        window = merged[offset:end]
        scope_of = {e.id: p.scope for p in packs for e in p.admitted}
        hits = await self._hits(window, scope_of, offset)
        return FetchPage(hits=hits, next_cursor=fetch_cursor(end) if len(merged) > end else None)

    async def _hits(self, window: list[Envelope], scope_of: dict[str, KindScope], offset: int) -> list[Hit]:
        long_talks: dict[str, list[str]] = {}
        for envelope in window:
            if envelope.kind is ItemKind.CONVERSATION and envelope.count > 1:
                long_talks.setdefault(scope_of[envelope.id].path, []).append(envelope.id)
        by_path = {scope.path: scope for scope in scope_of.values()}
        found = await _bounded([partial(lookup, self.wire, by_path[p], ids) for p, ids in long_talks.items()])
        turns = {item_id: held for result in found for item_id, held in result.items()}
        hits = []
        for rank, envelope in enumerate(window, start=offset):
            score = 1.0 / (1 + rank)
            if is_split(envelope):
                hits.append(piece_hit(envelope, score))
                continue
            events = [h.envelope for h in turns.get(envelope.id, [])] or [envelope]
            item = rebuild(sorted(events, key=lambda e: e.part or 0))
            if item is not None:
                hits.append(item_hit(envelope.id, item, score))
        return hits

    # -- recall ---------------------------------------------------------------------------------------

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        scopes = await self.selector.read(req.filter, held_only=True)
        if not scopes:
            return RecallAnswer(answer="", citations=[])
        ordered = sorted(scopes, key=KindScope.specificity)
        limit = req.limit
        body = {
            "query": req.question,
            "view": "granular",
            "include": list(RECALL_LAYERS),
            "budgets": {
                "max_tokens": min(3 * limit * MAX_EVENT_TEXT_BYTES, MAX_TOKENS),
                "per_layer_limits": layer_limits(limit),
            },
        }
        for round_number in range(1, ANSWER_ROUNDS + 1):
            packs = await _bounded([partial(self._pack, s, body, req.filter) for s in ordered])
            if any(pack.pack_id is None for pack in packs):
                raise EngineError(f"{self.wire.where(self.wire.routes.recall)} answered a pack without a pack_id")
            chosen = max(packs, key=lambda pack: len(pack.admitted))  # max keeps the first of equals
            try:
                answer = await self.wire.answer(self._answer_body(chosen, req))
            except NotFoundError:
                if round_number == ANSWER_ROUNDS:
                    raise NotFoundError(
                        f"{self.wire.where(self.wire.routes.answer)}: the pack was gone {ANSWER_ROUNDS} times in a row"
                    ) from None
                continue
            return _answer(answer, packs, req)
        raise AssertionError("unreachable: the last round returns or raises")

    def _answer_body(self, pack: _Pack, req: RecallRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "scope": pack.scope.path,
            "question": req.question,
            "use_pack_id": pack.pack_id,
            "cite_sources": True,
            "include_context": True,
        }
        # The hosted answer schema is strict: an unknown key or a null is refused, so an unset value is left out.
        if req.instructions is not None or not self.wire.hosted:
            body["answer_instructions"] = req.instructions
        return body


def _answer(answer: dict[str, Any], packs: list[_Pack], req: RecallRequest) -> RecallAnswer:
    merged = _interleave([pack.admitted for pack in packs])[: req.limit]
    citations = [Citation(id=e.id, kind=e.kind, snippet=e.text, meta=e.meta, score=None) for e in merged]
    if req.refers_to is not None:
        citations = req.refers_to.rank(citations)
    diagnostics = answer.get("diagnostics")
    model = diagnostics.get("answer_model") if isinstance(diagnostics, dict) else None
    return RecallAnswer(answer=answer["answer"], citations=citations, model=model if isinstance(model, str) else None)


def _log_warnings(scope: KindScope, warnings: object) -> None:
    if not isinstance(warnings, list):
        return
    for warning in warnings:
        text = warning if isinstance(warning, str) else json.dumps(warning)[:300]
        level = logging.WARNING if any(word in text for word in _LOUD_WARNINGS) else logging.DEBUG
        logger.log(level, "recall pack over %s warned: %s", scope.path, text)
