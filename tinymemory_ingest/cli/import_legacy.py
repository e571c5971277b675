"""`tinymemory import-legacy PATH` and `tinymemory import-legacy-status`: a v1 TinyCortex workspace imported
here with a live progress bar, or queued for the workers (`--queue`), and its record read back.

The import keeps its record (and checkpoint) in the data directory, so running the same command again after
an interruption resumes where it stopped; `--restart` starts over.
"""

from __future__ import annotations

import asyncio
import json
import time
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tinymemory_ingest.cli.common import ConfigOption, JsonOption, fail, load_settings

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from worker.legacy.job import LegacyImportRecord, LegacyImportRequest
    from worker.settings import Settings

SHOWN_REASONS = 12
"""Skip reasons a summary lists one by one (the record holds them all)."""


def add_legacy_commands(app: typer.Typer) -> None:
    """Add `import-legacy` and `import-legacy-status` to `app`."""

    @app.command("import-legacy")
    def import_legacy(
        path: Annotated[Path, typer.Argument(help="The folder of a v1 TinyCortex workspace (read, never written).")],
        engine: Annotated[str | None, typer.Option(help="Engine id to import into (default: the configured).")] = None,
        namespace: Annotated[
            str | None, typer.Option(help="Store every item under this namespace, e.g. team:acme (default: root).")
        ] = None,
        restart: Annotated[bool, typer.Option("--restart", help="Ignore the checkpoint and start over.")] = False,
        queue: Annotated[bool, typer.Option("--queue", help="Run it on the workers' tm.backfill queue.")] = False,
        config: ConfigOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Import a v1 TinyCortex workspace, resumably, then print what was stored, replayed and skipped."""
        from worker.legacy.job import LegacyImportRequest

        settings = load_settings(config)
        request = LegacyImportRequest(path=str(path), namespace=namespace, engine=engine, restart=restart)
        if queue:
            raise typer.Exit(_queue(settings, request, as_json))
        raise typer.Exit(asyncio.run(run_import(settings, request, as_json)))

    @app.command("import-legacy-status")
    def import_legacy_status(
        import_id: Annotated[str | None, typer.Argument(help="An import's id (default: every import).")] = None,
        config: ConfigOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Show legacy imports: where each stands, what it stored, replayed and skipped."""
        from engines.contract import Error
        from worker.legacy.job import LegacyImports

        records = LegacyImports(load_settings(config).data_dir)
        try:
            shown = [records.require(import_id)] if import_id else records.all()
        except Error as err:
            raise fail(err.message) from err
        if as_json:
            typer.echo(json.dumps([record.model_dump(mode="json") for record in shown]))
            return
        for record in shown:
            _print_record(record)


async def run_import(settings: Settings, request: LegacyImportRequest, as_json: bool) -> int:
    """Import here; 0 once it completed, 2 (after one line on stderr) when it could not go on."""
    from engines.contract import Error
    from pipeline.legacy import MigrationFailed
    from worker.legacy.job import LegacyImports, import_legacy
    from worker.tuning import collect_less
    from worker.wiring import close_engine, legacy_import_settings, open_engine, open_state

    collect_less()
    engine_id = request.engine or settings.engine
    started = time.perf_counter()
    progress = BarProgress(quiet=as_json)
    try:
        engine = open_engine(settings.model_copy(update={"engine": engine_id}))
        state = open_state(settings)
        try:
            job = legacy_import_settings(settings, in_task=False)
            records = LegacyImports(settings.data_dir)
            record = await import_legacy(
                request, engine, engine_id, records, settings=job, progress=progress, erasures=state
            )
        finally:
            progress.close()
            state.close()
            close_engine(engine)
    except MigrationFailed as err:
        _console().print(f"[red]error:[/] {_escape(err.message)}\nrun the same command again to resume")
        return 2
    except Error as err:
        _console().print(f"[red]error:[/] {_escape(err.message)}")
        return 2
    _print_summary(record, time.perf_counter() - started, as_json)
    return 0


class BarProgress:
    """An `ImportProgress` feeding a rich bar, shown once the workspace is open: items done of those planned,
    rows read, stored, replayed, skipped, and the rate."""

    def __init__(self, quiet: bool) -> None:
        self.bar = _bar(quiet)
        self.task: TaskID | None = None
        self.started_at = time.monotonic()
        self.first = 0

    def started(self, record: LegacyImportRecord) -> None:
        self.first = record.items
        self.bar.start()
        self.task = self.bar.add_task(
            "import", total=record.planned, rows=0, stored=record.stored, replayed=record.replayed, skipped=0, rate=""
        )

    def advanced(self, record: LegacyImportRecord) -> None:
        if self.task is None:
            return
        elapsed = time.monotonic() - self.started_at
        done = record.items - self.first
        rate = f" · {done / elapsed:,.0f} items/s" if elapsed > 0.5 else ""
        self.bar.update(
            self.task,
            completed=done,
            rows=record.rows_read,
            stored=record.stored,
            replayed=record.replayed,
            skipped=record.skipped_rows,
            rate=rate,
        )

    def close(self) -> None:
        if self.task is not None:
            self.bar.stop()


def _bar(quiet: bool) -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(
            "· {task.fields[rows]} rows read · {task.fields[stored]} stored · {task.fields[replayed]} "
            "replayed · {task.fields[skipped]} skipped{task.fields[rate]}"
        ),
        TimeElapsedColumn(),
        console=_console(),
        disable=quiet,
        transient=False,
    )


