"""The double's hosted wire: CortexDB behind the TinyHumans backend, `/memory/*` (docs/spec/cortexdb.md §13.11).

The backend wraps every answer in `{"success", "data"}`, relays the server's refusals through its own table,
re-roots every scope under the caller's tenant, takes an `Idempotency-Key` claim before anything else happens to
a write, and limits each bearer to a number of requests a minute.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from tinymemory_ingest.cortex_double.checks import HOSTED_SEGMENTS, RefusalError, check_scope
from tinymemory_ingest.cortex_double.http import Request, Response
from tinymemory_ingest.cortex_double.packs import build_pack, check_recall, pack_answer
from tinymemory_ingest.cortex_double.state import DoubleState

ANSWER_KEYS = frozenset(
    {"scope", "question", "question_type", "question_date", "temporal", "filters", "answer_max_tokens"}
    | {"answer_instructions", "cite_sources", "include_context", "use_pack_id"}
)
LIMITED = "Rate limit exceeded. Please retry after a brief wait."
WINDOW_S = 60.0
_BARE = re.compile(r"[a-z][a-z0-9_]*:[A-Za-z0-9_-]+(/[a-z][a-z0-9_]*:[A-Za-z0-9_-]+)*")

Handler = Callable[[Request, str], Awaitable[Response]]


def enveloped(data: Any, status: int = 200) -> Response:
    return Response(status, {"success": True, "data": data})


def failed(status: int, code: str, message: str) -> Response:
    return Response(status, {"success": False, "error": message, "errorCode": code})


def limiter(retry_after: int) -> Response:
    body = {"error": {"message": LIMITED, "type": "rate_limit_error"}}
    return Response(429, body, {"Retry-After": str(retry_after)})


class _BackendRefusalError(Exception):
    """A refusal of the backend itself, answered as it is (not relayed)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status)
        self.response = response


