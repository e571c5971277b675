"""`tinymemory sources …` and `tinymemory dlq …`: the source registry and the dead letters, on the configured
state store (SQLite embedded, or Redis for the distributed pipeline), through `worker.control`."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated

import typer

from tinymemory_ingest.cli.common import ConfigOption, JsonOption, opened_services

if TYPE_CHECKING:
    from worker.records import SyncOutcome

SourceOption = Annotated[str | None, typer.Option("--source", help="Only this source.")]


def describe_sync(outcome: SyncOutcome) -> str:
    """One line for what asking for a sync did."""
    if outcome.report is not None:
        return f"synced: {outcome.report.upserts} changed, {outcome.report.deletes} deleted"
    if outcome.status == "queued":
        return "queued"
    return "already queued or running; it will run again right after"


def register_source_commands(app: typer.Typer) -> None:
    """Add the `sources` and `dlq` groups to `app`."""
    sources = typer.Typer(help="The sources memory is kept in sync with.", no_args_is_help=True)
    dlq = typer.Typer(help="Dead letters: units that could not be ingested, and why.", no_args_is_help=True)
    app.add_typer(sources, name="sources")
    app.add_typer(dlq, name="dlq")
    _add_command(sources)
    _read_commands(sources)
    _change_commands(sources)
    _dead_letter_commands(dlq)


def _add_command(group: typer.Typer) -> None:
    @group.command("add")
    def add(
        kind: Annotated[str, typer.Argument(help="The kind of source: `tinymemory sources kinds` lists them.")],
        target: Annotated[str, typer.Argument(help="A path (folder, file) or a URL (link, github, rss).")],
        source_id: Annotated[
            str | None, typer.Option("--id", help="The source's id (default: from the target).")
        ] = None,
        namespace: Annotated[str | None, typer.Option(help="The namespace its items go to, e.g. team:acme.")] = None,
        interval: Annotated[float | None, typer.Option(help="Poll every this many seconds (beat).")] = None,
        include: Annotated[list[str] | None, typer.Option(help="Only files matching this glob (repeatable).")] = None,
        sitemap: Annotated[bool, typer.Option("--sitemap", help="link: the URL is a sitemap of pages.")] = False,
        branch: Annotated[str | None, typer.Option(help="github: the branch (default: the repo's).")] = None,
        extras: Annotated[
            str | None, typer.Option("--with", help="github: also issues, prs and/or commits (comma-separated).")
        ] = None,
        token_env: Annotated[
            str | None, typer.Option(help="github: the environment variable holding the token.")
        ] = None,
        max_items: Annotated[int | None, typer.Option(help="rss: the most entries read from the feed.")] = None,
        max_commits: Annotated[int | None, typer.Option(help="github: the most commits read (--with commits).")] = None,
        max_issues: Annotated[int | None, typer.Option(help="github: the most issues read (--with issues).")] = None,
        max_prs: Annotated[int | None, typer.Option(help="github: the most pull requests read (--with prs).")] = None,
        config: ConfigOption = None,
    ) -> None:
        """Register a source; prints its id."""
        from pydantic import ValidationError

        from sources import SourceRequest
        from worker import control

        try:
            request = SourceRequest(
                kind=kind,
                target=target,
                id=source_id,
                namespace=namespace,
                interval_s=interval,
                include=include or [],
                sitemap=sitemap,
                branch=branch,
                extras=[part.strip() for part in (extras or "").split(",") if part.strip()],
                token_env=token_env,
                max_items=max_items,
                max_commits=max_commits,
                max_issues=max_issues,
                max_prs=max_prs,
            )
        except ValidationError as err:
            raise typer.BadParameter(str(err.errors()[0]["msg"])) from err
        with opened_services(config) as services:
            entry = control.add_source(services.state(), request)
        typer.echo(entry.id)


def _read_commands(group: typer.Typer) -> None:
    @group.command("kinds")
    def kinds(config: ConfigOption = None, as_json: JsonOption = False) -> None:
        """The kinds of source: what each reads, and whether this build offers it."""
        from worker import control

        with opened_services(config):  # registers the kinds the settings name
            offered = control.source_kinds()
        if as_json:
            typer.echo(json.dumps([kind.model_dump() for kind in offered]))
            return
        for kind in offered:
            what = f"{kind.target}: {kind.summary}" if kind.available else "not available in this build yet"
            typer.echo(f"{kind.name:<13} {what}")

    @group.command("list")
    def list_sources(config: ConfigOption = None, as_json: JsonOption = False) -> None:
        """List the registered sources."""
        from worker import control

        with opened_services(config) as services:
            entries = control.list_sources(services.state())
        if as_json:
            typer.echo(json.dumps([e.model_dump(mode="json") for e in entries]))
            return
        for entry in entries:
            typer.echo(f"{entry.id}  {entry.kind}  {entry.label}{'' if entry.enabled else '  (disabled)'}")

    @group.command("show")
    def show(source_id: str, config: ConfigOption = None, as_json: JsonOption = False) -> None:
        """A source's settings, units and last sync."""
        from worker import control

        with opened_services(config) as services:
            detail = control.show_source(services.state(), source_id)
        typer.echo(json.dumps(detail.model_dump(mode="json"), indent=None if as_json else 2))


def _change_commands(group: typer.Typer) -> None:
    @group.command("rm")
    def remove(
        source_id: str,
        keep_items: Annotated[bool, typer.Option(help="Keep what it stored in memory.")] = False,
        config: ConfigOption = None,
    ) -> None:
        """Unregister a source and (unless --keep-items) forget the items it stored."""
        from worker import control

        with opened_services(config) as services:
            engine = None if keep_items else services.engine()
            removal = asyncio.run(control.remove_source(services.state(), engine, source_id, keep_items=keep_items))
        typer.echo(f"removed {removal.source_id}; {removal.forgotten} items forgotten")

    @group.command("sync")
    def sync(source_id: str, config: ConfigOption = None) -> None:
        """Sync a source now (queued for workers with Redis state; run here when embedded)."""
        from worker import control

        with opened_services(config) as services:
            state = services.state()
            control.get_source(state, source_id)
            outcome = asyncio.run(control.sync_now(state, services.runner(), source_id))
        typer.echo(describe_sync(outcome))


def _dead_letter_commands(group: typer.Typer) -> None:
    @group.command("list")
    def dlq_list(
        source: SourceOption = None,
        limit: Annotated[int, typer.Option(min=1)] = 100,
        config: ConfigOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """List dead letters, newest first."""
        from worker import control

        with opened_services(config) as services:
            letters = control.dead_letters(services.state(), source, limit=limit)
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
        from worker import control

        with opened_services(config) as services:
            replays = asyncio.run(control.replay_dead_letters(services.state(), services.runner(), source))
        for done in replays:
            typer.echo(f"{done.source_id}: {len(done.units)} units, {describe_sync(done.sync)}")
        if not replays:
            typer.echo("no dead letters")

    @group.command("purge")
    def purge(source: SourceOption = None, config: ConfigOption = None) -> None:
        """Delete dead letters without retrying them."""
        from worker import control

        with opened_services(config) as services:
            purged = control.purge_dead_letters(services.state(), source)
        typer.echo(f"{purged} dead letters purged")
