"""Recall packs and answers of the double (docs/spec/cortexdb.md §13.7, §13.8).

Ranking is plain word overlap: the number of distinct query words (letters and digits, at least 3 characters) an
event holds, best first, newest first among equals; events without a match follow. Packs live `pack_ttl_s` and
are all dropped by any forget or erasure, as the server's are.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import Any

from tinymemory_ingest.cortex_double.checks import RefusalError, invalid
from tinymemory_ingest.cortex_double.config import DoubleConfig
from tinymemory_ingest.cortex_double.log import EventLog, EventRecord, Pack, words

RECALL_KEYS = frozenset(
    {"scope", "query", "budgets", "view", "include", "temporal", "filters", "diagnostics", "language", "scripts"}
    | {"query_variants"}
)
METADATA_FILTERS = frozenset({"labels", "intent", "modality", "caller", "observed_actor"})
EXACT_VIEWS = frozenset({"granular", "local", "raw", "structured"})
LAYERS = ("events", "facts", "beliefs", "episodes", "understanding")
ANSWER_CHARS = 200


def check_recall(body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise invalid("the body must be a JSON object")
    unknown = sorted(set(body) - RECALL_KEYS)
    if unknown:
        raise invalid(f"unknown field(s) {', '.join(unknown)}")
    if not isinstance(body.get("scope"), str) or not isinstance(body.get("query"), str):
        raise invalid("recall needs a scope and a string query")
    filters = body.get("filters") or {}
    metadata = filters.get("metadata", {}) if isinstance(filters, dict) else None
    if not isinstance(metadata, dict) or set(metadata) - METADATA_FILTERS:
        raise invalid(f"filters.metadata takes only {', '.join(sorted(METADATA_FILTERS))}")
    return body


def _labels(body: dict[str, Any]) -> list[str] | None:
    metadata = (body.get("filters") or {}).get("metadata") or {}
    labels = metadata.get("labels")
    if isinstance(labels, str):
        return [labels]
    return [label for label in labels if isinstance(label, str)] if isinstance(labels, list) else None


def _scopes(log: EventLog, scope: str, view: str) -> list[str]:
    if view in EXACT_VIEWS:
        return [scope]
    if view == "descend":
        return [scope, *log.below(scope)]
    parts = scope.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]


def rank(
    records: Iterable[EventRecord], query: str, size: int, vocabulary: dict[str, int] | None = None
) -> list[EventRecord]:
    """The best `size` of `records` (given newest first): most query words, newest first among equals.

    `vocabulary` gives, for each word the scopes hold, the `seq` of the first event that held it. An event older
    than the one at hand can hold only the query words first held before it, so the walk stops once the `size`
    best reach that bound: nothing older can rank above them (a tie goes to the newer).
    """
    if size <= 0:
        return []
    wanted = words(query)
    # When each query word was first held, latest first; the first `passed` of them are no older event's.
    firsts = sorted((vocabulary[w] for w in wanted if w in vocabulary), reverse=True) if vocabulary is not None else []
    held = len(firsts) if vocabulary is not None else len(wanted)
    passed = 0
    best: list[tuple[int, int, EventRecord]] = []
    for record in records:
        score = len(wanted & record.words())
        if len(best) < size:
            heapq.heappush(best, (score, record.seq, record))
        elif score > best[0][0] or (score == best[0][0] and record.seq > best[0][1]):
            heapq.heapreplace(best, (score, record.seq, record))
        while passed < len(firsts) and firsts[passed] >= record.seq:
            passed += 1
        if len(best) == size and best[0][0] >= held - passed:
            break
    return [record for _, _, record in sorted(best, key=lambda e: (-e[0], -e[1]))]


def _newest_first(log: EventLog, scopes: list[str], labels: list[str] | None, now: float) -> Iterator[EventRecord]:
    """The ranked (not removed) events of `scopes`, narrowed to any of `labels`, newest first."""
    streams: list[Iterable[EventRecord]] = [
        log.listed(scope, labels, now) if labels else reversed(log.by_scope.get(scope, [])) for scope in scopes
    ]
    merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=lambda r: -r.seq)
    return (r for r in merged if not r.removed and r.ranked_at <= now)


def first_held(vocabularies: list[dict[str, int]]) -> dict[str, int]:
    """The vocabularies of several scopes as one: each word with the first `seq` any of them held it at."""
    if len(vocabularies) == 1:
        return vocabularies[0]
    merged: dict[str, int] = {}
    for vocabulary in vocabularies:
        for word, seq in vocabulary.items():
            merged[word] = min(seq, merged.get(word, seq))
    return merged


def build_pack(log: EventLog, config: DoubleConfig, body: dict[str, Any], stored_scope: str) -> Pack:
    view = body.get("view") or "holistic"
    scopes = _scopes(log, stored_scope, view)
    now = config.clock()
    budgets = body.get("budgets") or {}
    limits = budgets.get("per_layer_limits") or {}
    size = int(limits.get("events", config.default_events_per_pack))
    include = body.get("include") or list(LAYERS)
    candidates = _newest_first(log, scopes, _labels(body), now)
    vocabulary = first_held([log.vocabulary(scope) for scope in scopes])
    events = rank(candidates, body["query"], size, vocabulary) if "events" in include else []
    pack = Pack(f"pack_{log.next_id('pack')}", stored_scope, events, now)
    log.packs[pack.pack_id] = pack
    return pack


def pack_answer(pack: Pack, config: DoubleConfig, body: dict[str, Any], shown: Any, multi: bool) -> dict[str, Any]:
    budgets = body.get("budgets") or {}
    room = int(budgets.get("max_tokens", config.default_max_tokens)) * config.bytes_per_token
    items = [_packed(record, room, config, shown) for record in pack.events]
    warnings = ["parent_pack_unranked_sample"] if multi else []
    return {
        "pack_id": pack.pack_id,
        "layers": {"events": items} | {layer: [] for layer in LAYERS[1:]},
        "context_block": "\n".join(f"[{r.role}] {r.text}" for r in pack.events),
        "warnings": warnings,
    }


def _packed(record: EventRecord, room: int, config: DoubleConfig, shown: Any) -> dict[str, Any]:
    entry = record.entry(shown(record.scope))
    text = record.text
    content = entry["content"]
    data = text.encode()
    if len(data) > room:
        content["text"] = data[:room].decode("utf-8", "ignore")
        content.update({"_partial": True, "_partial_reason": "budget_excerpt", "_original_bytes": len(data)})
    if config.recall_role_prefix:
        content["text"] = f"[{record.role}] {content['text']}"
    return entry


def live_pack(log: EventLog, config: DoubleConfig, pack_id: object, stored_scope: str) -> Pack:
    pack = log.packs.get(pack_id) if isinstance(pack_id, str) else None
    if pack is None or config.clock() - pack.created_at > config.pack_ttl_s:
        raise RefusalError(404, "PACK_NOT_FOUND", f"pack `{pack_id}` is unknown, expired or dropped")
    if pack.scope != stored_scope:
        raise RefusalError(400, "PACK_SCOPE_MISMATCH", "the pack was built for another scope")
    return pack


def answer_of(pack: Pack) -> dict[str, Any]:
    top = pack.events[0].text[:ANSWER_CHARS] if pack.events else None
    return {
        "answer": f"Based on memory: {top}" if top is not None else "I don't know.",
        "citations": [{"id": r.id, "content": r.text} for r in pack.events],
        "diagnostics": {"answer_model": "double-answer-1"},
        "context_block": "\n".join(f"[{r.role}] {r.text}" for r in pack.events),
    }
