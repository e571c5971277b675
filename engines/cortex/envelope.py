"""Events from items and back: the envelope, v3 in labels or v2 in the text, and the append body
(docs/spec/cortexdb.md §7).

An event's envelope names the item it belongs to and carries the item's non-text fields. v3 keeps the event's own
text as its content and cuts the envelope into `tm:e:` labels; an event whose text is empty or whose labels would
pass 64 carries the whole envelope as its text instead (v2). Readers decide by the labels and read both.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from json.encoder import encode_basestring
from typing import Any

from pydantic import ValidationError

from engines.contract import (
    Conversation,
    Document,
    InvalidRequestError,
    Item,
    ItemKind,
    Learning,
    MemoryMeta,
    Role,
    format_f32,
    format_instant,
)
from engines.cortex.chunks import (
    DOCUMENT_CHUNK_TARGET_BYTES,
    MAX_EVENT_TEXT_BYTES,
    PAGE_BREAK,
    SECTION_RESERVE,
    Piece,
    split,
)
from engines.cortex.labels import is_absolute, lookup_labels, path_digest, path_digests, readable_labels, wire_dict

MAX_LABELS = 64
PART_BYTES = 240
PROBE_INDEX = 4_294_967_295
MODALITY = {ItemKind.DOCUMENT: "document", ItemKind.CONVERSATION: "conversation", ItemKind.LEARNING: "observation"}
_KINDS = {kind.value: kind for kind in ItemKind}


class _Raw(str):
    """A JSON fragment written as it is (a confidence in its float32 form)."""


# Built once: `json.dumps` with options builds an encoder on every call, a third of an event's encoding time.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _json(value: object) -> str:
    if isinstance(value, _Raw):
        return value
    if type(value) is str:
        return encode_basestring(value)
    return _COMPACT.encode(value)


def _object(fields: list[tuple[str, object]]) -> str:
    """Compact JSON of an object whose keys keep their order."""
    return "{" + ",".join(f"{_json(key)}:{_json(value)}" for key, value in fields) + "}"


def canonical(body: dict[str, Any]) -> bytes:
    """The request body's canonical bytes: keys sorted at every depth, compact, raw UTF-8."""
    return _CANONICAL.encode(body).encode("utf-8")


def body_key(body: dict[str, Any]) -> str:
    return "tm3:" + hashlib.sha256(canonical(body)).hexdigest()[:56]


def wire_instant(moment: Any) -> str:
    return format_instant(moment)[:-1] + "+00:00"


@dataclass(frozen=True)
class Event:
    """One event to append: its part number (turn or piece index; None for a whole item), body and text.

    `data` is the body as sent: its canonical form (7.3: keys sorted, compact, raw UTF-8) with the key in place,
    serialised once here, so neither the key nor a request encodes the body again."""

    item_id: str
    part: int | None
    body: dict[str, Any]
    data: bytes

    @property
    def text(self) -> str:
        text: str = self.body["content"]["text"]
        return text


@dataclass
class _Shared:
    """What every event of one item has in common (`scope_json`: the tail of its canonical body)."""

    item_id: str
    kind: ItemKind
    meta: MemoryMeta
    wire: dict[str, Any]
    meta_json: str
    digests_json: str
    lookup: list[str]
    scope: str
    scope_json: str


def encode_item(item: Item, item_id: str, scope: str) -> list[Event]:
    """Every event of `item` in order; an event whose envelope would pass 768 KiB is `InvalidRequestError`."""
    wire = wire_dict(item.meta)
    kind = item.item_kind
    shared = _Shared(
        item_id=item_id,
        kind=kind,
        meta=item.meta,
        wire=wire,
        meta_json=_json(wire),
        digests_json=_fields(_digests(item.meta)),
        lookup=lookup_labels(item_id, item.meta),
        scope=scope,
        # Sorted keys put `modality` and `scope` last: the canonical body ends with them.
        scope_json=f'"modality":"{MODALITY[kind]}","scope":{encode_basestring(scope)}}}',
    )
    if isinstance(item, Learning):
        return [_learning(item, shared)]
    if isinstance(item, Conversation):
        return _turns(item, shared)
    return _document(item, shared)


