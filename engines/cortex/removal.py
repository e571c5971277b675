"""`forget` by `memory_ids` and `erase` by scope (docs/spec/cortexdb.md §11.6, §11.7).

A forget names the events it removes and nothing else: an empty or unrecognised selector means the whole scope
to the server, so the engine never sends one. An erase removes whole kind scopes, deepest first, and never a
node's own path, because the server only redacts the scopes below an erased one and keeps their write keys.
"""

from __future__ import annotations

import asyncio
import time

from engines.contract import (
    EngineError,
    EraseReport,
    EraseRequest,
    ForgetReport,
    ForgetTarget,
    MetaFilter,
    NotFoundError,
    UnavailableError,
    UnsupportedError,
)
from engines.cortex.failures import error_code
from engines.cortex.held import admits, decoded
from engines.cortex.labels import narrowing_labels
from engines.cortex.layout import KindScope
from engines.cortex.lookup import batches, lookup
from engines.cortex.scopes import Selector
from engines.cortex.timing import ERASURE_POLL_CEILING, Timing
from engines.cortex.wire import Wire

FORGET_BATCH = 100
FORGET_NOTE = "tinymemory: forget"
ERASE_NOTE = "tinymemory: erase"
HOSTED_ATTEMPTS = 3
ERASURE_INCOMPLETE = "ERASURE_INCOMPLETE"
RUNNING = frozenset({"running", "pending", "queued", "accepted"})


class Remover:
    """Forgets and erases through one wire."""

    def __init__(self, wire: Wire, selector: Selector, timing: Timing) -> None:
        self.wire = wire
        self.selector = selector
        self.timing = timing

    # -- forget ---------------------------------------------------------------------------------------

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        if target.ids is not None:
            found = await self._by_ids(list(dict.fromkeys(target.ids)))
        else:
            assert target.filter is not None
            found = await self._by_filter(target.filter)
        items: set[str] = set()
        for scope, events in found:
            for batch in batches(list(events), FORGET_BATCH):
                await self._forget_events(scope, batch)
            items.update(events.values())
        return ForgetReport(forgotten=len(items))

    async def _by_ids(self, ids: list[str]) -> list[tuple[KindScope, dict[str, str]]]:
        """Per scope, event id -> item id of every event of the named items, wherever they are."""
        found = []
        for scope in await self.selector.everything():
            held = await lookup(self.wire, scope, ids)
            events = {h.event_id: item_id for item_id, events in held.items() for h in events}
            if events:
                found.append((scope, events))
        return found

    async def _by_filter(self, filter: MetaFilter) -> list[tuple[KindScope, dict[str, str]]]:
        found = []
        labels = narrowing_labels(filter)
        for scope in await self.selector.read(filter):
            events: dict[str, str] = {}
            async for _, page in self.wire.pages(scope.path, labels):
                for raw in page.events:
                    held = decoded(raw) if raw is not None and raw.id not in events else None
                    if held is not None and held.envelope.kind is scope.kind and admits(filter, held.envelope):
                        events[held.event_id] = held.item_id
            if events:
                found.append((scope, events))
        return found

    async def _forget_events(self, scope: KindScope, event_ids: list[str]) -> None:
        body = {
            "scope": scope.path,
            "layers": ["events"],
            "selector": {"memory_ids": event_ids},
            "cascade": "redact_events",
            "audit_note": FORGET_NOTE,
        }
        if not self.wire.hosted:
            await self.wire.forget(body)
            return
        # Removing named events is idempotent, so the hosted wire may try again (each attempt a fresh claim).
        for attempt in range(1, HOSTED_ATTEMPTS + 1):
            try:
                await self.wire.forget(body)
                return
            except NotFoundError:
                if attempt == 1:
                    raise
                return
            except UnavailableError:
                if attempt == HOSTED_ATTEMPTS:
                    raise
                await asyncio.sleep(self.timing.retry_backoff * 2 ** (attempt - 1))

    # -- erase ----------------------------------------------------------------------------------------

    async def erase(self, req: EraseRequest) -> EraseReport:
        if self.wire.hosted and req.whole_tree and req.is_whole_tree():
            try:
                answer = await self.wire.erase_tenant()
            except NotFoundError:
                raise UnsupportedError("this TinyHumans backend cannot erase a whole account") from None
            return EraseReport(erased_scopes=answer["scopes"])
        erased, receipts = 0, []
        for scope in await self.selector.erased(req.reach, list(req.kinds)):
            count, ids = await (self._erase_hosted(scope) if self.wire.hosted else self._erase_direct(scope))
            erased += count
            receipts += ids
        return EraseReport(erased_scopes=erased, receipts=receipts)

    async def _erase_direct(self, scope: KindScope) -> tuple[int, list[str]]:
        body = {"scope": scope.path, "confirm_all": True, "audit_note": ERASE_NOTE}
        try:
            answer = await self.wire.erasure(body)
        except NotFoundError:
            raise UnsupportedError("this CortexDB server offers no erasures") from None
        erasure_id = answer.get("erasure_id")
        if not isinstance(erasure_id, str) or not erasure_id:
            raise EngineError(f"{self.wire.where(self.wire.routes.erasures)} answered an erasure without an id")
        status = answer.get("status", "completed")
        deadline, gap = time.monotonic() + self.timing.erasure, self.timing.poll
        while status in RUNNING:
            if time.monotonic() >= deadline:
                raise UnavailableError(
                    f"erasure `{erasure_id}` of scope `{scope.path}` was still {status} after {self.timing.erasure:g}s"
                )
            await asyncio.sleep(gap)
            gap = min(gap * 2, ERASURE_POLL_CEILING)
            status = await self.wire.erasure_status(erasure_id)
        if status != "completed":
            raise EngineError(f"erasure `{erasure_id}` of scope `{scope.path}` ended {status}")
        return 1, [erasure_id]

    async def _erase_hosted(self, scope: KindScope) -> tuple[int, list[str]]:
        body = {"scope": scope.path, "audit_note": ERASE_NOTE}
        for attempt in range(1, HOSTED_ATTEMPTS + 1):
            try:
                answer = await self.wire.erasure(body)
                break
            except NotFoundError:
                raise UnsupportedError("this TinyHumans backend offers no scoped erasures") from None
            except UnavailableError as err:
                if error_code(err) != ERASURE_INCOMPLETE or attempt == HOSTED_ATTEMPTS:
                    raise
                await asyncio.sleep(self.timing.poll * attempt)
        count, ids = answer.get("scopes"), answer.get("erasure_ids") or []
        where = self.wire.where(self.wire.routes.erasures)
        if answer.get("erased") is not True or not isinstance(count, int) or not isinstance(ids, list):
            raise EngineError(f"{where} answered an erasure without `erased: true` and a scope count")
        if count > 0 and not ids:
            raise EngineError(f"{where} erased {count} scopes but named no erasure")
        return count, [str(i) for i in ids]
