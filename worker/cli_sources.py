"""`tinymemory sources …` and `tinymemory dlq …`: the source registry and the dead letters, on the
configured state store (SQLite embedded, or Redis for the distributed pipeline)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from worker.settings import Settings
    from worker.state import StateStore

LoadSettings = Callable[[Path | None], "Settings"]
ConfigOption = Annotated[Path | None, typer.Option("--config", help="A TOML settings file.", show_default=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
SourceOption = Annotated[str | None, typer.Option("--source", help="Only this source.")]

# The kinds a person types, and the configured kind each becomes (spec §1.2).
KINDS = {
    "folder": "folder",
    "file": "file",
    "link": "web_page",
    "github": "github_repo",
    "rss": "rss_feed",
    "conversation": "conversation",
}


@contextmanager
def _state(settings: Settings) -> Iterator[StateStore]:
    from worker.stores import close_state, open_state

    state = open_state(settings)
    try:
        yield state
    finally:
        close_state(state)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _sync(settings: Settings, source_id: str, hints: list[str] | None = None) -> str:
    """Sync a source: queued for workers (Redis state) or run here (embedded); says which."""
    if settings.state == "redis":
        from worker.celery_app import create_app
        from worker.cluster import enqueue_sync
        from worker.leases import Leases
        from worker.redis_client import redis_from_url

        leases = Leases(redis_from_url(settings.redis_url), prefix=settings.redis_prefix)
        queued = enqueue_sync(create_app(settings), leases, settings, source_id, hints=hints)
        return "queued" if queued else "already queued or running; it will run again right after"
    from worker.embedded import EmbeddedRuntime

    with EmbeddedRuntime(settings) as runtime:
        report, _ = asyncio.run(runtime.sync(source_id, set(hints) if hints else None))
    return f"synced: {report.upserts} changed, {report.deletes} deleted"


def register_source_commands(app: typer.Typer, load_settings: LoadSettings) -> None:
    """Add the `sources` and `dlq` groups to `app`."""
    sources = typer.Typer(help="The sources memory is kept in sync with.", no_args_is_help=True)
    dlq = typer.Typer(help="Dead letters: units that could not be ingested, and why.", no_args_is_help=True)
    app.add_typer(sources, name="sources")
    app.add_typer(dlq, name="dlq")
    _sources(sources, load_settings)
    _dead_letters(dlq, load_settings)


def _sources(group: typer.Typer, load_settings: LoadSettings) -> None:
    _add_command(group, load_settings)
    _read_commands(group, load_settings)
    _change_commands(group, load_settings)


def _add_command(group: typer.Typer, load_settings: LoadSettings) -> None:
    @group.command("add")
    def add(
        kind: Annotated[str, typer.Argument(help=f"One of {', '.join(KINDS)}.")],
        target: Annotated[str, typer.Argument(help="A path (folder, file) or a URL (link, github, rss).")],
        source_id: Annotated[
            str | None, typer.Option("--id", help="The source's id (default: from the target).")
        ] = None,
        namespace: Annotated[str | None, typer.Option(help="The namespace its items go to, e.g. team:acme.")] = None,
        interval: Annotated[float | None, typer.Option(help="Poll every this many seconds (beat).")] = None,
        include: Annotated[list[str] | None, typer.Option(help="Only files matching this glob (repeatable).")] = None,
        config: ConfigOption = None,
    ) -> None:
        """Register a source (folder and file work now; the network kinds join with their readers)."""
        from pydantic import ValidationError

        from worker.embedded import source_id_for
        from worker.model import SourceEntry

        if kind not in KINDS:
            raise typer.BadParameter(f"kind must be one of {', '.join(KINDS)}")
        if kind not in ("folder", "file"):
            raise _fail(f"{kind} sources are not available in this build yet; folder and file are")
        path = Path(target).expanduser()
        if not path.exists():
            raise _fail(f"{target} does not exist")
        if (kind == "folder") != path.is_dir():
            raise _fail(f"{target} is {'not ' if kind == 'folder' else ''}a folder")
        try:
            entry = SourceEntry(
                id=source_id or source_id_for(path),
                kind=KINDS[kind],
                label=str(path),
                path=os.path.realpath(path),
                namespace=namespace,
                interval_s=interval,
                include=include or [],
            )
        except ValidationError as err:
            raise _fail(str(err.errors()[0]["msg"])) from err
        with _state(load_settings(config)) as state:
            state.put_source(entry)
        typer.echo(entry.id)


def _read_commands(group: typer.Typer, load_settings: LoadSettings) -> None:
    @group.command("list")
    def list_sources(config: ConfigOption = None, as_json: JsonOption = False) -> None:
        """List the registered sources."""
        with _state(load_settings(config)) as state:
            entries = state.list_sources()
        if as_json:
            typer.echo(json.dumps([e.model_dump(mode="json") for e in entries]))
            return
        for entry in entries:
            typer.echo(f"{entry.id}  {entry.kind.value}  {entry.label}{'' if entry.enabled else '  (disabled)'}")

    @group.command("show")
    def show(source_id: str, config: ConfigOption = None, as_json: JsonOption = False) -> None:
        """A source's settings, units and last sync."""
        with _state(load_settings(config)) as state:
            entry = state.get_source(source_id)
            if entry is None:
                raise _fail(f"no source {source_id!r}")
            last = state.last_sync(source_id)
            shown = {
                "source": entry.model_dump(mode="json"),
                "units": len(state.unit_states(source_id)),
                "last_sync": last.model_dump(mode="json") if last else None,
                "dead_letters": len(state.dead_letters(source_id)),
            }
        typer.echo(json.dumps(shown, indent=None if as_json else 2))


