"""MCP over streamable HTTP at `/mcp`: the seven memory tools, under each request's bearer token.

Every HTTP request is authenticated as the other routes are (401 and 403 answered here, in the API's error
shape, before MCP sees it); the caller's scope then fixes the tools the MCP server offers and runs for that
request, a store into what an erasure covers included (a tool error carrying the refusal). The session
manager is stateless: each request carries what it needs, so any API process answers it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from engines.contract import Error
from engines.tools import MemoryTools
from engines.tools.mcp import mcp_server
from tinymemory_ingest.api.auth import caller_of
from tinymemory_ingest.api.errors import error_response
from tinymemory_ingest.api.routes.agents import tools_for
from worker.control import Caller, Services, TokenStore

_CALLER: Final = "tm.caller"


class McpEndpoint:
    """The ASGI endpoint of `/mcp`; run `lifespan()` around the app's life."""

    def __init__(self, services: Services, tokens: TokenStore, version: str) -> None:
        self.services = services
        self.tokens = tokens
        self.manager = StreamableHTTPSessionManager(
            app=mcp_server(self._tools_for, version=version), stateless=True, json_response=True
        )

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with self.manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            caller = caller_of(Request(scope))
        except Error as err:
            await error_response(err)(scope, receive, send)
            return
        scope[_CALLER] = caller
        await self.manager.handle_request(scope, receive, send)

    def _tools_for(self, ctx: ServerRequestContext[Any, Any]) -> MemoryTools:
        request = ctx.request
        caller = request.scope.get(_CALLER) if isinstance(request, Request) else None
        if not isinstance(caller, Caller):
            raise RuntimeError("an MCP request reached the tools without an authenticated caller")
        return tools_for(caller, self.services)
