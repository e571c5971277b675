"""`list`, `export` and `get` over the event listing (docs/spec/cortexdb.md §11.1, §11.2, §11.5).

A listing walks each scope the filter reads, newest first, skipping the copy the server emits of every event. An
item held in several events (a conversation, a split document) is kept at its event 0, and completed from the
events the walk already saw or, failing that, one label lookup. The list cursor names its scope by path, so a
scope created between two pages cannot shift the walk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from engines.contract import (
    Exported,
    ExportPage,
    GetRequest,
    Hit,
    InvalidRequestError,
    Item,
    ListPage,
    ListRequest,
    MetaFilter,
    in_request_order,
)
from engines.cortex.envelope import Envelope
from engines.cortex.held import admits, decoded, item_hit, rebuild
from engines.cortex.labels import narrowing_labels
from engines.cortex.layout import KindScope, Layout
from engines.cortex.lookup import lookup
from engines.cortex.scopes import Selector
from engines.cortex.wire import RawEvent, Wire

LIST_TAG = "l"


@dataclass(frozen=True)
class ListCursor:
    """Where a listing resumes: the scope, the server cursor of the page, raw entries consumed, last id seen."""

    scope: str
    page: str | None
    skip: int
    last: str | None

    def encode(self) -> str:
        data = {"scope": self.scope, "page": self.page, "skip": self.skip, "last": self.last}
        return LIST_TAG + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8").hex()

    @classmethod
    def decode(cls, cursor: str) -> ListCursor:
        try:
            if not cursor.startswith(LIST_TAG):
                raise ValueError("tag")
            data = json.loads(bytes.fromhex(cursor[len(LIST_TAG) :]).decode("utf-8"))
            scope, page, skip, last = data["scope"], data["page"], data["skip"], data["last"]
            if not isinstance(scope, str) or not isinstance(skip, int) or isinstance(skip, bool) or skip < 0:
                raise ValueError("members")
            if not (page is None or isinstance(page, str)) or not (last is None or isinstance(last, str)):
                raise ValueError("members")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError):
            raise InvalidRequestError(f"unknown cursor `{cursor[:80]}`") from None
        return cls(scope, page, skip, last)


@dataclass(frozen=True)
class _Kept:
    scope: KindScope
    envelope: Envelope


@dataclass
class _Walk:
    """One call's walk: the items kept, and every event of a multi-event item seen on the way."""

    kept: list[_Kept] = field(default_factory=list)
    seen: dict[str, list[Envelope]] = field(default_factory=dict)
    cursor: str | None = None

    def keeps(self, filter: MetaFilter, scope: KindScope, raw: RawEvent) -> Envelope | None:
        held = decoded(raw)
        if held is None:
            return None
        envelope = held.envelope
        if envelope.kind is not scope.kind or not admits(filter, envelope):
            return None
        if envelope.count > 1:
            self.seen.setdefault(envelope.id, []).append(envelope)
            # A conversation or a split document is emitted once, at its event 0.
            return envelope if envelope.part == 0 else None
        return envelope


# Aliases for annotations inside Reader, where the method `list` shadows the builtin.
_Scopes = list[KindScope]
_Hits = list[Hit]


