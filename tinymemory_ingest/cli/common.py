"""What every command shares: its options, reading the settings once, and turning an ordinary mistake (a
contract error) into one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from worker.control import Services
    from worker.settings import Settings

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="A TOML settings file (else TINYMEMORY_CONFIG).", show_default=False)
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def load_settings(config: Path | None) -> Settings:
    """Read the settings once, at start-up; a bad value stops the command with a clear message."""
    from pydantic import ValidationError

    from worker.settings import Settings

    try:
        return Settings.load(config)
    except (ValidationError, ValueError) as err:
        raise typer.BadParameter(f"invalid settings: {err}") from err


def fail(message: str) -> typer.Exit:
    """Print `error: message` on stderr; raise what this returns to exit with status 2."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


@contextmanager
def reported() -> Iterator[None]:
    """Run a command's work: a contract error it raises is printed as one line and exits with status 2."""
    from engines.contract import Error

    try:
        yield
    except Error as err:
        raise fail(err.message) from err


@contextmanager
def opened_services(config: Path | None) -> Iterator[Services]:
    """The settings' `Services`, closed after the block; contract errors inside are `reported`."""
    from worker.control import Services

    with reported(), Services(load_settings(config)) as services:
        yield services