def _change_commands(group: typer.Typer, load_settings: LoadSettings) -> None:
    @group.command("rm")
    def remove(
        source_id: str,
        keep_items: Annotated[bool, typer.Option(help="Keep what it stored in memory.")] = False,
        config: ConfigOption = None,
    ) -> None:
        """Unregister a source and (unless --keep-items) forget the items it stored."""
        settings = load_settings(config)
        with _state(settings) as state:
            if state.get_source(source_id) is None:
                raise _fail(f"no source {source_id!r}")
            forgotten = 0 if keep_items else _forget_source(settings, source_id)
            state.remove_source(source_id)
        typer.echo(f"removed {source_id}; {forgotten} items forgotten")

    @group.command("sync")
    def sync(source_id: str, config: ConfigOption = None) -> None:
        """Sync a source now (queued for workers with Redis state; run here when embedded)."""
        settings = load_settings(config)
        with _state(settings) as state:
            if state.get_source(source_id) is None:
                raise _fail(f"no source {source_id!r}")
        typer.echo(_sync(settings, source_id))


def _forget_source(settings: Settings, source_id: str) -> int:
    from engines.contract import ForgetTarget, MetaFilter, Namespace, Reach
    from worker.stores import close_engine, open_engine

    engine = open_engine(settings)

    async def forget() -> int:
        # Every node, sandboxes included: the source's items may have been placed anywhere.
        scope = MetaFilter(source_id=source_id, reach=Reach(at=Namespace.ROOT, inherit=False, descendants=True))
        report = await engine.forget(ForgetTarget.by_filter(scope))
        return report.forgotten

    try:
        return asyncio.run(forget())
    finally:
        close_engine(engine)


def _dead_letters(group: typer.Typer, load_settings: LoadSettings) -> None:
    @group.command("list")
    def dlq_list(
        source: SourceOption = None,
        limit: Annotated[int, typer.Option(min=1)] = 100,
        config: ConfigOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """List dead letters, newest first."""
        with _state(load_settings(config)) as state:
            letters = state.dead_letters(source, limit=limit)
        if as_json:
            typer.echo(json.dumps([letter.model_dump(mode="json") for letter in letters]))
            return
        if not letters:
            typer.echo("no dead letters")
        for letter in letters:
            typer.echo(f"{letter.source_id}  {letter.unit_id}  [{letter.stage}] {letter.error}: {letter.message}")

    @group.command("replay")
    def replay(source: SourceOption = None, config: ConfigOption = None) -> None:
        """Try the dead-lettered units again: clear their letters and sync their sources."""
        settings = load_settings(config)
        with _state(settings) as state:
            letters = state.dead_letters(source, limit=100_000)
            by_source: dict[str, list[str]] = {}
            for letter in letters:
                by_source.setdefault(letter.source_id, []).append(letter.unit_id)
            for source_id, units in by_source.items():
                state.clear_dead_letters(source_id, units)
        for source_id, units in sorted(by_source.items()):
            typer.echo(f"{source_id}: {len(units)} units, {_sync(settings, source_id)}")
        if not by_source:
            typer.echo("no dead letters")

    @group.command("purge")
    def purge(source: SourceOption = None, config: ConfigOption = None) -> None:
        """Delete dead letters without retrying them."""
        with _state(load_settings(config)) as state:
            typer.echo(f"{state.purge_dead_letters(source)} dead letters purged")
