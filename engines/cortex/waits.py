"""Waiting until written events can be read (docs/spec/cortexdb.md §8.4).

CortexDB makes an event searchable some time after accepting it and signals readiness nowhere, so the engine
polls: the listing must show the scope's last written event (required: a scope's log is indexed in order, so the
earlier ones are listed too), then ranked recall should see it (best effort: the write is durable either way).
"""

from __future__ import annotations

import asyncio
import time

from engines.contract import Error, UnavailableError
from engines.cortex.timing import Timing
from engines.cortex.wire import Wire

SETTLE_QUERY_CHARS = 256


class _Gaps:
    """Poll gaps: fixed on Direct; on the hosted wire doubling up to a ceiling, to spare its request budget."""

    def __init__(self, timing: Timing, hosted: bool) -> None:
        self._gap = timing.poll
        self._ceiling = timing.hosted_poll_ceiling if hosted else timing.poll

    async def sleep(self) -> None:
        await asyncio.sleep(self._gap)
        self._gap = min(self._gap * 2, max(self._ceiling, self._gap))


async def wait_listed(wire: Wire, scope: str, event_id: str, label: str, timing: Timing) -> None:
    """Return once the listing of `scope` narrowed to `label` holds `event_id`; else `UnavailableError`."""
    deadline = time.monotonic() + timing.visibility
    gaps = _Gaps(timing, wire.hosted)
    missed = failed = 0
    while True:
        try:
            page = await wire.page(scope, [label])
            if any(raw is not None and raw.id == event_id for raw in page.events):
                return
            missed += 1
        except UnavailableError:
            # The hosted budget answers 429 while the engine polls: that is "not yet", not a failure of the write.
            if not wire.hosted:
                raise
            failed += 1
        if time.monotonic() >= deadline:
            raise UnavailableError(
                f"event `{event_id}` was accepted into scope `{scope}` but did not become readable within "
                f"{timing.visibility:g}s; reporting the write as done would break read-after-write "
                f"({missed} polls answered without it, {failed} failed)"
            )
        await gaps.sleep()


async def wait_settled(wire: Wire, scope: str, event_id: str, text: str, timing: Timing) -> None:
    """Wait, at most `timing.settle`, until ranked recall sees `event_id`; any failure ends the wait quietly."""
    body = {"scope": scope, "query": text[:SETTLE_QUERY_CHARS], "view": "granular", "include": ["events"]}
    deadline = time.monotonic() + timing.settle
    gaps = _Gaps(timing, wire.hosted)
    while True:
        try:
            pack = await wire.recall(body)
        except Error:
            return
        layers = pack.get("layers")
        events = layers.get("events") if isinstance(layers, dict) else None
        if isinstance(events, list) and any(isinstance(e, dict) and e.get("id") == event_id for e in events):
            return
        if time.monotonic() >= deadline:
            return
        await gaps.sleep()
