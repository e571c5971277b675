"""The HTTP surface over the memory engine: the contract's reads, the agent tools, `context.md`, admin and
erasure routes, MCP at `/mcp`, and the web console at `/`. `create_app` builds it."""

from tinymemory_ingest.api.app import create_app

__all__ = ["create_app"]
