"""Finding items by id: a label lookup in one scope, at most 50 labels a request, every page read
(docs/spec/cortexdb.md §8.2, §11.5).

An item label is a digest, so every event found is checked against the envelope id before it counts.
"""

from __future__ import annotations

from collections.abc import Iterable

from engines.cortex.held import Held, decoded
from engines.cortex.labels import item_label
from engines.cortex.layout import KindScope
from engines.cortex.together import all_of
from engines.cortex.wire import RawEvent, Wire

LABELS_PER_REQUEST = 50


def batches(values: list[str], size: int = LABELS_PER_REQUEST) -> list[list[str]]:
    return [values[start : start + size] for start in range(0, len(values), size)]


async def lookup(wire: Wire, scope: KindScope, ids: Iterable[str]) -> dict[str, list[Held]]:
    """Every event of the named items held in `scope`, by item id, each event once.

    The requests of one lookup (50 labels each) are independent, so they are in flight together.
    """
    wanted = list(dict.fromkeys(ids))
    found: dict[str, list[Held]] = {}
    if not wanted:
        return found
    wanted_set = set(wanted)
    walks = [_walk(wire, scope, labels) for labels in batches([item_label(item_id) for item_id in wanted])]
    seen: set[str] = set()
    for events in await all_of(walks):
        for raw in events:
            # Every event is listed twice; a set also covers copies an append between pages shifted.
            if raw.id in seen:
                continue
            seen.add(raw.id)
            held = decoded(raw)
            if held is not None and held.item_id in wanted_set and held.envelope.kind is scope.kind:
                found.setdefault(held.item_id, []).append(held)
    return found


async def _walk(wire: Wire, scope: KindScope, labels: list[str]) -> list[RawEvent]:
    events: list[RawEvent] = []
    async for _, page in wire.pages(scope.path, labels):
        events.extend(raw for raw in page.events if raw is not None)
    return events
