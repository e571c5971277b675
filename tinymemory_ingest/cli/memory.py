"""Read commands over the configured engine: `recall`, `fetch`, `list`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from tinymemory_ingest.cli.common import ConfigOption, JsonOption, load_settings, reported

if TYPE_CHECKING:
    from engines.contract import Hit, MemoryEngine
    from worker.settings import Settings

T = TypeVar("T")

LimitOption = Annotated[int, typer.Option("--limit", min=1, help="How many results.")]


def _with_engine(settings: Settings, use: Callable[[MemoryEngine], Awaitable[T]]) -> T:
    from worker.wiring import close_engine, open_engine

    with reported():
        engine = open_engine(settings)

        async def run() -> T:
            try:
                return await use(engine)
            finally:
                close_engine(engine)

        return asyncio.run(run())


def _print_hits(hits: list[Hit], as_json: bool, next_cursor: str | None = None) -> None:
    if as_json:
        typer.echo(json.dumps({"hits": [h.model_dump(mode="json") for h in hits], "next_cursor": next_cursor}))
        return
    for hit in hits:
        where = hit.meta.file_path or hit.meta.url or hit.meta.source.id or ""
        tags = f" [{', '.join(hit.meta.tags)}]" if hit.meta.tags else ""
        first_line = " ".join(hit.text.split())[:160]
        typer.echo(f"{hit.score:7.3f}  {where}{tags}\n         {first_line}")


def register_memory_commands(app: typer.Typer) -> None:
    """Add the read commands to `app`."""

    @app.command()
    def recall(
        question: Annotated[str, typer.Argument(help="A question to answer from memory.")],
        limit: LimitOption = 5,
        config: ConfigOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Answer a question from memory, with citations."""
        from engines.contract import RecallRequest

        request = RecallRequest(question=question, limit=limit)
        answer = _with_engine(load_settings(config), lambda engine: engine.recall(request))
        if as_json:
            typer.echo(answer.model_dump_json())
            return
        typer.echo(answer.answer or "(nothing in memory answers that)")
        for n, citation in enumerate(answer.citations, start=1):
            typer.echo(f"  [{n}] {citation.meta.file_path or citation.meta.url or citation.id}")

    @app.command()
    def fetch(
        query: Annotated[str, typer.Argument(help="Words to search for.")],
        mode: Annotated[str, typer.Option(help="keyword, vector or hybrid.")] = "hybrid",
        limit: LimitOption = 10,
        config: ConfigOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Search memory (keyword, vector or hybrid)."""
        from engines.contract import FetchMode, FetchRequest

        try:
            fetch_mode = FetchMode(mode)
        except ValueError:
            raise typer.BadParameter(f"mode must be one of {', '.join(m.value for m in FetchMode)}") from None
        request = FetchRequest(query=query, mode=fetch_mode, limit=limit)
        page = _with_engine(load_settings(config), lambda engine: engine.fetch(request))
        _print_hits(page.hits, as_json, page.next_cursor)

    @app.command("list")
    def list_items(limit: LimitOption = 20, config: ConfigOption = None, as_json: JsonOption = False) -> None:
        """List stored items, oldest first."""
        from engines.contract import ListRequest

        page = _with_engine(load_settings(config), lambda engine: engine.list(ListRequest(limit=limit)))
        _print_hits(page.items, as_json, page.next_cursor)