class HostedRoutes:
    """`/memory/*` over the double's core."""

    def __init__(self, double: DoubleState) -> None:
        self.double = double
        self.core = double.core
        self.config = double.config
        self.claims: set[str] = set()
        self.windows: dict[str, deque[float]] = {}
        self.routes: dict[tuple[str, str], Handler] = {
            ("POST", "memory/experience"): self.experience,
            ("GET", "memory/events"): self.events,
            ("POST", "memory/recall"): self.recall,
            ("POST", "memory/answer"): self.answer,
            ("POST", "memory/forget"): self.forget,
            ("GET", "memory/scopes"): self.scopes,
            ("POST", "memory/v1/erasures"): self.erasure,
            ("DELETE", "memory"): self.erase_tenant,
        }

    def failure(self, status: int, code: str, retry_after: int | None = None) -> Response:
        if status == 429:
            return limiter(retry_after or 1)
        response = failed(status, code, "injected failure")
        if retry_after is not None:
            response.headers["Retry-After"] = str(retry_after)
        return response

    def tenant(self, request: Request) -> str:
        bearer = request.bearer() or ""
        return self.config.tenants.get(bearer, self.config.tenant_prefix)

    def take_claim(self, request: Request) -> bool:
        """Take the request's claim; False when the key was claimed before (the request must not be applied)."""
        key = request.headers.get("idempotency-key")
        if key is None or request.method not in ("POST", "DELETE") or request.path == "memory/recall":
            return True
        with self.double.lock:
            if key in self.claims:
                return False
            self.claims.add(key)
        return True

    async def handle(self, request: Request) -> Response:
        bearer = request.bearer()
        if bearer is None or (self.config.api_key is not None and bearer != self.config.api_key):
            return failed(401, "UNAUTHORIZED", "sign in to use memory")
        limited = self._limited(bearer)
        if limited is not None:
            return limiter(limited)
        if self.double.faults.take("credits", request.method, request.path) is not None:
            return failed(402, "USER_INSUFFICIENT_CREDITS", "the account has no credits left")
        handler = self.routes.get((request.method, request.path))
        if handler is None:
            return failed(404, "NOT_FOUND", f"no route {request.method} /{request.path}")
        if not self.take_claim(request):
            return failed(self.config.hosted_conflict_status, "CONFLICT", "this idempotency key was used already")
        try:
            return await handler(request, self.tenant(request))
        except _BackendRefusalError as refused:
            return refused.response
        except RefusalError as refusal:
            relayed = refusal.relayed()
            return failed(relayed.status, relayed.code, relayed.message)

    def _limited(self, bearer: str) -> int | None:
        """Seconds until a slot frees when `bearer` used its minute's budget, else None (and the request counts)."""
        budget = self.config.rate_limit()
        if budget is None:
            return None
        now = self.config.clock()
        with self.double.lock:
            window = self.windows.setdefault(bearer, deque())
            while window and window[0] <= now - WINDOW_S:
                window.popleft()
            if len(window) >= budget:
                return max(1, math.ceil(window[0] + WINDOW_S - now))
            window.append(now)
        return None

    # -- scopes ---------------------------------------------------------------------------------------

    def _scope(self, scope: object, tenant: str, server_rules: bool = True) -> str:
        """The stored path of a scope the backend accepts; the server's own rules (scope types) when it is
        forwarded there, the backend's `type:id` rule alone for a prefix."""
        if not isinstance(scope, str) or not _BARE.fullmatch(scope):
            raise _BackendRefusalError(failed(400, "BAD_REQUEST", "scope must be type:id segments"))
        if len(scope.split("/")) > HOSTED_SEGMENTS:
            raise _BackendRefusalError(failed(400, "BAD_REQUEST", f"a scope has at most {HOSTED_SEGMENTS} segments"))
        if server_rules:
            check_scope(scope, self.config, HOSTED_SEGMENTS)
        return f"{tenant}/{scope}"

    def shown(self, tenant: str) -> Callable[[str], str]:
        if self.config.expose_tenant_prefix:
            return lambda stored: stored
        return lambda stored: stored.removeprefix(tenant + "/")

    # -- routes ---------------------------------------------------------------------------------------

    async def experience(self, request: Request, tenant: str) -> Response:
        body = request.body
        if not isinstance(body, dict):
            raise _BackendRefusalError(failed(400, "BAD_REQUEST", "the body must be a JSON object"))
        if self.config.hosted_require_body_key and not isinstance(body.get("idempotency_key"), str):
            raise _BackendRefusalError(failed(400, "MISSING_IDEMPOTENCY_KEY", "a write needs a body idempotency_key"))
        stored = self._scope(body.get("scope"), tenant)
        with self.double.lock:
            record, replayed = self.core.experience(body, stored, space=tenant)
        return enveloped({"event_id": record.id, "status": "captured", "replayed_from_idempotency": replayed})

    async def events(self, request: Request, tenant: str) -> Response:
        if len(request.query.get("labels", [])) > 1:
            raise _BackendRefusalError(failed(400, "BAD_REQUEST", "labels is one comma-separated parameter"))
        stored = self._scope(request.one("scope"), tenant)
        with self.double.lock:
            return enveloped(self.core.listing(stored, request.query, self.shown(tenant)))

    async def recall(self, request: Request, tenant: str) -> Response:
        body = check_recall(request.body)
        stored = self._scope(body["scope"], tenant)
        with self.double.lock:
            pack = build_pack(self.double.log, self.config, body, stored)
            multi = (body.get("view") or "holistic") not in ("granular", "local", "raw", "structured")
            return enveloped(pack_answer(pack, self.config, body, self.shown(tenant), multi))

    async def answer(self, request: Request, tenant: str) -> Response:
        body = request.body
        if not isinstance(body, dict) or set(body) - ANSWER_KEYS or body.get("answer_instructions", "") is None:
            raise _BackendRefusalError(failed(400, "VALIDATION_ERROR", "the answer body holds a field it may not"))
        stored = self._scope(body.get("scope"), tenant)
        response = self.double.answer(body, stored, self.shown(tenant))
        if response.status != 200:
            code = response.body.get("error_code", "BAD_REQUEST")
            relayed = RefusalError(response.status, code, str(response.body.get("message"))).relayed()
            return failed(relayed.status, relayed.code, relayed.message)
        return enveloped(response.body)

    async def forget(self, request: Request, tenant: str) -> Response:
        body = request.body
        if not isinstance(body, dict) or not isinstance(body.get("scope"), str):
            raise _BackendRefusalError(failed(400, "BAD_REQUEST", "scope is required"))
        stored = self._scope(body["scope"], tenant)
        with self.double.lock:
            return enveloped(self.core.forget(body, stored))

    async def scopes(self, request: Request, tenant: str) -> Response:
        raw = request.one("limit") or "50"
        if not raw.isdigit() or not 1 <= int(raw) <= 10_000:
            raise _BackendRefusalError(failed(400, "BAD_REQUEST", "limit must be between 1 and 10000"))
        prefix = (request.one("prefix") or "").rstrip("/")
        stored = self._scope(prefix, tenant, server_rules=False) if prefix else None
        with self.double.lock:
            paths = [self.shown(tenant)(s) for s in self.core.scopes(stored, int(raw), within=tenant)]
        if self.config.hosted_scopes_shape == "items":
            return enveloped({"items": [{"path": path} for path in paths]})
        return enveloped({"scopes": paths})

    async def erasure(self, request: Request, tenant: str) -> Response:
        # The backend's own dialect, unwrapped: {"error_code", "message"} on failure.
        body = request.body if isinstance(request.body, dict) else {}
        unknown = sorted(set(body) - {"scope", "audit_note"})
        if unknown:
            return Response(400, {"error_code": "UNKNOWN_FIELD", "message": f"unknown field(s) {', '.join(unknown)}"})
        scope = body.get("scope")
        if not isinstance(scope, str) or not scope.strip("/") or scope.strip("/") == tenant:
            return Response(422, {"error_code": "ROOT_ERASURE_REFUSED", "message": "the tenant root cannot be erased"})
        if self.double.faults.take("erasure_incomplete", request.method, request.path) is not None:
            return Response(502, {"error_code": "ERASURE_INCOMPLETE", "message": "the erasure did not finish"})
        try:
            stored = self._scope(scope, tenant)
        except (_BackendRefusalError, RefusalError):
            return Response(400, {"error_code": "BAD_REQUEST", "message": "scope must be type:id segments"})
        with self.double.lock:
            held = self.core.erase(stored)
            ids = [self.core.new_erasure(stored).erasure_id for _ in range(held)]
        return Response(200, {"erased": True, "scope": scope, "scopes": held, "erasure_ids": ids})

    async def erase_tenant(self, request: Request, tenant: str) -> Response:
        with self.double.lock:
            held = sum(self.core.erase(scope) for scope in self.core.scopes(None, 10**9, within=tenant))
        return enveloped({"erased": True, "scopes": held})
