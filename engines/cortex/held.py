"""Reading events back: which filter admits an envelope, and how items are rebuilt from their events
(docs/spec/cortexdb.md §7.6, §7.10).

A filter is matched against the decoded metadata, except that `file_path`, `folder` and an absolute `workspace`
are matched against the digests the envelope carries, since the paths themselves never left the machine.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError

from engines.contract import (
    Conversation,
    Document,
    DocumentBody,
    Hit,
    Item,
    ItemKind,
    Learning,
    LearningKind,
    MetaFilter,
    Role,
    ToolCallRef,
    Turn,
    hit_of,
)
from engines.cortex.envelope import Envelope, decode
from engines.cortex.labels import path_digest
from engines.cortex.wire import RawEvent

_LEARNING_KINDS = {kind.value: kind for kind in LearningKind}
_ROLES = {role.value: role for role in Role}


@dataclass(frozen=True)
class Held:
    """A decoded event of this engine: the server's event id and the envelope."""

    event_id: str
    envelope: Envelope

    @property
    def item_id(self) -> str:
        return self.envelope.id


def decoded(raw: RawEvent) -> Held | None:
    """The event as this engine wrote it, or None (another writer's event, or an excerpt that no longer decodes)."""
    if raw.partial:
        return None
    envelope = decode(raw.text, raw.labels)
    return None if envelope is None else Held(raw.id, envelope)


def _digest_matches(wanted: str, digests: list[str]) -> bool:
    return path_digest(wanted) in digests or path_digest(wanted.rstrip("/")) in digests


def admits(filter: MetaFilter, envelope: Envelope) -> bool:
    """Whether `filter` selects the item the envelope belongs to (paths matched by digest where withheld)."""
    update: dict[str, object] = {}
    checks: list[bool] = []
    file_paths, folders, workspace = envelope.digests("fp"), envelope.digests("fd"), envelope.fields.get("ws")
    if filter.file_path is not None and file_paths is not None:
        update["file_path"] = None
        checks.append(_digest_matches(filter.file_path, file_paths))
    if filter.folder is not None and folders is not None:
        update["folder"] = None
        checks.append(_digest_matches(filter.folder, folders))
    if filter.workspace is not None and isinstance(workspace, str):
        update["workspace"] = None
        checks.append(path_digest(filter.workspace) == workspace)
    if not all(checks):
        return False
    relaxed = filter.model_copy(update=update) if update else filter
    return relaxed.matches(envelope.kind, envelope.meta)


def by_part(envelopes: Iterable[Envelope]) -> dict[int, Envelope]:
    """Events of one item by turn or piece index, the first one found for each index."""
    parts: dict[int, Envelope] = {}
    for envelope in envelopes:
        part = envelope.part
        if part is not None and part not in parts:
            parts[part] = envelope
    return parts


def is_split(envelope: Envelope) -> bool:
    return envelope.kind is ItemKind.DOCUMENT and envelope.chunk is not None


def rebuild(envelopes: list[Envelope]) -> Item | None:
    """The item from its events; a split document missing a piece, or a malformed envelope, gives None."""
    first = envelopes[0]
    try:
        if first.kind is ItemKind.LEARNING:
            return _learning(first)
        if first.kind is ItemKind.CONVERSATION:
            return _conversation(envelopes)
        return _document(envelopes)
    except (ValidationError, ValueError, TypeError):
        return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _learning(envelope: Envelope) -> Learning:
    fields = envelope.fields
    confidence = fields.get("confidence")
    if not isinstance(confidence, int | float) or isinstance(confidence, bool):
        raise ValueError("a learning's envelope has no confidence")
    return Learning(
        text=envelope.text,
        kind=_LEARNING_KINDS.get(str(fields.get("learning_kind")), LearningKind.OTHER),
        confidence=float(confidence),
        evidence=_text(fields.get("evidence")),
        meta=envelope.meta,
    )


def _document(envelopes: list[Envelope]) -> Document | None:
    first = envelopes[0]
    if is_split(first):
        parts = by_part(e for e in envelopes if is_split(e))
        if sorted(parts) != list(range(first.count)):
            return None
        body = "".join(parts[n].text for n in range(first.count))
    else:
        body = first.text
    fields = first.fields
    return Document(
        title=_text(fields.get("title")),
        body=DocumentBody.of_text(body),
        mime=_text(fields.get("mime")),
        meta=first.meta,
    )


def _conversation(envelopes: list[Envelope]) -> Conversation | None:
    parts = by_part(envelopes)
    turns = [_turn(parts[n]) for n in sorted(parts)]
    present = [turn for turn in turns if turn is not None]
    return Conversation(turns=present, meta=envelopes[0].meta) if present else None


def _turn(envelope: Envelope) -> Turn | None:
    info = envelope.turn or {}
    role = _ROLES.get(str(info.get("role")))
    if role is None:
        return None
    at = info.get("at")
    calls = info.get("tool_calls") or []
    return Turn(
        role=role,
        text=envelope.text,
        at=datetime.fromisoformat(at) if isinstance(at, str) else None,
        tool_calls=[ToolCallRef.model_validate(call) for call in calls] if isinstance(calls, list) else [],
    )


def piece_hit(envelope: Envelope, score: float) -> Hit:
    """A ranked hit on one piece of a split document: rendered as the document, tagged with its pages and section."""
    title = _text(envelope.fields.get("title"))
    text = f"# {title}\n\n{envelope.text}" if title is not None and title.strip() else envelope.text
    chunk = envelope.chunk or {}
    tags = list(envelope.meta.tags)
    pages = chunk.get("pages")
    if isinstance(pages, list) and len(pages) == 2 and all(isinstance(p, int) for p in pages):
        tags.append(f"page:{pages[0]}" if pages[0] == pages[1] else f"page:{pages[0]}-{pages[1]}")
    section = chunk.get("section")
    if isinstance(section, str):
        tags.append(f"section:{section}")
    meta = envelope.meta.model_copy(update={"tags": tags})
    return Hit(id=envelope.id, kind=ItemKind.DOCUMENT, text=text, meta=meta, score=score)


def item_hit(item_id: str, item: Item, score: float = 0.0) -> Hit:
    return hit_of(item_id, item, score)
