"""`store_many` on CortexDB: a batch costs a few requests, not a few per item (docs/spec/cortexdb.md §8).

Every event of every item is encoded (and so size-checked) before the first request. Then, per kind scope: one
label lookup finds what a replay already holds, the missing events are written without waiting, and one listing
poll waits for the scope's last written event; one ranked-recall wait for the very last event ends the call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from engines.contract import Item, StoreReceipt, validate_many
from engines.cortex.appends import Written, append_direct, append_hosted
from engines.cortex.envelope import Event, encode_item
from engines.cortex.layout import KindScope, Layout
from engines.cortex.lookup import lookup
from engines.cortex.timing import Timing
from engines.cortex.together import all_of
from engines.cortex.waits import wait_listed, wait_settled
from engines.cortex.wire import Wire

WHOLE = -1
"""The part number of an item held in one event."""


@dataclass
class _Planned:
    """One item of the batch: its id, scope, events, and what the replay lookup found of it."""

    item_id: str
    scope: KindScope
    events: list[Event]
    repeat: bool = False
    held: set[int] = field(default_factory=set)
    missing_count: int = 0
    written: list[Written] = field(default_factory=list)

    def missing(self) -> list[Event]:
        return [event for event in self.events if _part(event) not in self.held]

    def receipt(self) -> StoreReceipt:
        if self.repeat or not self.missing_count:
            return StoreReceipt(id=self.item_id, replayed=True)
        if len(self.held) > 0:
            return StoreReceipt(id=self.item_id, replayed=False)
        replayed = bool(self.written) and all(was_replayed for _, was_replayed in self.written)
        return StoreReceipt(id=self.item_id, replayed=replayed)


def _part(event: Event) -> int:
    return WHOLE if event.part is None else event.part


def _held_part(part: int | None) -> int:
    return WHOLE if part is None else part


def plan(items: list[Item], layout: Layout) -> list[_Planned]:
    """Validate, identify and encode the whole batch; nothing is sent before this succeeds."""
    validate_many(items)
    planned: list[_Planned] = []
    first: dict[str, _Planned] = {}
    for item in items:
        item_id = item.fingerprint()
        scope = layout.scope(item.meta.namespace, item.item_kind)
        earlier = first.get(item_id)
        if earlier is not None:
            planned.append(_Planned(item_id, scope, earlier.events, repeat=True))
            continue
        entry = _Planned(item_id, scope, encode_item(item, item_id, scope.path))
        first[item_id] = entry
        planned.append(entry)
    return planned


def _by_scope(planned: Iterable[_Planned]) -> dict[str, list[_Planned]]:
    groups: dict[str, list[_Planned]] = {}
    for entry in planned:
        if not entry.repeat:
            groups.setdefault(entry.scope.path, []).append(entry)
    return groups


class Writer:
    """Stores batches through one wire and layout."""

    def __init__(self, wire: Wire, layout: Layout, timing: Timing) -> None:
        self.wire = wire
        self.layout = layout
        self.timing = timing

    async def store_many(self, items: list[Item]) -> list[StoreReceipt]:
        planned = plan(items, self.layout)
        groups = _by_scope(planned)
        # The lookups of different scopes are independent: they are in flight together.
        await all_of(self._find_held(entries) for entries in groups.values())
        last_by_scope: dict[str, tuple[Event, str]] = {}
        # Direct sends a scope's events together; the hosted wire has no bulk route, so it writes event by
        # event in item order, whatever the scope.
        runs = [[entry for entry in planned if not entry.repeat]] if self.wire.hosted else list(groups.values())
        for entries in runs:
            for path, written in (await self._write(entries)).items():
                last_by_scope.pop(path, None)
                last_by_scope[path] = written
        if last_by_scope:
            # Settling is best effort and asks another route: it runs beside the required listing waits, and the
            # call returns once both are done (a failed listing wait is raised after the settle wait ends).
            path, (event, event_id) = list(last_by_scope.items())[-1]
            settled = wait_settled(self.wire, path, event_id, event.text, self.timing)
            listed = [
                wait_listed(self.wire, scope, written_id, written.body["context"]["labels"][0], self.timing)
                for scope, (written, written_id) in last_by_scope.items()
            ]
            await all_of([settled, *listed])
        return [entry.receipt() for entry in planned]

    async def _find_held(self, entries: list[_Planned]) -> None:
        found = await lookup(self.wire, entries[0].scope, [entry.item_id for entry in entries])
        for entry in entries:
            entry.held = {_held_part(held.envelope.part) for held in found.get(entry.item_id, [])}
            entry.missing_count = len(entry.missing())

    async def _write(self, entries: list[_Planned]) -> dict[str, tuple[Event, str]]:
        """Write the entries' missing events in item order; per scope, the last event written and its id."""
        pending = [(entry, event) for entry in entries for event in entry.missing()]
        last: dict[str, tuple[Event, str]] = {}
        if not pending:
            return last
        if self.wire.hosted:
            results = []
            for entry, event in pending:
                results.append(await append_hosted(self.wire, event, self.timing))
                entry.written.append(results[-1])
                last.pop(entry.scope.path, None)
                last[entry.scope.path] = (event, results[-1][0])
            return last
        results = await append_direct(self.wire, [event for _, event in pending])
        for (entry, event), result in zip(pending, results, strict=True):
            entry.written.append(result)
            last[entry.scope.path] = (event, result[0])
        return last
