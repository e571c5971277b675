"""`tinymemory mcp`: the memory tools over MCP on standard input and output, for a desktop agent.

The scope is fixed for the session: by a token of the tokens file (its place, reach and rights), or by flags.
Nothing but MCP messages goes to standard output; messages for people go to standard error.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from tinymemory_ingest.cli.common import ConfigOption, fail, load_settings, reported


def register_mcp_command(app: typer.Typer) -> None:
    @app.command()
    def mcp(
        place: Annotated[str, typer.Option(help="The namespace the tools write to, e.g. user:alice.")] = "",
        reach: Annotated[str, typer.Option(help="How far reads reach from it: inherit, exact, subtree.")] = "inherit",
        read_only: Annotated[bool, typer.Option("--read-only", help="Offer no store or forget.")] = False,
        token: Annotated[
            str | None, typer.Option(help="Take the scope of this token of the tokens file instead.", envvar=None)
        ] = None,
        config: ConfigOption = None,
    ) -> None:
        """Serve the seven memory tools over MCP (stdio), under one scope, until the client closes."""
        from engines.contract import Namespace
        from engines.tools import ToolScope
        from engines.tools.mcp import serve_stdio
        from worker import control
        from worker.token_store import reach_for
        from worker.wiring import close_engine, open_engine, open_state

        settings = load_settings(config)
        with reported():
            if token is not None:
                caller = control.authenticate(control.TokenStore(settings.token_path), token)
                if caller.name is None:
                    raise fail("--token needs a tokens file with that token; `tinymemory tokens add` makes one")
                scope = ToolScope(place=caller.place, reach=caller.reach, writes=caller.writes)
            else:
                if reach not in ("inherit", "exact", "subtree"):
                    raise typer.BadParameter("reach must be one of inherit, exact, subtree")
                at = Namespace.parse(place)
                scope = ToolScope(place=at, reach=reach_for(at, reach), writes=not read_only)  # type: ignore[arg-type]
            engine = open_engine(settings)
            state = open_state(settings)  # its tombstones: a store into what was erased is refused
        try:
            asyncio.run(serve_stdio(control.guarded_tools(state, engine, scope)))
        finally:
            state.close()
            close_engine(engine)
