"""The `tinymemory` command line: parse, build settings, call a job or start a process."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version

import typer

DISTRIBUTION = "tinymemory-ingest"

app = typer.Typer(
    name="tinymemory",
    help="Keep an AI agent's long-term memory in sync with the places its knowledge lives.",
    no_args_is_help=True,
    add_completion=False,
)


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