class Reader:
    """The listing reads of one engine."""

    def __init__(self, wire: Wire, layout: Layout, selector: Selector) -> None:
        self.wire = wire
        self.layout = layout
        self.selector = selector

    async def list(self, req: ListRequest) -> ListPage:
        walk = await self._walk(req, strict=False)
        items = await self._complete(walk)
        hits = [item_hit(k.envelope.id, item) for k in walk.kept if (item := items.get(k.envelope.id)) is not None]
        return ListPage(items=hits, next_cursor=walk.cursor)

    async def export(self, req: ListRequest) -> ExportPage:
        walk = await self._walk(req, strict=True)
        items = await self._complete(walk)
        kept = walk.kept
        exported = [Exported(id=k.envelope.id, item=items[k.envelope.id]) for k in kept if k.envelope.id in items]
        incomplete = [k.envelope.id for k in kept if k.envelope.id not in items]
        return ExportPage(items=exported, incomplete=incomplete, next_cursor=walk.cursor)

    async def get(self, req: GetRequest) -> _Hits:
        filter = MetaFilter(reach=req.reach)
        wanted = list(dict.fromkeys(req.ids))
        found: dict[str, Hit] = {}
        for scope in await self.selector.read(filter):
            missing = [item_id for item_id in wanted if item_id not in found]
            if not missing:
                break
            held = await lookup(self.wire, scope, missing)
            for item_id, events in held.items():
                envelopes = [h.envelope for h in events]
                if not admits(filter, envelopes[0]):
                    continue
                item = rebuild(_ordered(envelopes))
                if item is not None:
                    found[item_id] = item_hit(item_id, item)
        return in_request_order(req.ids, found)

    # -- the walk -------------------------------------------------------------------------------------

    async def _walk(self, req: ListRequest, *, strict: bool) -> _Walk:
        filter = req.filter
        resume = ListCursor.decode(req.cursor) if req.cursor is not None else None
        scopes = await self.selector.read(filter, strict=strict)
        start = self._start(scopes, resume)
        walk = _Walk()
        labels = narrowing_labels(filter)
        for position in range(start, len(scopes)):
            scope = scopes[position]
            here = resume if resume is not None and resume.scope == scope.path else None
            skip, last = (here.skip, here.last) if here else (0, None)
            async for sent, page in self.wire.pages(scope.path, labels, here.page if here else None):
                for index in range(skip, len(page.events)):
                    raw = page.events[index]
                    if raw is None or raw.id == last:
                        continue
                    last = raw.id
                    envelope = walk.keeps(filter, scope, raw)
                    if envelope is None:
                        continue
                    walk.kept.append(_Kept(scope, envelope))
                    if len(walk.kept) == req.limit:
                        size = len(page.events)
                        walk.cursor = self._after(scopes, position, sent, page.next_cursor, index, size, last)
                        return walk
                skip = 0
        return walk

    @staticmethod
    def _after(
        scopes: _Scopes,
        position: int,
        sent: str | None,
        following: str | None,
        index: int,
        size: int,
        last: str,
    ) -> str | None:
        scope = scopes[position].path
        if index + 1 < size:
            return ListCursor(scope, sent, index + 1, last).encode()
        if following is not None:
            return ListCursor(scope, following, 0, last).encode()
        if position + 1 < len(scopes):
            return ListCursor(scopes[position + 1].path, None, 0, None).encode()
        return None

    def _start(self, scopes: _Scopes, resume: ListCursor | None) -> int:
        if resume is None:
            return 0
        for position, scope in enumerate(scopes):
            if scope.path == resume.scope:
                return position
        # The cursor's scope is gone: resume at the first scope that sorts after it.
        named = self.layout.parse(resume.scope)
        if named is None:
            raise InvalidRequestError(f"unknown cursor: scope `{resume.scope}` is not one this engine writes")
        key = named.order()
        return next((p for p, scope in enumerate(scopes) if scope.order() > key), len(scopes))

    async def _complete(self, walk: _Walk) -> dict[str, Item]:
        """Items by id; a split document missing a piece is left out (export names it as incomplete)."""
        items: dict[str, Item] = {}
        lacking: dict[str, list[str]] = {}
        kept = walk.kept
        for k in kept:
            envelope = k.envelope
            events = walk.seen.get(envelope.id, [envelope]) if envelope.count > 1 else [envelope]
            if envelope.count > 1 and len({e.part for e in events}) < envelope.count:
                lacking.setdefault(k.scope.path, []).append(envelope.id)
                continue
            item = rebuild(_ordered(events))
            if item is not None:
                items[envelope.id] = item
        for path in lacking:
            scope = next(k.scope for k in kept if k.scope.path == path)
            found = await lookup(self.wire, scope, lacking[path])
            for item_id, held in found.items():
                item = rebuild(_ordered([h.envelope for h in held]))
                if item is not None:
                    items[item_id] = item
        return items


def _ordered(envelopes: list[Envelope]) -> list[Envelope]:
    """Events in part order (a listing is newest first), so the first is event 0."""
    return sorted(envelopes, key=lambda e: -1 if e.part is None else e.part)