def _print_summary(record: LegacyImportRecord, seconds: float, as_json: bool) -> None:
    if as_json:
        print(json.dumps(record.model_dump(mode="json")))
        return
    console = _console()
    rate = f" ({record.items / seconds:,.0f} items/s)" if seconds > 0 else ""
    console.print(
        f"[green]done[/] in {seconds:.1f} s{rate}: {record.rows_read} rows read; {record.stored} items stored, "
        f"{record.replayed} replayed; {record.skipped_rows} rows skipped"
    )
    _print_reasons(record)


def _print_record(record: LegacyImportRecord) -> None:
    console = _console()
    console.print(
        f"{record.id} [bold]{record.status}[/] {_escape(record.workspace)} → {record.engine} ({record.namespace}): "
        f"{record.items} of ~{record.planned if record.planned is not None else '?'} items, {record.stored} stored, "
        f"{record.replayed} replayed, {record.skipped_rows} rows skipped; {record.runs} runs, "
        f"updated {record.updated_at:%Y-%m-%d %H:%M:%S} UTC"
    )
    if record.error:
        console.print(f"  [red]error:[/] {_escape(record.error)}")
    _print_reasons(record)


def _print_reasons(record: LegacyImportRecord) -> None:
    console = _console()
    reasons = sorted(record.skipped.items(), key=lambda pair: (-pair[1], pair[0]))
    for reason, count in reasons[:SHOWN_REASONS]:
        console.print(f"  skipped {count} × {_escape(reason)}")
    if len(reasons) > SHOWN_REASONS:
        console.print(f"  and {len(reasons) - SHOWN_REASONS} more reasons (tinymemory import-legacy-status --json)")


def _queue(settings: Settings, request: LegacyImportRequest, as_json: bool) -> int:
    """Queue the import for the workers; they read PATH, so it must be the same path where they run."""
    from engines.contract import Error
    from worker.cluster.celery_app import create_app
    from worker.legacy.tasks import queue_legacy_import

    try:
        record = queue_legacy_import(create_app(settings), settings, request)
    except Error as err:
        raise fail(err.message) from err
    if as_json:
        print(json.dumps(record.model_dump(mode="json")))
    else:
        _console().print(f"queued {record.id}; follow it with: tinymemory import-legacy-status {record.id}")
    return 0


@cache
def _console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