def _digests(meta: MemoryMeta) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    if meta.workspace is not None and is_absolute(meta.workspace):
        out.append(("ws", path_digest(meta.workspace)))
    if meta.file_path is not None:
        out.append(("fp", path_digests(meta.file_path)))
    if meta.folder is not None:
        out.append(("fd", path_digests(meta.folder)))
    return out


def _learning(item: Learning, shared: _Shared) -> Event:
    extra: list[tuple[str, object]] = [
        ("learning_kind", item.kind.value),
        ("confidence", _Raw(format_f32(item.confidence))),
    ]
    if item.evidence is not None:
        extra.append(("evidence", item.evidence))
    draft = _Draft.of(shared, item.text, _fields(extra))
    return _event(shared, None, draft, Role.USER, item.meta.observed_at, None, None)


def _turns(item: Conversation, shared: _Shared) -> list[Event]:
    count = len(item.turns)
    events = []
    for index, turn in enumerate(item.turns):
        info: dict[str, object] = {"index": index, "count": count, "role": turn.role.value}
        if turn.at is not None:
            info["at"] = format_instant(turn.at)
        if turn.tool_calls:
            info["tool_calls"] = [call.wire_dict() for call in turn.tool_calls]
        observed = turn.at if turn.at is not None else item.meta.observed_at
        draft = _Draft.of(shared, turn.text, _fields([("turn", info)]))
        events.append(_event(shared, index, draft, turn.role, observed, None, None))
    return events


def _document(item: Document, shared: _Shared) -> list[Event]:
    if item.body.is_uri:
        raise InvalidRequestError("document body is an unresolved uri; resolve it through a source first")
    body = item.body.value
    head: list[tuple[str, object]] = []
    if item.title is not None:
        head.append(("title", item.title))
    if item.mime is not None:
        head.append(("mime", item.mime))
    paged = PAGE_BREAK in body
    observed = item.meta.observed_at
    whole = _Draft.of(shared, body, _fields(head))
    # The whole body's v2 envelope is the probe's length less the chunk, plus the body: when even that with the
    # widest chunk and a section fits the target, `split` would keep one piece, so it is not asked.
    if whole.v2_size + _chunk_width(paged) + SECTION_RESERVE <= DOCUMENT_CHUNK_TARGET_BYTES:
        return [_event(shared, None, whole, Role.USER, observed, None, None)]
    overhead = piece_overhead(shared, head, paged)
    if MAX_EVENT_TEXT_BYTES - overhead < 1:
        pieces = [Piece(body, None, None)]
    else:
        pieces = split(body, overhead, DOCUMENT_CHUNK_TARGET_BYTES, MAX_EVENT_TEXT_BYTES)
    if len(pieces) == 1:
        return [_event(shared, None, whole, Role.USER, observed, None, None)]
    count = len(pieces)
    events = []
    for index, piece in enumerate(pieces):
        chunk: dict[str, object] = {"index": index, "count": count}
        if piece.pages is not None:
            chunk["pages"] = list(piece.pages)
        if piece.section is not None:
            chunk["section"] = piece.section
        draft = _Draft.of(shared, piece.text, _fields([*head, ("chunk", chunk)]))
        events.append(_event(shared, index, draft, Role.USER, observed, piece.pages, piece.section))
    return events


def _probe_chunk(paged: bool) -> dict[str, object]:
    chunk: dict[str, object] = {"index": PROBE_INDEX, "count": PROBE_INDEX}
    if paged:
        chunk["pages"] = [PROBE_INDEX, PROBE_INDEX]
    return chunk


@lru_cache(maxsize=2)
def _chunk_width(paged: bool) -> int:
    """Bytes the widest `chunk` field adds to an envelope."""
    return len(_fields([("chunk", _probe_chunk(paged))]))


