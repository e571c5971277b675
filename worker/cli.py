"""The `tinymemory` command line: parse, build settings, call a job or start a process.

Heavy modules (the engines, the pipeline) are imported inside the commands, so `--help` and a
re-sync of an unchanged folder start quickly.
"""

from __future__ import annotations

import asyncio
import json
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from worker.cli_cluster import register_cluster_commands
from worker.cli_memory import register_memory_commands
from worker.cli_sources import register_source_commands

if TYPE_CHECKING:
    from worker.settings import Settings

DISTRIBUTION = "tinymemory-ingest"

app = typer.Typer(
    name="tinymemory",
    help="Keep an AI agent's long-term memory in sync with the places its knowledge lives.",
    no_args_is_help=True,
    add_completion=False,
)

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="A TOML settings file (else TINYMEMORY_CONFIG).", show_default=False)
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


@app.callback()
def main() -> None:
    """Keep an AI agent's long-term memory in sync with the places its knowledge lives."""


def installed_version() -> str:
    """The installed distribution's version, or `unknown` when running from an uninstalled tree."""
    try:
        return package_version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


@app.command()
def version() -> None:
    """Print the installed version."""
    typer.echo(f"{DISTRIBUTION} {installed_version()}")


def load_settings(config: Path | None) -> Settings:
    """Read the settings once, at start-up; a bad value stops the command with a clear message."""
    from pydantic import ValidationError

    from worker.settings import Settings

    try:
        return Settings.load(config)
    except (ValidationError, ValueError) as err:
        raise typer.BadParameter(f"invalid settings: {err}") from err


@app.command()
def config(config: ConfigOption = None) -> None:
    """Print the effective settings as JSON, secrets masked."""
    typer.echo(json.dumps(load_settings(config).printable(), indent=2))


@app.command()
def ingest(
    path: Annotated[Path, typer.Argument(help="A folder or a file to ingest.")],
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Ingest a folder or file once, with progress, then print a summary."""
    from worker.cli_ingest import run_ingest

    raise typer.Exit(asyncio.run(run_ingest(load_settings(config), path, as_json)))


@app.command()
def up(
    path: Annotated[Path, typer.Argument(help="A folder or a file to keep in memory.")],
    config: ConfigOption = None,
) -> None:
    """Ingest PATH, then follow its changes until Ctrl-C."""
    from worker.cli_ingest import run_up

    raise typer.Exit(asyncio.run(run_up(load_settings(config), path)))


register_memory_commands(app, load_settings)
register_source_commands(app, load_settings)
register_cluster_commands(app, load_settings)
