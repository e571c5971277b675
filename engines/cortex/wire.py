"""The routes of both wires and typed readers of what they answer (docs/spec/cortexdb.md §5, §11.1, §13).

`Wire` is the engine's only view of the server: one method per logical route, each sending through the
`Transport` with the right retry class and reading the answer into plain data, so a malformed answer is an
`EngineError` here and nowhere else.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from engines.contract import EngineError, NotFoundError
from engines.cortex.failures import tagged
from engines.cortex.transport import Call, Encoded, Transport

PAGE_LIMIT = 200
MAX_PAGES = 500
SCOPES_LIMIT = 1000
HEALTH_PROBE_PREFIX = "tmh:probe"


@dataclass(frozen=True)
class Routes:
    experience: str
    bulk: str | None
    events: str
    recall: str
    answer: str
    forget: str
    scopes: str
    erasures: str
    tenant: str | None
    whoami: str | None


DIRECT_ROUTES = Routes(
    experience="v1/experience",
    bulk="v1/experience/bulk",
    events="v1/events",
    recall="v1/recall",
    answer="v1/answer",
    forget="v1/forget",
    scopes="v1/scopes/list",
    erasures="v1/erasures",
    tenant=None,
    whoami="v1/auth/whoami",
)
HOSTED_ROUTES = Routes(
    experience="memory/experience",
    bulk=None,
    events="memory/events",
    recall="memory/recall",
    answer="memory/answer",
    forget="memory/forget",
    scopes="memory/scopes",
    erasures="memory/v1/erasures",
    tenant="memory",
    whoami=None,
)

_SALT = os.urandom(8).hex()
_SEQUENCE = itertools.count(1)


def fresh_claim() -> str:
    """A hosted `Idempotency-Key`: `tm-<salt>-<nanos>-<seq>`, unique to this process and moment."""
    return f"tm-{_SALT}-{time.time_ns()}-{next(_SEQUENCE)}"


@dataclass(frozen=True)
class RawEvent:
    """One listed (or packed) event as the engine reads it."""

    id: str
    text: str
    labels: list[str]
    partial: bool = False


@dataclass(frozen=True)
class Page:
    """One listing page: its raw entries in order (None where an entry is unreadable) and the next page's cursor."""

    events: list[RawEvent | None]
    next_cursor: str | None


def _malformed(where: str, what: str) -> EngineError:
    return EngineError(f"{where} answered {what}")


def read_event(entry: object) -> RawEvent | None:
    """An event of a listing or a pack, or None for an entry this engine cannot read."""
    if not isinstance(entry, dict):
        return None
    content, context = entry.get("content"), entry.get("context")
    event_id = entry.get("id")
    if not isinstance(event_id, str) or not isinstance(content, dict) or not isinstance(context, dict):
        return None
    text, labels = content.get("text"), context.get("labels", [])
    if not isinstance(text, str) or not isinstance(labels, list) or not all(isinstance(v, str) for v in labels):
        return None
    partial = bool(entry.get("_partial") or content.get("_partial"))
    return RawEvent(event_id, text, list(labels), partial)


