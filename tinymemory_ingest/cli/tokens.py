"""`tinymemory tokens …`: the API's bearer tokens (a token is printed once, when it is made) and `serve`."""

from __future__ import annotations

import json
from typing import Annotated, Literal

import typer

from tinymemory_ingest.cli.common import ConfigOption, JsonOption, load_settings, reported

ReachOption = Annotated[
    str,
    typer.Option(help="How far its reads reach from its place: inherit (the place and above), exact, subtree."),
]


def register_token_commands(app: typer.Typer) -> None:
    """Add the `tokens` group and the `serve` command to `app`."""
    tokens = typer.Typer(help="Bearer tokens of the API: who may read which part of memory.", no_args_is_help=True)
    app.add_typer(tokens, name="tokens")
    _token_commands(tokens)

    @app.command()
    def serve(
        host: Annotated[str | None, typer.Option(help="Address to listen on (default from settings).")] = None,
        port: Annotated[
            int | None, typer.Option(min=0, max=65535, help="Port (default from settings; 0: any free one).")
        ] = None,
        config: ConfigOption = None,
    ) -> None:
        """Serve the read API (recall, fetch, tools, context.md, admin) over the configured engine."""
        from tinymemory_ingest.api import create_app
        from tinymemory_ingest.cli.serving import bind, serve_forever, url_of

        settings = load_settings(config)
        updates = {k: v for k, v in (("api_host", host), ("api_port", port)) if v is not None}
        settings = settings.model_copy(update=updates)
        with reported():
            sock = bind(settings)
        url = url_of(sock)
        typer.echo(f"serving the API on {url} (console at {url}/ and docs at {url}/docs)", err=True)
        serve_forever(sock, create_app(settings))


def _token_commands(group: typer.Typer) -> None:
    @group.command("add")
    def add(
        name: Annotated[str, typer.Argument(help="A name for the token, to list and revoke it by.")],
        place: Annotated[str, typer.Option(help="The namespace it reads from and writes to, e.g. user:alice.")] = "",
        reach: ReachOption = "inherit",
        read_only: Annotated[bool, typer.Option("--read-only", help="It may read but not store or forget.")] = False,
        admin: Annotated[bool, typer.Option("--admin", help="It may use the admin routes.")] = False,
        config: ConfigOption = None,
    ) -> None:
        """Make a token and print it (this once: only its digest is kept)."""
        from worker import control

        if reach not in ("inherit", "exact", "subtree"):
            raise typer.BadParameter("reach must be one of inherit, exact, subtree")
        shape: Literal["inherit", "exact", "subtree"] = reach  # type: ignore[assignment]
        settings = load_settings(config)
        with reported():
            made = control.add_token(
                settings.token_path, name, place=place, reach=shape, read_only=read_only, admin=admin
            )
        typer.echo(made.token)
        typer.echo(f"token {made.name!r} made; it is shown only now (kept in {settings.token_path})", err=True)

    @group.command("list")
    def list_tokens(config: ConfigOption = None, as_json: JsonOption = False) -> None:
        """The tokens (names and rights, never the tokens themselves)."""
        from worker import control

        settings = load_settings(config)
        with reported():
            tokens = control.list_tokens(settings.token_path)
        if as_json:
            typer.echo(json.dumps([t.model_dump(mode="json") for t in tokens]))
            return
        if not tokens:
            typer.echo("no tokens: the API serves loopback only, to everyone there")
        for t in tokens:
            rights = ", ".join(r for r, on in (("read-only", t.read_only), ("admin", t.admin)) if on) or "read, write"
            typer.echo(f"{t.name}  place {t.place or '(root)'}  reach {t.reach}  {rights}")

    @group.command("revoke")
    def revoke(name: str, config: ConfigOption = None) -> None:
        """Revoke a token: requests bearing it are refused from now on."""
        from worker import control

        settings = load_settings(config)
        with reported():
            control.revoke_token(settings.token_path, name)
        typer.echo(f"token {name!r} revoked")
