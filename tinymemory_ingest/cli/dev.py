"""`tinymemory dev …`: tools for developing against this project, starting with a CortexDB double.

`tinymemory dev cortex-double --port N [--data FILE]` serves the in-memory CortexDB the tests and benchmarks use,
on loopback, until Ctrl-C; with `--data` a restarted double keeps its log. Point the engine at it with
`TINYMEMORY_ENGINE=cortexdb`, `TINYMEMORY_ENGINES__CORTEXDB__ENDPOINT=http://127.0.0.1:N` and any
`TINYMEMORY_ENGINE_KEY`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def add_dev_commands(app: typer.Typer) -> None:
    """Add the `dev` command group to `app`."""
    dev = typer.Typer(help="Tools for developing against tinymemory.", no_args_is_help=True)

    @dev.command("cortex-double")
    def cortex_double(
        port: Annotated[
            int, typer.Option(min=0, max=65535, help="The loopback port to listen on (0: any free one).")
        ] = 3141,
        data: Annotated[
            Path | None, typer.Option(help="A file that keeps the double's log across restarts.", show_default=False)
        ] = None,
        wire: Annotated[str, typer.Option(help="direct (CortexDB's /v1) or hosted (TinyHumans' /memory).")] = "direct",
        host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    ) -> None:
        """Serve an in-memory CortexDB (the tests' double) until Ctrl-C."""
        if wire not in ("direct", "hosted"):
            raise typer.BadParameter("wire must be direct or hosted")
        from tinymemory_ingest.cortex_double import run

        try:
            run(port, wire, data, host)
        except OSError as err:
            typer.echo(f"cannot serve the double on {host}:{port}: {err.strerror or err}", err=True)
            raise typer.Exit(2) from None

    app.add_typer(dev, name="dev")
