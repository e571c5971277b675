"""The double's Direct wire: CortexDB's own `/v1/*` routes (docs/spec/cortexdb.md §13.4)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

from tinymemory_ingest.cortex_double.checks import RefusalError, check_scope, check_wait, invalid
from tinymemory_ingest.cortex_double.http import NOT_JSON, Request, Response
from tinymemory_ingest.cortex_double.log import EventRecord
from tinymemory_ingest.cortex_double.packs import build_pack, check_recall, pack_answer
from tinymemory_ingest.cortex_double.state import DoubleState

VERSION = "v0.10.5"
HEALTH = {"status": "healthy", "version": VERSION}
ANSWER_KEYS = frozenset(
    {"scope", "question", "use_pack_id", "cite_sources", "include_context", "answer_instructions", "view"}
    | {"question_type", "question_date", "answer_model", "answer_max_tokens", "temporal", "diagnostics", "filters"}
)
MAX_INSTRUCTIONS = 4000
WAITING = frozenset({"indexed", "consolidated", "settled"})
_EVENT = re.compile(r"v1/events/([^/]+)")
_ERASURE = re.compile(r"v1/erasures/([^/]+)")

Handler = Callable[[Request], Awaitable[Response]]


def failure(refusal: RefusalError, request_id: str) -> Response:
    body: dict[str, Any] = {
        "error_code": refusal.code,
        "message": refusal.message,
        "request_id": request_id,
        "retriable": refusal.status in (408, 429, 500, 502, 503, 504),
    }
    if refusal.details:
        body["details"] = refusal.details
    return Response(refusal.status, body)


async def await_listed(double: DoubleState, records: list[EventRecord]) -> bool:
    """Wait, at most `wait_timeout_s`, until every record is listed; a manual clock never waits."""
    config = double.config
    deadline = asyncio.get_running_loop().time() + config.wait_timeout_s
    while True:
        latest = max(record.listed_at for record in records)
        left = latest - config.clock()
        if left <= 0:
            return True
        if config.manual() or asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(min(left, max(deadline - asyncio.get_running_loop().time(), 0.001), 0.05))


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict) or body is NOT_JSON:
        raise invalid("the body must be a JSON object")
    return body


class DirectRoutes:
    """`/v1/*` over the double's core."""

    def __init__(self, double: DoubleState) -> None:
        self.double = double
        self.core = double.core
        self.routes: dict[tuple[str, str], Handler] = {
            ("GET", "v1/auth/whoami"): self.whoami,
            ("GET", "v1/admin/health"): self.health,
            ("GET", "v1/admin/version"): self.version,
            ("POST", "v1/experience"): self.experience,
            ("POST", "v1/experience/bulk"): self.bulk,
            ("GET", "v1/events"): self.events,
            ("POST", "v1/recall"): self.recall,
            ("POST", "v1/answer"): self.answer,
            ("POST", "v1/forget"): self.forget,
            ("POST", "v1/erasures"): self.erasure,
            ("GET", "v1/scopes/list"): self.scopes,
        }

    def failure(self, status: int, code: str, retry_after: int | None = None) -> Response:
        response = failure(RefusalError(status, code, "injected failure"), self.double.request_id())
        if retry_after is not None:
            response.headers["Retry-After"] = str(retry_after)
        return response

    async def handle(self, request: Request) -> Response:
        if request.method == "GET" and request.path in ("v1/health", "v1/ready"):
            return Response(200, dict(HEALTH))
        try:
            self._authenticate(request)
            handler = self.routes.get((request.method, request.path)) or self._pattern(request)
            if handler is None:
                raise RefusalError(404, "NOT_FOUND", f"no route {request.method} /{request.path}")
            return await handler(request)
        except RefusalError as refusal:
            return failure(refusal, self.double.request_id())

    def _pattern(self, request: Request) -> Handler | None:
        if request.method == "GET" and _EVENT.fullmatch(request.path):
            return self.event
        if request.method == "GET" and _ERASURE.fullmatch(request.path):
            return self.erasure_status
        return None

    def _authenticate(self, request: Request) -> None:
        config = self.double.config
        bearer = request.bearer()
        if bearer is None:
            raise RefusalError(401, "MISSING_TOKEN", "a bearer token is required")
        if config.api_key is not None and bearer != config.api_key:
            raise RefusalError(401, "INVALID_TOKEN_SIGNATURE", "the token is not valid")
        # Whoami is how a client learns its actor, so it cannot require one.
        actor = request.headers.get("x-cortex-actor")
        if config.require_actor and request.path != "v1/auth/whoami" and actor != config.caller:
            raise RefusalError(401, "ACTOR_MISMATCH", "X-Cortex-Actor does not name the token's subject")

    # -- routes ---------------------------------------------------------------------------------------

    async def whoami(self, request: Request) -> Response:
        caller = self.double.config.caller
        if caller is None:
            raise RefusalError(404, "NOT_FOUND", "this server has no actors")
        return Response(200, {"caller": caller, "tenant_id": "tenant-1", "deployment_preset": "dev_local"})

    async def health(self, request: Request) -> Response:
        return Response(200, dict(HEALTH))

    async def version(self, request: Request) -> Response:
        return Response(200, {"version": VERSION, "capabilities": ["refers_to_v1", "temporal_lenient_v1"]})

    async def experience(self, request: Request) -> Response:
        wait = check_wait(request.one("wait"))
        body = _object(request.body)
        with self.double.lock:
            record, replayed = self.core.experience(body, str(body.get("scope")))
        if wait in WAITING and not await await_listed(self.double, [record]):
            raise RefusalError(408, "WAIT_TIMEOUT", f"event {record.id} is durable but not yet indexed")
        return Response(202, {"event_id": record.id, "status": "captured", "replayed_from_idempotency": replayed})

    async def bulk(self, request: Request) -> Response:
        wait = check_wait(request.one("wait"))
        with self.double.lock:
            written = self.core.bulk(request.body, lambda scope: scope)
        if wait in WAITING and not await await_listed(self.double, [record for record, _ in written]):
            raise RefusalError(408, "WAIT_TIMEOUT", "the batch is durable but not yet indexed")
        results = [
            {"index": n, "event_id": record.id, "replayed_from_idempotency": replayed}
            for n, (record, replayed) in enumerate(written)
        ]
        return Response(202, {"accepted": len(results), "results": results})

    async def events(self, request: Request) -> Response:
        scope = request.one("scope")
        if not scope:
            raise invalid("scope is required")
        with self.double.lock:
            return Response(200, self.core.listing(scope, request.query, lambda stored: stored))

    async def event(self, request: Request) -> Response:
        found = _EVENT.fullmatch(request.path)
        assert found is not None
        with self.double.lock:
            record = self.double.log.events.get(found.group(1))
            if record is None or record.removed:
                raise RefusalError(404, "NOT_FOUND", f"no event {found.group(1)}")
            return Response(200, record.entry())

    async def recall(self, request: Request) -> Response:
        body = check_recall(_object(request.body))
        check_scope(body["scope"], self.double.config)
        with self.double.lock:
            pack = build_pack(self.double.log, self.double.config, body, body["scope"])
            multi = (body.get("view") or "holistic") not in ("granular", "local", "raw", "structured")
            return Response(200, pack_answer(pack, self.double.config, body, lambda s: s, multi))

    async def answer(self, request: Request) -> Response:
        body = _object(request.body)
        unknown = sorted(set(body) - ANSWER_KEYS)
        if unknown:
            raise invalid(f"unknown field(s) {', '.join(unknown)}")
        return self.double.answer(body, body.get("scope"), lambda s: s)

    async def forget(self, request: Request) -> Response:
        body = _object(request.body)
        if not isinstance(body.get("scope"), str):
            raise invalid("scope is required")
        with self.double.lock:
            return Response(200, self.core.forget(body, body["scope"]))

    async def erasure(self, request: Request) -> Response:
        body = _object(request.body)
        scope = body.get("scope")
        if not isinstance(scope, str) or not scope:
            raise invalid("scope is required")
        selector = body.get("selector") if isinstance(body.get("selector"), dict) else None
        ids = selector.get("memory_ids") if selector else None
        confirm_all = body.get("confirm_all") is True
        if confirm_all and ids:
            raise RefusalError(400, "AMBIGUOUS_SELECTOR", "confirm_all is only valid with an empty selector")
        if not confirm_all and not ids:
            raise invalid("an empty selector needs confirm_all: true", "EMPTY_SELECTOR_WITHOUT_CONFIRMATION")
        with self.double.lock:
            # A selector erases only the named events (as the vendor's SDK sends it); confirm_all the whole scope.
            self.core.erase(scope, list(ids) if isinstance(ids, list) and not confirm_all else None)
            erasure = self.core.new_erasure(scope)
        status = "running" if erasure.polls_left > 0 else "completed"
        urls = {"receipt_url": f"/v1/erasures/{erasure.erasure_id}", "verify_url": f"/v1/erasures/{erasure.erasure_id}"}
        return Response(202, {"erasure_id": erasure.erasure_id, "status": status, **urls})

    async def erasure_status(self, request: Request) -> Response:
        found = _ERASURE.fullmatch(request.path)
        assert found is not None
        with self.double.lock:
            return Response(200, self.core.erasure_status(found.group(1)))

    async def scopes(self, request: Request) -> Response:
        raw = request.one("limit")
        try:
            limit = int(raw) if raw is not None else 50
        except ValueError:
            raise invalid("limit must be an integer") from None
        limit = min(max(limit, 1), 1000)
        with self.double.lock:
            paths = self.core.scopes(request.one("prefix"), limit)
        return Response(200, {"items": [{"path": path} for path in paths]})
