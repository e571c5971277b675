"""The API app factory: `uvicorn "api.app:create_app" --factory` (`tinymemory serve`), or the app `tinymemory up`
starts beside its runtime.

The app serves the engine its services hold: the ones shared with this process (`worker.control.share`,
which `up` does so the API serves exactly what it ingests), or ones opened from the settings and closed with
the app. Routers are grouped by surface; every failure is answered from one table (`api.errors`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI
from starlette.routing import Route

from api import console, errors
from api.mcp import McpEndpoint
from api.metrics import count_requests
from api.routes import admin, agents, erasures, legacy, memory, ops
from worker.control import Services, TokenStore, served
from worker.settings import Settings

DISTRIBUTION = "tinymemory-ingest"


def _version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def create_app(settings: Settings | None = None, services: Services | None = None) -> FastAPI:
    """The API over `services` (else the shared ones, else opened from `settings`, read from the environment
    when not given). Services the app opened itself are closed when it shuts down."""
    given = services or served()
    if settings is None:
        settings = given.settings if given is not None else Settings.load()
    used = given or Services(settings)
    tokens = TokenStore(settings.token_path)
    mcp = McpEndpoint(used, tokens, _version())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp.lifespan():
            yield
        if given is None:
            used.close()

    app = FastAPI(
        title="tinymemory",
        version=_version(),
        summary="Recall and fetch over an agent's long-term memory, the memory tools, context.md, and admin.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.services = used
    app.state.tokens = tokens
    errors.install(app)
    count_requests(app)
    for router in (memory.router, agents.router, ops.router, admin.router, erasures.router, legacy.router):
        app.include_router(router, responses=errors.documented_errors())
    # An ASGI endpoint of its own (the MCP transport), not an OpenAPI operation.
    console.install(app)
    app.router.routes.append(Route("/mcp", endpoint=mcp, methods=["GET", "POST", "DELETE"], include_in_schema=False))
    return app
