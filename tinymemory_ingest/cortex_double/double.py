"""`CortexDouble`: an in-memory CortexDB served over real HTTP, with a request log and fault injection
(docs/spec/cortexdb.md §13).

State lives in the object, behind one lock, so a test can inspect and steer it while the server runs in another
thread. The control routes under `/__double__/` (never under `/v1` or `/memory`, and without authentication)
let a benchmark steer a double running in another process.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines.contract import InvalidRequestError
from tinymemory_ingest.cortex_double.checks import RefusalError, invalid
from tinymemory_ingest.cortex_double.config import DoubleConfig, ManualClock
from tinymemory_ingest.cortex_double.core import Core
from tinymemory_ingest.cortex_double.direct import DirectRoutes, failure
from tinymemory_ingest.cortex_double.faults import Faults
from tinymemory_ingest.cortex_double.hosted import HostedRoutes
from tinymemory_ingest.cortex_double.http import Receive, Request, Response, Send, read_body, send_response
from tinymemory_ingest.cortex_double.log import EventLog, EventRecord, Pack
from tinymemory_ingest.cortex_double.packs import answer_of, build_pack, live_pack

CONTROL = "__double__/"
ASGIApp = Callable[[dict[str, Any], Receive, Send], Any]
MAX_INSTRUCTIONS = 4000
_READS = frozenset({"memory/recall", "v1/recall"})


@dataclass
class RecordedRequest:
    """One request as the double saw it (headers without `Authorization`) and the status it answered."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    status: int = 0

    def summary(self) -> dict[str, Any]:
        return {"method": self.method, "path": self.path, "status": self.status}


class CortexDouble:
    """One wire of CortexDB, in memory; `app` is its ASGI application (see `serve` to run it on loopback)."""

    def __init__(self, config: DoubleConfig | None = None, data: Path | None = None) -> None:
        self.config = config or DoubleConfig()
        self.lock = threading.RLock()
        self.log = EventLog(data)
        self.faults = Faults(self.config.clock, self._drop_packs)
        self.core = Core(self.config, self.log, self.faults)
        self.requests: list[RecordedRequest] = []
        self.routes: DirectRoutes | HostedRoutes = HostedRoutes(self) if self.config.hosted else DirectRoutes(self)

    @property
    def app(self) -> ASGIApp:
        return self.__call__

    def request_id(self) -> str:
        with self.lock:
            return f"req_{self.log.next_id('req')}"

    def _drop_packs(self) -> None:
        with self.lock:
            self.log.packs.clear()

    # -- inspection -----------------------------------------------------------------------------------

    def events(self, scope: str | None = None, removed: bool = False) -> list[EventRecord]:
        """Records in append order, of `scope` when given; removed ones only when asked."""
        with self.lock:
            records = self.log.by_scope.get(scope, []) if scope is not None else list(self.log.events.values())
            return [r for r in records if removed or not r.removed]

    def scopes(self) -> list[str]:
        with self.lock:
            return self.log.scopes()

    def packs(self) -> list[Pack]:
        with self.lock:
            return list(self.log.packs.values())

    def reset(self) -> None:
        """Forget every event, key, pack, erasure, fault and logged request (and the data file's contents)."""
        with self.lock:
            self.log.reset()
            self.requests.clear()
            self.faults.clear()
            if isinstance(self.routes, HostedRoutes):
                self.routes.claims.clear()
                self.routes.windows.clear()

    def advance(self, seconds: float) -> None:
        """Move the manual clock (`DoubleConfig(clock=ManualClock())`)."""
        if not isinstance(self.config.clock, ManualClock):
            raise RuntimeError("advance() needs DoubleConfig(clock=ManualClock())")
        self.config.clock.advance(seconds)

    # -- shared behaviour -----------------------------------------------------------------------------

    def answer(self, body: dict[str, Any], stored_scope: object, shown: Callable[[str], str]) -> Response:
        """The answer route of both wires, in Direct's dialect (the hosted wire relays its failures)."""
        try:
            if not isinstance(stored_scope, str) or not isinstance(body.get("question"), str) or not body["question"]:
                raise invalid("answer needs a scope and a question")
            instructions = body.get("answer_instructions")
            if instructions is not None and (not isinstance(instructions, str) or len(instructions) > MAX_INSTRUCTIONS):
                raise invalid(f"answer_instructions is at most {MAX_INSTRUCTIONS} characters")
            with self.lock:
                if "use_pack_id" in body and body["use_pack_id"] is not None:
                    pack = live_pack(self.log, self.config, body["use_pack_id"], stored_scope)
                else:
                    query = {"scope": stored_scope, "query": body["question"], "view": "granular"}
                    pack = build_pack(self.log, self.config, query, stored_scope)
            if not self.config.answer_available:
                raise RefusalError(503, "ANSWER_UNAVAILABLE", "this deployment has no answer model")
        except RefusalError as refusal:
            return failure(refusal, self.request_id())
        return Response(200, answer_of(pack))

    # -- ASGI -----------------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        request = Request.of(scope, await read_body(receive))
        if request.path.startswith(CONTROL):
            response = self._control(request)
        else:
            response = await self._serve(request)
        await send_response(send, response)

    async def _serve(self, request: Request) -> Response:
        headers = {k: v for k, v in request.headers.items() if k != "authorization"}
        recorded = RecordedRequest(request.method, request.path, request.query, headers, request.body)
        with self.lock:
            self.requests.append(recorded)
        faults, method, path = self.faults, request.method, request.path
        held = faults.take("delay", method, path)
        if held is not None:
            await asyncio.sleep(held.seconds)
        if faults.take("drop", method, path) is not None:
            response = Response(200, drop=True)
        elif (rule := faults.take("fail", method, path)) is not None:
            if isinstance(self.routes, HostedRoutes) and rule.after_claim:
                self.routes.take_claim(request)
            response = self.routes.failure(rule.status, rule.code, rule.retry_after)
        else:
            response = await self.routes.handle(request)
            writes = method in ("POST", "DELETE") and path not in _READS
            if writes and (late := faults.take("fail_after_apply", method, path)) is not None:
                response = self.routes.failure(late.status, "UPSTREAM_UNAVAILABLE")
            if faults.take("truncate", method, path) is not None:
                response.truncate = True
        recorded.status = response.status
        return response

    def _control(self, request: Request) -> Response:
        name = request.path[len(CONTROL) :]
        try:
            if request.method == "POST" and name == "faults":
                self.faults.apply(request.body)
                return Response(200, {"ok": True})
            if request.method == "POST" and name == "reset":
                self.reset()
                return Response(200, {"ok": True})
            if request.method == "GET" and name == "requests":
                start = int(request.one("since") or 0)
                with self.lock:
                    return Response(200, {"requests": [r.summary() for r in self.requests[start:]]})
            if request.method == "GET" and name == "events":
                scope = request.one("scope")
                return Response(200, {"events": [r.entry() for r in self.events(scope)]})
        except (InvalidRequestError, ValueError) as err:
            return Response(400, {"error": str(err)})
        return Response(404, {"error": f"no control route {request.method} /{request.path}"})


def make_app(config: DoubleConfig | None = None, data: Path | None = None) -> ASGIApp:
    """The ASGI application of a new double (its state reachable only through the control routes)."""
    return CortexDouble(config, data).app
