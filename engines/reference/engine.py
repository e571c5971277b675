"""`ReferenceEngine`: the in-memory engine that defines the contract's behaviour (docs/spec/contract.md §17)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from engines.contract import (
    EngineDescriptor,
    EngineHealth,
    EraseReport,
    EraseRequest,
    Exported,
    ExportPage,
    FetchMode,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    Hit,
    Item,
    ItemId,
    ListPage,
    ListRequest,
    MemoryEngine,
    MetaFilter,
    RecallAnswer,
    RecallRequest,
    StoreReceipt,
    TimeHint,
    hit_of,
)
from engines.reference.answer import compose
from engines.reference.paging import cursor_offset, window
from engines.reference.scoring import TextFeatures, score

DESCRIPTOR = EngineDescriptor(
    id="reference",
    label="Reference",
    description="In-memory engine that defines the memory contract's behaviour for tests and conformance.",
    hosted=False,
    needs_endpoint=False,
    needs_key=False,
    fetch_modes=tuple(FetchMode),
)


@dataclass(frozen=True)
class _Held:
    """A stored item with its scoring features, computed once at store time."""

    item: Item
    features: TextFeatures

    @classmethod
    def of(cls, item: Item) -> _Held:
        return cls(item=item, features=TextFeatures.of(item.render_text()))


# Module-level aliases: inside the engine class `list` names the method, not the builtin.
_Rows = list[tuple[ItemId, _Held]]
_Hits = list[Hit]
_Ids = list[ItemId]


class ReferenceEngine(MemoryEngine):
    """Holds items in a dict in first-store order; every write is visible to every read on return.

    An `asyncio.Lock` makes each of its own operations atomic; the inherited defaults (`store_many`,
    `get`, `explore`, `forget_within`) call those operations and take no lock of their own. A forgotten
    or erased item is removed outright and nothing of it is remembered, so storing it again is new.
    """

    stores_in_process = True

    def __init__(self) -> None:
        self._held: dict[ItemId, _Held] = {}
        self._lock = asyncio.Lock()

    def descriptor(self) -> EngineDescriptor:
        return DESCRIPTOR

    async def health(self) -> EngineHealth:
        return EngineHealth.ok()

    async def store(self, item: Item) -> StoreReceipt:
        item.check()
        item_id = item.fingerprint()
        async with self._lock:
            # A replay keeps the held copy untouched, its own `observed_at` included.
            if item_id in self._held:
                return StoreReceipt(id=item_id, replayed=True)
            self._held[item_id] = _Held.of(item)
        return StoreReceipt(id=item_id, replayed=False)

    async def fetch(self, req: FetchRequest) -> FetchPage:
        req.check()
        self.descriptor().ensure_mode(req.mode)
        start = cursor_offset(req.cursor)
        async with self._lock:
            ranked = self._ranked(req.query, req.mode, req.filter, req.refers_to)
        hits, next_cursor = window(ranked, start, req.limit)
        return FetchPage(hits=hits, next_cursor=next_cursor)

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        req.check()
        async with self._lock:
            ranked = self._ranked(req.question, FetchMode.HYBRID, req.filter, req.refers_to)
        return compose(ranked[: req.limit])

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        target.check()
        async with self._lock:
            doomed = self._targeted(target)
            for item_id in doomed:
                del self._held[item_id]
        return ForgetReport(forgotten=len(doomed))

    async def export(self, req: ListRequest) -> ExportPage:
        req.check()
        start = cursor_offset(req.cursor)
        async with self._lock:
            rows, next_cursor = window(self._admitted(req.filter), start, req.limit)
        items = [Exported(id=item_id, item=held.item) for item_id, held in rows]
        return ExportPage(items=items, next_cursor=next_cursor)

    async def erase(self, req: EraseRequest) -> EraseReport:
        req.check()
        async with self._lock:
            doomed = [(item_id, held) for item_id, held in self._held.items() if _erases(req, held.item)]
            for item_id, _ in doomed:
                del self._held[item_id]
        scopes = {(held.item.meta.namespace, held.item.item_kind) for _, held in doomed}
        return EraseReport(erased_scopes=len(scopes))

    async def list(self, req: ListRequest) -> ListPage:
        req.check()
        start = cursor_offset(req.cursor)
        async with self._lock:
            rows, next_cursor = window(self._admitted(req.filter), start, req.limit)
        return ListPage(items=[hit_of(item_id, held.item) for item_id, held in rows], next_cursor=next_cursor)

    def _admitted(self, filter: MetaFilter) -> _Rows:
        """The held items `filter` admits, in store order. Call with the lock held."""
        return [
            (item_id, held)
            for item_id, held in self._held.items()
            if filter.matches(held.item.item_kind, held.item.meta)
        ]

    def _targeted(self, target: ForgetTarget) -> _Ids:
        """The held ids a forget removes. Call with the lock held."""
        if target.filter is not None:
            return [item_id for item_id, _ in self._admitted(target.filter)]
        # dict.fromkeys drops repeats, so an id named twice is counted once.
        return [item_id for item_id in dict.fromkeys(target.ids or ()) if item_id in self._held]

    def _ranked(self, query: str, mode: FetchMode, filter: MetaFilter, refers_to: TimeHint | None) -> _Hits:
        """Admitted hits best first, ties in store order, then the days `refers_to` names first."""
        wanted = TextFeatures.of(query)
        hits: _Hits = []
        for item_id, held in self._admitted(filter):
            points = score(mode, wanted, held.features)
            if points is not None:
                hits.append(hit_of(item_id, held.item, points))
        # sorted() is stable, so equal scores keep store order.
        hits = sorted(hits, key=lambda hit: -hit.score)
        return refers_to.rank(hits) if refers_to is not None else hits


def _erases(req: EraseRequest, item: Item) -> bool:
    """Whether `erase(req)` removes `item`: its kind is named and it sits at or (with descendants) below `at`.

    `inherit` is ignored and sandboxes below `at` are included: erase is deletion, not a read.
    """
    if req.kinds and item.item_kind not in req.kinds:
        return False
    at = req.reach.at
    namespace = item.meta.namespace
    return namespace == at or (req.reach.descendants and namespace.is_within(at))
