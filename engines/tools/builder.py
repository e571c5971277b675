"""`RequestBuilder`: checked tool arguments made into the engine's requests and items
(docs/spec/tools-and-context.md §6).

The scope decides what the model cannot: every filter's `reach` is the scope's whatever was asked,
and a stored item's metadata is built here (place, agent source, the model's tags, the clock's time)
and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from engines.contract import (
    DEFAULT_SCAN_LIMIT,
    Conversation,
    Document,
    DocumentBody,
    ExploreRequest,
    Facet,
    FetchMode,
    FetchRequest,
    GetRequest,
    Item,
    ItemId,
    Learning,
    LearningKind,
    ListRequest,
    MemoryMeta,
    MetaFilter,
    RecallRequest,
    Role,
    SourceKind,
    SourceRef,
    TimeHint,
    Turn,
)
from engines.tools.schemas import CONFIDENCE_DEFAULT, LIMIT_DEFAULT, JsonObject, default_mode
from engines.tools.scope import ToolScope

# Inside `RequestBuilder` the method `list` shadows the builtin in annotations.
_Ids = list[ItemId]


@dataclass(frozen=True)
class RequestBuilder:
    """Builds from arguments that `arguments.check` has passed, so nothing here fails on their shape.

    `zone` is the IANA zone every `refers_to` is read in (None: UTC).
    """

    scope: ToolScope
    zone: str | None = None

    def filter(self, args: JsonObject) -> MetaFilter:
        """The model's filter fields, with `reach` the scope's."""
        return MetaFilter.model_validate({**args.get("filter", {}), "reach": self.scope.reach})

    def _hint(self, args: JsonObject) -> TimeHint | None:
        days = args.get("refers_to")
        if days is None:
            return None
        return TimeHint.model_validate({"from": days["from"], "to": days["to"], "zone": self.zone})

    def recall(self, args: JsonObject) -> RecallRequest:
        return RecallRequest(
            question=args["question"],
            filter=self.filter(args),
            limit=args.get("limit", LIMIT_DEFAULT),
            instructions=args.get("instructions"),
            refers_to=self._hint(args),
        )

    def fetch(self, args: JsonObject, modes: Sequence[FetchMode]) -> FetchRequest:
        """`modes` are the engine's; without a mode the fetch uses hybrid when served, else the first."""
        mode = FetchMode(args["mode"]) if "mode" in args else default_mode(modes)
        return FetchRequest(
            query=args["query"],
            mode=mode,
            filter=self.filter(args),
            limit=args.get("limit", LIMIT_DEFAULT),
            cursor=args.get("cursor"),
            refers_to=self._hint(args),
        )

    def list(self, args: JsonObject) -> ListRequest:
        return ListRequest(filter=self.filter(args), limit=args.get("limit", LIMIT_DEFAULT), cursor=args.get("cursor"))

    def get(self, ids: _Ids) -> GetRequest:
        """A read by id under the scope's reach: ids beyond it come back as if unknown."""
        return GetRequest(ids=ids, reach=self.scope.reach)

    def explore(self, args: JsonObject) -> ExploreRequest:
        return ExploreRequest(
            facet=Facet(args["facet"]),
            filter=self.filter(args),
            limit=args.get("limit", LIMIT_DEFAULT),
            scan_limit=DEFAULT_SCAN_LIMIT,
        )

    def item(self, args: JsonObject, now: datetime) -> Item:
        """The one learning, document or conversation of a `memory_store` call, placed at the scope's place."""
        meta = MemoryMeta(
            namespace=self.scope.place,
            source=SourceRef(kind=SourceKind.AGENT),
            tags=args.get("tags", []),
            observed_at=now,
        )
        if "learning" in args:
            return _learning(args["learning"], meta)
        if "document" in args:
            return _document(args["document"], meta)
        return _conversation(args["conversation"], meta)


def _learning(fields: JsonObject, meta: MemoryMeta) -> Learning:
    return Learning(
        text=fields["text"],
        kind=LearningKind(fields.get("learning_kind", LearningKind.FACT)),
        confidence=fields.get("confidence", CONFIDENCE_DEFAULT),
        evidence=fields.get("evidence"),
        meta=meta,
    )


def _document(fields: JsonObject, meta: MemoryMeta) -> Document:
    title = fields.get("title")
    body = DocumentBody.of_text(fields["text"])
    return Document(title=title if title is not None and title.strip() else None, body=body, mime=None, meta=meta)


def _conversation(fields: JsonObject, meta: MemoryMeta) -> Conversation:
    # Turns carry no times and no tool calls: the model reports what was said, not when or by which call.
    turns = [Turn(role=Role(turn["role"]), text=turn["text"]) for turn in fields["turns"]]
    return Conversation(turns=turns, meta=meta)
