"""The `tinymemory` command line: parse, build settings, call `worker.control`, a job, or start a process.

Heavy modules (the engines, the pipeline) are imported inside the commands, so `--help` and a re-sync of an
unchanged folder start quickly.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

from tinymemory_ingest import DISTRIBUTION, installed_version
from tinymemory_ingest.cli.cluster import register_cluster_commands
from tinymemory_ingest.cli.common import ConfigOption, JsonOption, load_settings
from tinymemory_ingest.cli.dev import add_dev_commands
from tinymemory_ingest.cli.erase import register_erase_commands
from tinymemory_ingest.cli.import_legacy import add_legacy_commands
from tinymemory_ingest.cli.mcp import register_mcp_command
from tinymemory_ingest.cli.memory import register_memory_commands
from tinymemory_ingest.cli.sources import register_source_commands
from tinymemory_ingest.cli.tokens import register_token_commands

app = typer.Typer(
    name="tinymemory",
    help="Keep an AI agent's long-term memory in sync with the places its knowledge lives.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main() -> None:
    """Keep an AI agent's long-term memory in sync with the places its knowledge lives."""


@app.command()
def version() -> None:
    """Print the installed version."""
    typer.echo(f"{DISTRIBUTION} {installed_version()}")


@app.command()
def config(config: ConfigOption = None) -> None:
    """Print the effective settings as JSON, secrets masked."""
    typer.echo(json.dumps(load_settings(config).printable(), indent=2))


@app.command()
def ingest(
    path: Annotated[Path, typer.Argument(help="A folder or a file to ingest.")],
    config: ConfigOption = None,
    as_json: JsonOption = False,
    wait_vectors: Annotated[
        bool,
        typer.Option(help="Wait for the background vectors, so vector search finds everything on return."),
    ] = True,
) -> None:
    """Ingest a folder or file once, with progress, then print a summary."""
    from tinymemory_ingest.cli.ingest import run_ingest

    raise typer.Exit(asyncio.run(run_ingest(load_settings(config), path, as_json, wait_vectors=wait_vectors)))


@app.command()
def up(
    path: Annotated[Path, typer.Argument(help="A folder or a file to keep in memory.")],
    config: ConfigOption = None,
    api: Annotated[bool, typer.Option(help="Serve the read API meanwhile (on the configured host and port).")] = True,
) -> None:
    """Ingest PATH, then follow its changes and serve what is stored until Ctrl-C."""
    from tinymemory_ingest.cli.ingest import run_up

    raise typer.Exit(asyncio.run(run_up(load_settings(config), path, serve_api=api)))


register_memory_commands(app)
register_source_commands(app)
register_cluster_commands(app)
register_token_commands(app)
register_erase_commands(app)
register_mcp_command(app)
add_dev_commands(app)
add_legacy_commands(app)