def piece_overhead(shared: _Shared, head: list[tuple[str, object]], paged: bool) -> int:
    """Bytes of a piece's v2 envelope with no text and the widest chunk numbers, plus room for a section."""
    probe = _envelope_json(shared, 2, '""', _fields([*head, ("chunk", _probe_chunk(paged))]))
    return len(probe.encode("utf-8")) + SECTION_RESERVE


def _envelope_json(shared: _Shared, version: int, text_json: str, rest: str) -> str:
    """The envelope's compact JSON in its field order: `v`, `id`, `kind`, `text` (`text_json`, already a JSON
    string), `meta`, digests, then `rest` (the remaining fields, serialised by `_fields`)."""
    head = f'{{"v":{version},"id":{_json(shared.item_id)},"kind":"{shared.kind.value}","text":{text_json}'
    return f'{head},"meta":{shared.meta_json}{shared.digests_json}{rest}}}'


def _fields(fields: list[tuple[str, object]]) -> str:
    """`,"key":value…` for the fields in order; one serialisation unless a raw fragment is among them."""
    if not fields:
        return ""
    if any(isinstance(value, _Raw) for _, value in fields):
        return "," + _object(fields)[1:-1]
    return "," + _COMPACT.encode(dict(fields))[1:-1]


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


@dataclass(frozen=True)
class _Draft:
    """An event's text, JSON-escaped once, and its v3 envelope (no text), from which its v2 size follows."""

    text: str
    escaped: str
    rest: str
    v3: str

    @classmethod
    def of(cls, shared: _Shared, text: str, rest: str) -> _Draft:
        return cls(text, encode_basestring(text), rest, _envelope_json(shared, 3, '""', rest))

    @property
    def v2_size(self) -> int:
        """Bytes of the v2 envelope: the v3 one with the text in place of `""` (the same length of `v`)."""
        return _utf8_len(self.v3) + _utf8_len(self.escaped) - 2

    def v2(self, shared: _Shared) -> str:
        return _envelope_json(shared, 2, self.escaped, self.rest)


def _parts(envelope: str) -> list[str]:
    """The v3 envelope cut into `tm:e:NN:` labels of at most 240 UTF-8 bytes each, never inside a character."""
    if envelope.isascii():
        slices = [envelope[at : at + PART_BYTES] for at in range(0, len(envelope), PART_BYTES)]
    else:
        data, slices, at = envelope.encode("utf-8"), [], 0
        while at < len(data):
            end = min(at + PART_BYTES, len(data))
            # Back off a continuation byte (0b10xxxxxx): a slice ends on a character boundary.
            while end < len(data) and data[end] & 0xC0 == 0x80:
                end -= 1
            slices.append(data[at:end].decode("utf-8"))
            at = end
    return [f"tm:e:{n:02d}:{piece}" for n, piece in enumerate(slices)]


def _event(
    shared: _Shared,
    part: int | None,
    draft: _Draft,
    role: Role,
    observed: Any,
    pages: tuple[int, int] | None,
    section: str | None,
) -> Event:
    size = draft.v2_size
    if size > MAX_EVENT_TEXT_BYTES:
        raise InvalidRequestError(
            f"a {shared.kind.value} event would be {size} bytes; CortexDB refuses an event over 1 MiB, "
            f"so at most {MAX_EVENT_TEXT_BYTES} are sent"
        )
    text = draft.text
    readable = readable_labels(shared.kind, shared.wire, pages, section)
    parts = _parts(draft.v3)
    if not text or len(shared.lookup) + len(readable) + len(parts) > MAX_LABELS:
        content_text = draft.v2(shared)
        content_json, labels = encode_basestring(content_text), list(shared.lookup)
    else:
        content_text, content_json, labels = text, draft.escaped, [*shared.lookup, *readable, *parts]
    context: dict[str, Any] = {"labels": labels}
    # The canonical body (7.3) written field by field, keys in sorted order at every depth; each value is
    # JSON-escaped exactly as `json.dumps(..., ensure_ascii=False)` would (a test holds the two equal).
    head = (
        f'{{"content":{{"kind":"message","role":"{role.value}","text":{content_json}}},'
        f'"context":{{"labels":{_COMPACT.encode(labels)}'
    )
    if observed is not None:
        context["observed_at"] = instant = wire_instant(observed)
        head += f',"observed_at":"{instant}"'
    head += "}"
    body: dict[str, Any] = {
        "scope": shared.scope,
        "modality": MODALITY[shared.kind],
        "content": {"kind": "message", "role": role.value, "text": content_text},
        "context": context,
    }
    if shared.meta.derive is False or role is Role.TOOL:
        body["directives"] = {"extract": []}
        head += ',"directives":{"extract":[]}'
    key = "tm3:" + hashlib.sha256(f"{head},{shared.scope_json}".encode()).hexdigest()[:56]
    body["idempotency_key"] = key
    data = f'{head},"idempotency_key":"{key}",{shared.scope_json}'.encode()
    return Event(shared.item_id, part, body, data)


