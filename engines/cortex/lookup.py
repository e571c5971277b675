"""Finding items by id: a label lookup in one scope, at most 50 labels a request, every page read (§8.2, §11.5).

An item label is a digest, so every event found is checked against the envelope id before it counts.
"""

from __future__ import annotations

from collections.abc import Iterable

from engines.cortex.held import Held, decoded
from engines.cortex.labels import item_label
from engines.cortex.layout import KindScope
from engines.cortex.wire import Wire

LABELS_PER_REQUEST = 50


def batches(values: list[str], size: int = LABELS_PER_REQUEST) -> list[list[str]]:
    return [values[start : start + size] for start in range(0, len(values), size)]


async def lookup(wire: Wire, scope: KindScope, ids: Iterable[str]) -> dict[str, list[Held]]:
    """Every event of the named items held in `scope`, by item id, each event once."""
    wanted = list(dict.fromkeys(ids))
    found: dict[str, list[Held]] = {}
    if not wanted:
        return found
    wanted_set = set(wanted)
    seen: set[str] = set()
    for labels in batches([item_label(item_id) for item_id in wanted]):
        async for _, page in wire.pages(scope.path, labels):
            for raw in page.events:
                # Every event is listed twice; a set also covers copies an append between pages shifted.
                if raw is None or raw.id in seen:
                    continue
                seen.add(raw.id)
                held = decoded(raw)
                if held is not None and held.item_id in wanted_set and held.envelope.kind is scope.kind:
                    found.setdefault(held.item_id, []).append(held)
    return found
