"""Appending events on each wire (docs/spec/cortexdb.md §8.3, §8.5).

Direct sends a scope's events together, one bulk request (past 1,000 events or 8 MiB, several), and falls back
to one request per event on a server without the bulk route; its writes are never retried here. The hosted wire
sends one request per event under an `Idempotency-Key` claim kept across that event's own retries: a conflict
on a retry means an earlier attempt may have been applied, so the event is looked for before anything is said.
"""

from __future__ import annotations

import asyncio
import time

from engines.contract import ConflictError, Error, UnavailableError
from engines.cortex.envelope import Event
from engines.cortex.failures import error_status
from engines.cortex.timing import Timing
from engines.cortex.wire import Wire, fresh_claim

BULK_MAX_EVENTS = 1000
BULK_MAX_BYTES = 8 * 1024 * 1024
HOSTED_WRITE_ATTEMPTS = 3

Written = tuple[str, bool]
"""An appended event's id, and whether the server replayed it from its body key."""


def bulk_batches(events: list[Event]) -> list[list[Event]]:
    """Consecutive runs of at most 1,000 events and 8 MiB of bodies (with their commas) each."""
    batches: list[list[Event]] = []
    current: list[Event] = []
    size = 0
    for event in events:
        width = len(event.data) + 1
        if current and (len(current) >= BULK_MAX_EVENTS or size + width > BULK_MAX_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(event)
        size += width
    if current:
        batches.append(current)
    return batches


async def append_direct(wire: Wire, events: list[Event]) -> list[Written]:
    """Append one scope's events in order, each sent once."""
    if len(events) == 1 or wire.transport.bulk_missing:
        return [await wire.append(event.data) for event in events]
    written: list[Written] = []
    for batch in bulk_batches(events):
        if wire.transport.bulk_missing or len(batch) == 1:
            written += [await wire.append(event.data) for event in batch]
            continue
        try:
            written += await wire.append_bulk([event.data for event in batch])
        except Error as err:
            if error_status(err) not in (404, 405):
                raise
            # A server without the bulk route: remembered, then one request per event.
            wire.transport.bulk_missing = True
            written += [await wire.append(event.data) for event in batch]
    return written


async def append_hosted(wire: Wire, event: Event, timing: Timing) -> Written:
    """Append one event under one claim, retrying what is transient; a conflict on a retry is recovered."""
    claim = fresh_claim()
    for attempt in range(1, HOSTED_WRITE_ATTEMPTS + 1):
        try:
            return await wire.append(event.data, claim)
        except ConflictError:
            if attempt == 1:
                raise
            return await _recover(wire, event, timing)
        except UnavailableError:
            if attempt == HOSTED_WRITE_ATTEMPTS:
                raise
            await asyncio.sleep(timing.retry_backoff * 2 ** (attempt - 1))
    raise AssertionError("unreachable: the last attempt returns or raises")


async def _recover(wire: Wire, event: Event, timing: Timing) -> Written:
    """An earlier attempt reached the server: find the event it wrote, or say the outcome is unknown."""
    scope, label = event.body["scope"], event.body["context"]["labels"][0]
    deadline = time.monotonic() + timing.write_recovery
    while True:
        try:
            page = await wire.page(scope, [label])
            for raw in page.events:
                if raw is not None and raw.text == event.text:
                    return raw.id, False
        except UnavailableError:
            pass
        if time.monotonic() >= deadline:
            raise UnavailableError(
                f"the outcome of an event written to scope `{scope}` is unknown: an earlier attempt reached the "
                f"server but the event was not listed within {timing.write_recovery:g}s; storing again is safe"
            )
        await asyncio.sleep(timing.poll)