# -- decoding -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Envelope:
    """A decoded envelope: the item it belongs to, the event's text and the fields the envelope carried."""

    version: int
    id: str
    kind: ItemKind
    text: str
    meta: MemoryMeta
    fields: dict[str, Any]

    @property
    def turn(self) -> dict[str, Any] | None:
        value = self.fields.get("turn")
        return value if isinstance(value, dict) else None

    @property
    def chunk(self) -> dict[str, Any] | None:
        value = self.fields.get("chunk")
        return value if isinstance(value, dict) else None

    @property
    def part(self) -> int | None:
        """The turn or piece index, or None for an item held in one event."""
        info = (
            self.turn if self.kind is ItemKind.CONVERSATION else self.chunk if self.kind is ItemKind.DOCUMENT else None
        )
        index = info.get("index") if info else None
        return index if isinstance(index, int) and not isinstance(index, bool) and index >= 0 else None

    @property
    def count(self) -> int:
        """How many events the item has (1 for an item held in one event)."""
        info = (
            self.turn if self.kind is ItemKind.CONVERSATION else self.chunk if self.kind is ItemKind.DOCUMENT else None
        )
        count = info.get("count") if info else None
        return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1

    def digests(self, name: str) -> list[str] | None:
        value = self.fields.get(name)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        return None


def decode(text: str, labels: list[str]) -> Envelope | None:
    """The envelope of an event, v3 from its labels or v2 from its text; None for another writer's event."""
    v3 = _from_parts(labels)
    found = _envelope(v3, 3, text) if v3 is not None else None
    if found is not None:
        return found
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = _rendered(text)
    return _envelope(parsed, 2, None) if isinstance(parsed, dict) else None


def _from_parts(labels: list[str]) -> dict[str, Any] | None:
    found: dict[int, str] = {}
    for label in labels:
        if not label.startswith("tm:e:"):
            continue
        number, colon, piece = label[5:].partition(":")
        if not colon or not number.isdigit() or not number.isascii() or int(number) in found:
            return None
        found[int(number)] = piece
    if not found or sorted(found) != list(range(len(found))):
        return None
    try:
        parsed = json.loads("".join(found[n] for n in range(len(found))))
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _rendered(text: str) -> object:
    # An older recall rendered events as `[role] {…}`.
    if not text.startswith("["):
        return None
    _, found, rest = text.partition("] ")
    try:
        return json.loads(rest) if found else None
    except ValueError:
        return None


def _envelope(parsed: dict[str, Any], version: int, text: str | None) -> Envelope | None:
    if parsed.get("v") != version or not isinstance(parsed.get("id"), str):
        return None
    kind = _KINDS.get(str(parsed.get("kind")))
    meta = parsed.get("meta")
    body = text if text is not None else parsed.get("text")
    if kind is None or not isinstance(meta, dict) or not isinstance(body, str):
        return None
    try:
        decoded = MemoryMeta.model_validate(meta)
    except ValidationError:
        return None
    return Envelope(version, parsed["id"], kind, body, decoded, parsed)
