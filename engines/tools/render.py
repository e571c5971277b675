"""Tool results as the compact JSON a model reads (docs/spec/tools-and-context.md §6).

Only what helps a model is written: a hit's id, kind, text, score, confidence and a small subset of
its metadata. The namespace is never written (the host fixed it), `null` never appears, scores are
rounded to four places and keys keep the spec's order.
"""

from __future__ import annotations

import json

from engines.contract import (
    Citation,
    ExplorePage,
    Hit,
    ItemId,
    MemoryMeta,
    RecallAnswer,
    StoreReceipt,
    format_instant,
)
from engines.tools.schemas import JsonObject

_SCORE_PLACES = 4


def compact(result: JsonObject) -> str:
    """The result as the tools return it: no spaces, non-ASCII written raw."""
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))


def meta(held: MemoryMeta) -> JsonObject:
    """The metadata subset: source, then file path, url, thread, tags and observation time when set."""
    source: JsonObject = {"kind": held.source.kind.value}
    if held.source.id is not None:
        source["id"] = held.source.id
    out: JsonObject = {"source": source}
    for name in ("file_path", "url", "thread_id"):
        value = getattr(held, name)
        if value is not None:
            out[name] = value
    if held.tags:
        out["tags"] = list(held.tags)
    if held.observed_at is not None:
        out["observed_at"] = format_instant(held.observed_at)
    return out


def hit(found: Hit) -> JsonObject:
    out: JsonObject = {
        "id": found.id,
        "kind": found.kind.value,
        "text": found.text,
        "score": round(found.score, _SCORE_PLACES),
    }
    if found.confidence is not None:
        out["confidence"] = round(found.confidence, _SCORE_PLACES)
    out["meta"] = meta(found.meta)
    return out


def citation(cited: Citation) -> JsonObject:
    out: JsonObject = {"id": cited.id, "kind": cited.kind.value, "snippet": cited.snippet}
    if cited.score is not None:
        out["score"] = round(cited.score, _SCORE_PLACES)
    out["meta"] = meta(cited.meta)
    return out


def recalled(answer: RecallAnswer) -> JsonObject:
    return {"answer": answer.answer, "citations": [citation(c) for c in answer.citations]}


def page(key: str, hits: list[Hit], next_cursor: str | None) -> JsonObject:
    """A fetch (`hits`) or list (`items`) page; `next_cursor` only when more follow."""
    out: JsonObject = {key: [hit(h) for h in hits]}
    if next_cursor is not None:
        out["next_cursor"] = next_cursor
    return out


def got(ids: list[ItemId], hits: list[Hit]) -> JsonObject:
    """The items read, and the asked ids that did not come back, in request order."""
    returned = {h.id for h in hits}
    return {"items": [hit(h) for h in hits], "missing": [i for i in ids if i not in returned]}


def explored(result: ExplorePage) -> JsonObject:
    wire: JsonObject = result.model_dump(mode="json")
    return wire


def stored(receipt: StoreReceipt) -> JsonObject:
    return {"id": receipt.id, "replayed": receipt.replayed}


def forgot(forgotten: int, skipped: list[ItemId]) -> JsonObject:
    return {"forgotten": forgotten, "skipped": skipped}
