"""The agent surfaces: the seven memory tools (`/v1/tools`) and the compiled brief (`/v1/context.md`).

Both run under the bearer token's scope: writes land at its place, reads stay within its reach, and a
read-only token is offered no write tool (and refused one with 403). A store where an erasure covers what it
would store (the place or an account above it, for that kind) is refused with 409: erased stays erased.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import PlainTextResponse, Response

from engines.tools import WRITE_TOOL_NAMES, ContextSpec, MemoryTools, ToolScope, ToolSpec, compile_context
from tinymemory_ingest.api.auth import CallerDep, ServicesDep
from tinymemory_ingest.api.errors import ForbiddenError
from worker import control
from worker.control import Caller, Services

router = APIRouter(prefix="/v1", tags=["agents"])


def tools_for(caller: Caller, services: Services) -> MemoryTools:
    """The memory tools under the caller's scope (its place, its reach, its right to write), refusing a store
    into what an erasure covers."""
    scope = ToolScope(place=caller.place, reach=caller.reach, writes=caller.writes)
    return control.guarded_tools(services.state(), services.engine(), scope)


@router.get("/tools", response_model=list[ToolSpec])
async def list_tools(caller: CallerDep, services: ServicesDep) -> list[dict[str, Any]]:
    """The tools this token may call, with their frozen JSON Schemas, ready to hand to a model."""
    return [spec.model_dump(mode="json") for spec in tools_for(caller, services).specs()]


@router.post("/tools/{name}", responses={200: {"content": {"application/json": {}}}})
async def call_tool(
    name: str,
    caller: CallerDep,
    services: ServicesDep,
    arguments: Annotated[dict[str, Any] | None, Body(description="The model's arguments, a JSON object.")] = None,
) -> Response:
    """Run one tool with the model's arguments; the answer is the tool's result, compact JSON."""
    if name in WRITE_TOOL_NAMES and not caller.writes:
        raise ForbiddenError(f"{name}: token {caller.name!r} is read-only: it cannot store or forget")
    result = await tools_for(caller, services).call(name, arguments)
    return Response(result, media_type="application/json")


class MarkdownResponse(PlainTextResponse):
    """Markdown text; the OpenAPI schema names it as such (Starlette adds `charset=utf-8`)."""

    media_type = "text/markdown"


@router.get("/context.md", response_class=MarkdownResponse)
async def context_md(
    caller: CallerDep,
    services: ServicesDep,
    budget_tokens: Annotated[int, Query(ge=1, le=100_000, description="The brief's size, in tokens.")] = 1500,
) -> MarkdownResponse:
    """The brief a host injects at the start of an agent's run, compiled within the token's reach."""
    document = await compile_context(services.engine(), ContextSpec(budget_tokens=budget_tokens, reach=caller.reach))
    headers = {"X-Context-Tokens": str(document.tokens)}
    return MarkdownResponse(document.markdown, headers=headers)
