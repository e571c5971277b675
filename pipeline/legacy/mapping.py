"""From v1 rows to `StoreItem`s: namespace classes and the five section mappings (docs/spec/legacy-import.md §6, §7).

Pure functions: a row (or a group of rows) in, an item or the reason it maps to nothing out. Every item is
checked here as `store_many` will check it, so a row no engine would accept is skipped rather than failing
the batch it would land in, and the import never stalls on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import lru_cache
from typing import Any, NamedTuple

from engines.contract import (
    Conversation,
    Document,
    Error,
    Learning,
    LearningKind,
    Role,
    SourceKind,
    StoreItem,
)
from pipeline.legacy.values import (
    BLANK_CHARACTERS,
    compact_json,
    confidence_of,
    finite_number,
    instant_from_millis,
    instant_from_seconds,
    is_blank,
    json_object,
    json_tags,
    non_blank,
    parse_json,
    role_of,
    text_of,
    tool_calls_of,
)

TAINT_TAG = "taint:external_sync"
INTERNAL_TAINT = "internal"

_SANITISED_PREFIXES = (
    "conversation_",
    "document_",
    "learning_",
    "entity_",
    "profile_",
    "tool_",
    "source_",
    "custom_",
    "event_",
)
_KIND_OF_CLASS = {
    "style": LearningKind.PREFERENCE,
    "channel": LearningKind.PREFERENCE,
    "identity": LearningKind.FACT,
    "tooling": LearningKind.PROCEDURE,
    "veto": LearningKind.CORRECTION,
}


class Skip(StrEnum):
    """Why a row became no item (the import's summary counts them by reason)."""

    BLANK = "blank content"
    EVENT = "event namespace, not imported"
    DROPPED = "profile facet dropped"
    FORGOTTEN = "profile facet forgotten by the user"
    BLANK_VALUE = "blank profile value"
    UNSTORABLE = "no engine would store it"


class NsClass(StrEnum):
    """What a `memory_docs` row is, by its logical namespace."""

    GLOBAL = "global"
    LEARNING = "learning"
    EVENT = "event"
    DOCUMENT = "document"


class DocRow(NamedTuple):
    """A `memory_docs` row; `logical_namespace` NULL and `taint` `internal` stand in for absent columns."""

    document_id: Any
    namespace: Any
    logical_namespace: Any
    title: Any
    content: Any
    tags_json: Any
    metadata_json: Any
    updated_at: Any
    taint: Any


class ChunkText(NamedTuple):
    """One chunk of a group, its text already read (from its content file or its row)."""

    text: str | None
    timestamp_ms: Any
    tags_json: Any


class TurnRow(NamedTuple):
    """An `episodic_log` row; `tool_calls_json` NULL stands in for the absent column."""

    id: Any
    timestamp: Any
    role: Any
    content: Any
    tool_calls_json: Any


class FacetRow(NamedTuple):
    """A `user_profile` row; NULL stands in for each absent optional column."""

    facet_id: Any
    facet_type: Any
    key: Any
    value: Any
    confidence: Any
    last_seen_at: Any
    state: Any
    user_state: Any
    facet_class: Any
    evidence_refs_json: Any


@dataclass(frozen=True)
class Origin:
    """What every item of one workspace carries: the workspace's canonical path."""

    workspace: str

    def meta(self, legacy_id: str, **fields: Any) -> Fields:
        """An item's `MemoryMeta`, to validate with the item: root namespace, this workspace, source `import`
        with the row's legacy id, then `fields`."""
        return {"workspace": self.workspace, "source": {"kind": SourceKind.IMPORT, "id": legacy_id}, **fields}


Fields = dict[str, Any]
"""A model's fields by name, nested models as their own fields: an item is validated once, as a whole (a
model a part would cost a validation call of its own), with exactly the fields a constructor would get."""


Mapped = StoreItem | Skip | None
"""An item, the reason a row makes none, or None when the row belongs to another section."""


def placement(row: DocRow) -> tuple[str, NsClass]:
    """The row's logical namespace (its own when set, else its namespace with v1's sanitiser undone) and
    the class it puts the row in."""
    namespace, stated = row.namespace, row.logical_namespace
    if type(namespace) is str and (stated is None or type(stated) is str):
        return _placement_of_text(namespace, stated)  # a workspace holds a few namespaces, on many rows
    logical = logical_namespace_of(namespace, stated)
    return logical, namespace_class(logical)


@lru_cache(maxsize=1024)
def _placement_of_text(namespace: str, stated: str | None) -> tuple[str, NsClass]:
    logical = logical_namespace_of(namespace, stated)
    return logical, namespace_class(logical)


def logical_namespace_of(namespace: object, logical: object) -> str:
    """`logical` when it is not blank, else `namespace` with its first `_` after a v1 kind prefix made `:`."""
    stated = text_of(logical)
    if stated is not None and not is_blank(stated):
        return stated
    sanitised = text_of(namespace) or ""
    if sanitised.startswith(_SANITISED_PREFIXES):
        return sanitised.replace("_", ":", 1)
    return sanitised


def learning_rows_sql(namespace: str, logical: str) -> str:
    """An SQL condition true for every `memory_docs` row of the learning or global class, given the two
    columns' expressions; it may also hold for other rows, which the mapping then sets aside.

    Both classes need a logical namespace that starts with `global` or `learning`, whichever of the two
    columns it comes from, so a row with neither column starting so is a document or an event. Cast to
    text, a blob is its bytes (whose decoded text starts with those letters only when the bytes do) and a
    number starts with no letter; `LIKE` ignores ASCII case and reads text up to a NUL, which still shows
    the prefix. So no such row is ever left out.
    """
    tests = (f"CAST({c} AS TEXT) LIKE '{p}%'" for c in (logical, namespace) for p in ("global", "learning"))
    return f"({' OR '.join(tests)})"


def namespace_class(logical: str) -> NsClass:
    if logical == "global":
        return NsClass.GLOBAL
    if logical == "learning" or logical.startswith("learning:"):
        return NsClass.LEARNING
    if logical == "event" or logical.startswith("event:"):
        return NsClass.EVENT
    return NsClass.DOCUMENT


def document_item(row: DocRow, origin: Origin) -> Mapped:
    """A document-class row as a `Document`; the other classes belong to other sections (events to none)."""
    logical, ns_class = placement(row)
    if ns_class is NsClass.EVENT:
        return Skip.EVENT
    if ns_class is not NsClass.DOCUMENT:
        return None
    content = text_of(row.content)
    if content is None or is_blank(content):
        return Skip.BLANK
    metadata = json_object(row.metadata_json)
    tags = [*json_tags(row.tags_json), f"ns:{logical}", *_taint(row)]
    meta = origin.meta(
        f"memory_docs:{text_of(row.document_id)}",
        url=non_blank(metadata.get("url")),
        tags=tags,
        observed_at=instant_from_seconds(row.updated_at),
    )
    title = text_of(row.title)
    fields = {
        "title": None if is_blank(title) else title,
        "body": {"text": content},
        "mime": non_blank(metadata.get("mime")),
        "meta": meta,
    }
    return _checked(Document, fields)


def chunk_group_item(source_kind: str, source_id: str, chunks: Sequence[ChunkText], origin: Origin) -> Mapped:
    """A chunk group, its chunks in `(seq_in_source, id)` order: a `chat` group as a conversation of user
    turns, any other as one document of its texts. Blank chunks are dropped; a group left empty is skipped."""
    kept = [chunk for chunk in chunks if chunk.text is not None and not is_blank(chunk.text)]
    if not kept:
        return Skip.BLANK
    # Each chunk's tags are distinct already; only the group's union needs deduplicating.
    tags = [*dict.fromkeys(tag for chunk in kept for tag in json_tags(chunk.tags_json)), f"source_kind:{source_kind}"]
    instants = [instant_from_millis(chunk.timestamp_ms) for chunk in kept]
    legacy_id = f"mem_tree_chunks:{source_kind}:{source_id}"
    observed = max((at for at in instants if at is not None), default=None)
    if source_kind == "chat":
        turns = [{"role": Role.USER, "text": c.text or "", "at": at} for c, at in zip(kept, instants, strict=True)]
        window = {"first": 0, "last": len(turns) - 1}
        meta = origin.meta(legacy_id, thread_id=source_id, turns=window, tags=tags, observed_at=observed)
        return _checked(Conversation, {"turns": turns, "meta": meta})
    body = "\n\n".join(chunk.text or "" for chunk in kept)
    return _checked(Document, {"body": {"text": body}, "meta": origin.meta(legacy_id, tags=tags, observed_at=observed)})


def conversation_item(session_id: str, rows: Sequence[TurnRow], origin: Origin) -> Mapped:
    """A session's rows, in `(timestamp, id)` order, as a conversation; rows with blank content are dropped
    and a session left empty is skipped."""
    kept = [turn for turn in (_turn(row) for row in rows) if turn is not None]
    if not kept:
        return Skip.BLANK
    meta = origin.meta(
        f"episodic_log:{session_id}",
        thread_id=session_id,
        turns={"first": 0, "last": len(kept) - 1},
        observed_at=kept[-1]["at"],
    )
    return _checked(Conversation, {"turns": kept, "meta": meta})


def learning_item(row: DocRow, origin: Origin) -> Mapped:
    """A learning- or global-class row as a `Learning`; other classes belong to other sections."""
    logical, ns_class = placement(row)
    if ns_class not in (NsClass.LEARNING, NsClass.GLOBAL):
        return None
    content = text_of(row.content)
    if content is None or is_blank(content):
        return Skip.BLANK
    legacy_id = f"memory_docs:{text_of(row.document_id)}"
    updated = instant_from_seconds(row.updated_at)
    taint = _taint(row)
    if ns_class is NsClass.GLOBAL:
        meta = origin.meta(legacy_id, tags=["global", *taint], observed_at=updated)
        return _checked(Learning, {"text": content, "kind": LearningKind.FACT, "confidence": 0.5, "meta": meta})
    ns_class_name = non_blank(logical.partition(":")[2]) if ":" in logical else None
    candidate = parse_json(content)
    if isinstance(candidate, dict) and isinstance(candidate.get("key"), str) and "value" in candidate:
        return _checked(Learning, _candidate_learning(candidate, ns_class_name, updated, taint, origin.meta(legacy_id)))
    tags = [ns_class_name] if ns_class_name is not None else []
    meta = origin.meta(legacy_id, tags=[*tags, *taint], observed_at=updated)
    return _checked(Learning, {"text": content, "kind": LearningKind.OTHER, "confidence": 0.5, "meta": meta})


def facet_gone(state: object, user_state: object) -> Skip | None:
    """Why a facet is no longer live (`state` dropped, `user_state` forgotten), or None when it is."""
    if _lowered(state) == "dropped":
        return Skip.DROPPED
    if _lowered(user_state) == "forgotten":
        return Skip.FORGOTTEN
    return None


def profile_item(row: FacetRow, origin: Origin) -> Mapped:
    """A live profile facet as a preference; a dropped or forgotten facet, or a blank value, makes none."""
    gone = facet_gone(row.state, row.user_state)
    if gone is not None:
        return gone
    value = text_of(row.value)
    if value is None or is_blank(value):
        return Skip.BLANK_VALUE
    facet_type = text_of(row.facet_type)
    facet_class = text_of(row.facet_class)
    tags = [facet_type] if not is_blank(facet_type) else []
    if facet_class is not None and not is_blank(facet_class) and facet_class != facet_type:
        tags.append(facet_class)
    evidence = text_of(row.evidence_refs_json)
    meta = origin.meta(
        f"user_profile:{text_of(row.facet_id)}", tags=tags, observed_at=instant_from_seconds(row.last_seen_at)
    )
    learning = {
        "text": f"{text_of(row.key) or ''}: {value}",
        "kind": LearningKind.PREFERENCE,
        "confidence": confidence_of(row.confidence),
        "evidence": None if is_blank(evidence) else evidence,
        "meta": meta,
    }
    return _checked(Learning, learning)


def _candidate_learning(
    candidate: dict[str, Any], ns_class: str | None, updated: datetime | None, taint: list[str], base: Fields
) -> Fields:
    value = candidate["value"]
    text = f"{candidate['key']}: {value if isinstance(value, str) else compact_json(value)}"
    learning_class = non_blank(candidate.get("class")) or ns_class
    evidence = candidate.get("evidence")
    observed = candidate.get("observed_at")
    observed_at = instant_from_seconds(observed) if finite_number(observed) is not None else None
    tags = [learning_class] if learning_class is not None else []
    return {
        "text": text,
        "kind": _KIND_OF_CLASS.get(learning_class or "", LearningKind.OTHER),
        "confidence": confidence_of(candidate.get("initial_confidence")),
        "evidence": None if evidence is None else evidence if non_blank(evidence) else compact_json(evidence),
        "meta": {**base, "tags": [*tags, *taint], "observed_at": observed_at or updated},
    }


def _turn(row: TurnRow) -> Fields | None:
    content = text_of(row.content)
    if content is None or is_blank(content):
        return None
    return {
        "role": role_of(row.role),
        "text": content,
        "at": instant_from_seconds(row.timestamp),
        "tool_calls": tool_calls_of(row.tool_calls_json),
    }


def _taint(row: DocRow) -> list[str]:
    return [] if row.taint == INTERNAL_TAINT else [TAINT_TAG]


def _lowered(value: object) -> str | None:
    text = text_of(value)
    return None if text is None else text.strip(BLANK_CHARACTERS).lower()


def _checked(model: type[Document | Conversation | Learning], fields: Fields) -> StoreItem | Skip:
    """The item, validated (a `ValueError` when no model accepts it), or why it is skipped."""
    item = model.model_validate(fields)
    # What store_many would refuse (text only whitespace Python strips but v1 did not, such as a no-break
    # space) is skipped here: sent, it would fail its batch again on every resume.
    try:
        item.check()
    except Error:
        return Skip.UNSTORABLE
    return item