class Wire:
    """The logical routes of one wire over one transport."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.hosted = transport.wire.hosted
        self.routes = HOSTED_ROUTES if self.hosted else DIRECT_ROUTES

    def where(self, route: str) -> str:
        return self.transport.where(route)

    # -- listing --------------------------------------------------------------------------------------

    async def page(self, scope: str, labels: Sequence[str] = (), cursor: str | None = None) -> Page:
        query = [("scope", scope), ("limit", str(PAGE_LIMIT))]
        if labels:
            query.append(("labels", ",".join(labels)))
        if cursor is not None:
            query.append(("cursor", cursor))
        answer = await self.transport.send(Call("GET", self.routes.events, query, read=True))
        where = self.where(self.routes.events)
        items = answer.get("items") if isinstance(answer, dict) else None
        if not isinstance(items, list):
            raise _malformed(where, "a listing without items")
        events = [read_event(item) for item in items]
        more, following = answer.get("has_more"), answer.get("next_cursor")
        next_cursor = following if more is True and isinstance(following, str) and following else None
        if next_cursor is not None and next_cursor == cursor:
            raise _malformed(where, "the cursor it was sent: the listing did not advance")
        return Page(events, next_cursor)

    async def pages(
        self, scope: str, labels: Sequence[str] = (), cursor: str | None = None
    ) -> AsyncIterator[tuple[str | None, Page]]:
        """Every page from `cursor` on, each with the cursor that asked for it; at most 500 per walk."""
        for _ in range(MAX_PAGES):
            page = await self.page(scope, labels, cursor)
            yield cursor, page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor
        raise EngineError(f"{self.where(self.routes.events)}: scope `{scope}` has more than {MAX_PAGES} pages")

    async def scopes(self, prefix: str | None, limit: int = SCOPES_LIMIT) -> list[str]:
        """The scope paths under `prefix` (None: every scope the tenant holds); 404 means none."""
        query = [] if prefix is None else [("prefix", prefix + "/")]
        query.append(("limit", str(limit)))
        try:
            answer = await self.transport.send(Call("GET", self.routes.scopes, query, read=True))
        except NotFoundError:
            return []
        return _scope_paths(answer, self.where(self.routes.scopes))

    # -- writes ---------------------------------------------------------------------------------------

    async def append(self, body: bytes, claim: str | None = None) -> tuple[str, bool]:
        """One event appended (`body`: its JSON); its id and whether the server replayed it from the body key."""
        query = [] if self.hosted else [("wait", "indexed")]
        call = Call("POST", self.routes.experience, query, Encoded(body), claim=claim)
        answer = await self.transport.send(call)
        return _acknowledged(answer, self.where(self.routes.experience))

    async def append_bulk(self, bodies: list[bytes]) -> list[tuple[str, bool]]:
        """An ordered batch appended (Direct only; `bodies`: each event's JSON); one `(event id, replayed)` per
        body, in order."""
        route = self.routes.bulk
        assert route is not None, "the hosted wire has no bulk route"
        body = Encoded(b'{"items":[' + b",".join(bodies) + b'],"ordering":"strict_temporal"}')
        answer = await self.transport.send(Call("POST", route, [("wait", "indexed")], body))
        where = self.where(route)
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list) or len(results) != len(bodies):
            raise _malformed(where, "a bulk write without one result per event")
        return [_acknowledged(result, where) for result in results]

    # -- ranked reads ---------------------------------------------------------------------------------

    async def recall(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = await self.transport.send(Call("POST", self.routes.recall, (), body, read=True))
        if not isinstance(answer, dict):
            raise _malformed(self.where(self.routes.recall), "a pack that is not an object")
        return answer

    async def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        claim = fresh_claim() if self.hosted else None
        answer = await self.transport.send(Call("POST", self.routes.answer, (), body, claim=claim))
        if not isinstance(answer, dict) or not isinstance(answer.get("answer"), str):
            raise _malformed(self.where(self.routes.answer), "without a string answer")
        return answer

    # -- removal --------------------------------------------------------------------------------------

    async def forget(self, body: dict[str, Any]) -> None:
        claim = fresh_claim() if self.hosted else None
        await self.transport.send(Call("POST", self.routes.forget, (), body, claim=claim))

    async def erasure(self, body: dict[str, Any]) -> dict[str, Any]:
        claim = fresh_claim() if self.hosted else None
        call = Call("POST", self.routes.erasures, (), body, claim=claim, unwrapped=self.hosted)
        answer = await self.transport.send(call)
        if not isinstance(answer, dict):
            raise _malformed(self.where(self.routes.erasures), "an erasure that is not an object")
        return answer

    async def erasure_status(self, erasure_id: str) -> str:
        route = f"{self.routes.erasures}/{quote(erasure_id, safe='')}"
        answer = await self.transport.send(Call("GET", route, read=True))
        status = answer.get("status") if isinstance(answer, dict) else None
        if not isinstance(status, str):
            raise _malformed(self.where(self.routes.erasures), "an erasure poll without a status")
        return status

    async def erase_tenant(self) -> dict[str, Any]:
        route = self.routes.tenant
        assert route is not None, "only the hosted wire erases a whole tenant"
        answer = await self.transport.send(Call("DELETE", route))
        if not isinstance(answer, dict) or answer.get("erased") is not True or not _count(answer.get("scopes")):
            raise _malformed(self.where(route), "an erasure without `erased: true` and a scope count")
        return answer

    async def health(self) -> None:
        if self.hosted:
            query = [("prefix", HEALTH_PROBE_PREFIX), ("limit", "1")]
            await self.transport.send(Call("GET", self.routes.scopes, query, read=True))
        else:
            await self.transport.send(Call("GET", "v1/admin/health", read=True))


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _acknowledged(answer: object, where: str) -> tuple[str, bool]:
    event_id = answer.get("event_id") if isinstance(answer, dict) else None
    if not isinstance(event_id, str) or not event_id:
        raise tagged(_malformed(where, "a write without an event id"), None, None)
    assert isinstance(answer, dict)
    return event_id, answer.get("replayed_from_idempotency") is True


def _scope_paths(answer: object, where: str) -> list[str]:
    entries = None
    if isinstance(answer, dict):
        entries = answer.get("items", answer.get("scopes"))
    if not isinstance(entries, list):
        raise _malformed(where, "a scope listing without items")
    paths = []
    for entry in entries:
        path = entry.get("path") if isinstance(entry, dict) else entry
        if isinstance(path, str):
            paths.append(path)
    return paths
