"""The seven memory tools over the Model Context Protocol, with the official `mcp` SDK.

`mcp_server(tools_for)` is a low-level MCP server offering exactly `MemoryTools.specs()` (the frozen schemas
as each tool's input schema) and running `MemoryTools.call` for each call. `tools_for` gives the tools for a
request, so a host fixes the scope per caller (the API from the bearer token of each HTTP request; the
command line once, for a stdio session). A refusal or an engine's error is a tool result marked as an error,
carrying the contract's message, as MCP asks: the model reads it and can correct its call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from engines.contract import Error
from engines.tools.memory import MemoryTools

ToolsFor = Callable[[ServerRequestContext[Any, Any]], MemoryTools]
"""The tools one request may use: the host's scope for its caller."""

SERVER_NAME = "tinymemory"


def mcp_server(tools_for: ToolsFor, *, version: str = "") -> Server[Any]:
    """An MCP server whose tools are the memory tools `tools_for` gives each request."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        specs = tools_for(ctx).specs()
        return types.ListToolsResult(
            tools=[types.Tool(name=s.name, description=s.description, input_schema=s.parameters) for s in specs]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            result = await tools_for(ctx).call(params.name, dict(params.arguments or {}))
        except Error as err:
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(err))], is_error=True)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result)], structured_content=json.loads(result)
        )

    return Server(
        SERVER_NAME,
        version=version,
        instructions="Long-term memory: recall answers, fetch and list memories, store and forget them.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(tools: MemoryTools, *, version: str = "") -> None:
    """Serve `tools` to one MCP client over standard input and output, until it closes them."""
    server = mcp_server(lambda _: tools, version=version)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
