"""Storing a batch of units' items with `store_many`, at most 100 items a call, checkpointing each call.

Units are stored in order. After the engine acknowledges a call, `on_stored` is awaited with the
units whose items are now all stored, so the caller commits exactly those (its checkpoint). A
call the engine refuses is retried unit by unit, so one bad unit fails alone and the rest are
stored; only an engine that is unreachable makes the batch raise.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from engines.contract import MAX_STORE_MANY, Error, Item, ItemId, MemoryEngine, StoreReceipt

StoreMany = Callable[[list[Item]], Awaitable[list[StoreReceipt]]]


@dataclass(frozen=True)
class UnitItems:
    """One unit and the items it became (possibly several: a document in parts)."""

    unit_id: str
    items: Sequence[Item]


@dataclass(frozen=True)
class StoredUnit:
    """A unit whose items are all acknowledged by the engine: its item ids, in order."""

    unit_id: str
    item_ids: list[ItemId]
    replayed: int


@dataclass
class BatchOutcome:
    """What storing the batch did: units stored, units refused (with the engine's error)."""

    stored: list[StoredUnit] = field(default_factory=list)
    failed: list[tuple[str, Error]] = field(default_factory=list)

    @property
    def items(self) -> int:
        return sum(len(u.item_ids) for u in self.stored)

    @property
    def replayed(self) -> int:
        return sum(u.replayed for u in self.stored)


OnStored = Callable[[list[StoredUnit]], Awaitable[None]]


async def store_units(
    engine: MemoryEngine,
    units: Sequence[UnitItems],
    on_stored: OnStored,
    store_many: StoreMany | None = None,
    size: int = MAX_STORE_MANY,
) -> BatchOutcome:
    """Store every unit's items in calls of at most `size` items, checkpointing after each call.

    `store_many` wraps the engine's (to retry transient failures); an error that is still transient
    after it propagates, leaving every unit acknowledged so far committed.
    """
    run = _Run(store_many or engine.store_many, on_stored, {u.unit_id: len(u.items) for u in units})
    for chunk in _chunks(units, size):
        await run.store(chunk)
    return run.outcome


class _Run:
    """The state of one `store_units` call: receipts so far, per unit, and the outcome."""

    def __init__(self, call: StoreMany, on_stored: OnStored, totals: dict[str, int]) -> None:
        self.call = call
        self.on_stored = on_stored
        self.totals = totals
        self.receipts: dict[str, list[StoreReceipt]] = {}
        self.outcome = BatchOutcome()
        self.refused: set[str] = set()

    async def store(self, chunk: list[UnitItems]) -> None:
        chunk = [part for part in chunk if part.unit_id not in self.refused]
        flat = [(part.unit_id, item) for part in chunk for item in part.items]
        try:
            acked = await self.call([item for _, item in flat]) if flat else []
        except Error as err:
            if err.is_transient():
                raise
            # The engine refused the call: store part by part to find the unit to blame.
            for part in chunk:
                await self._store_alone(part)
            return
        await self._acknowledge([unit_id for unit_id, _ in flat], acked, chunk)

    async def _store_alone(self, part: UnitItems) -> None:
        if part.unit_id in self.refused:
            return
        try:
            acked = await self.call(list(part.items)) if part.items else []
        except Error as err:
            if err.is_transient():
                raise
            self.refused.add(part.unit_id)
            self.receipts.pop(part.unit_id, None)
            self.outcome.failed.append((part.unit_id, err))
            return
        await self._acknowledge([part.unit_id] * len(acked), acked, [part])

    async def _acknowledge(self, owners: list[str], acked: list[StoreReceipt], chunk: list[UnitItems]) -> None:
        for unit_id, receipt in zip(owners, acked, strict=True):
            self.receipts.setdefault(unit_id, []).append(receipt)
        # A unit is done once every item of it is acknowledged, which for a big one is its last part.
        done = [
            _stored(part.unit_id, self.receipts.pop(part.unit_id, []))
            for part in _unique(chunk)
            if len(self.receipts.get(part.unit_id, [])) == self.totals[part.unit_id]
        ]
        if done:
            await self.on_stored(done)
            self.outcome.stored.extend(done)


def _unique(chunk: list[UnitItems]) -> list[UnitItems]:
    return list({part.unit_id: part for part in chunk}.values())


def _stored(unit_id: str, receipts: list[StoreReceipt]) -> StoredUnit:
    return StoredUnit(unit_id, [r.id for r in receipts], sum(r.replayed for r in receipts))


def _chunks(units: Sequence[UnitItems], size: int) -> list[list[UnitItems]]:
    """Consecutive groups of whole units of at most `size` items (a unit with more is split alone)."""
    groups: list[list[UnitItems]] = []
    current: list[UnitItems] = []
    count = 0
    for unit in units:
        for part in _split(unit, size):
            if current and count + len(part.items) > size:
                groups.append(current)
                current, count = [], 0
            current.append(part)
            count += len(part.items)
    if current:
        groups.append(current)
    return groups


def _split(unit: UnitItems, size: int) -> list[UnitItems]:
    items = list(unit.items)
    if len(items) <= size:
        return [unit]
    return [UnitItems(unit.unit_id, items[i : i + size]) for i in range(0, len(items), size)]
