"""The API app factory: `create_app(settings, services)`.

The command line builds the app with it: `tinymemory serve` over services opened from the settings (closed
with the app), `tinymemory up` over its running runtime's services (so the API serves exactly what the runtime
ingests). `uvicorn "tinymemory_ingest.api:create_app" --factory` works too, reading the settings from the
environment. Routers are grouped by surface; every failure is answered from one table (`errors`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.routing import Route

from tinymemory_ingest import installed_version
from tinymemory_ingest.api import console, errors
from tinymemory_ingest.api.mcp import McpEndpoint
from tinymemory_ingest.api.metrics import count_requests
from tinymemory_ingest.api.routes import admin, agents, erasure, legacy_imports, memory, ops
from worker.control import Services, TokenStore
from worker.settings import Settings


def create_app(settings: Settings | None = None, services: Services | None = None) -> FastAPI:
    """The API over `services`, else over services opened from `settings` (read from the environment when not
    given either). The caller keeps what it passed in; services the app opened itself close with it."""
    given = services
    if settings is None:
        settings = given.settings if given is not None else Settings.load()
    used = given or Services(settings)
    tokens = TokenStore(settings.token_path)
    mcp = McpEndpoint(used, tokens, installed_version())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp.lifespan():
            yield
        if given is None:
            used.close()

    app = FastAPI(
        title="tinymemory",
        version=installed_version(),
        summary="Recall and fetch over an agent's long-term memory, the memory tools, context.md, and admin.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.services = used
    app.state.tokens = tokens
    errors.install(app)
    count_requests(app)
    for router in (memory.router, agents.router, ops.router, admin.router, erasure.router, legacy_imports.router):
        app.include_router(router, responses=errors.documented_errors())
    # An ASGI endpoint of its own (the MCP transport), not an OpenAPI operation.
    console.install(app)
    app.router.routes.append(Route("/mcp", endpoint=mcp, methods=["GET", "POST", "DELETE"], include_in_schema=False))
    return app
