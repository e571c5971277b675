"""`tinymemory erase …`: erase a source or a namespace subtree for good, and follow an erasure by its id.

The id is printed as soon as the request is taken. With Redis state the erasure is queued for the erase
workers and the command returns (`--wait` follows it to its end); embedded, it runs in this command, which
returns when it has ended. Either way `tinymemory erase status ID` shows its receipt.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tinymemory_ingest.cli.common import ConfigOption, JsonOption, opened_services

if TYPE_CHECKING:
    from worker.control import ErasureReceipt, ErasureTarget, Services

KindsOption = Annotated[
    list[str] | None,
    typer.Option("--kinds", help="Only these item kinds: document, conversation, learning (repeat, or commas)."),
]
WaitOption = Annotated[bool, typer.Option("--wait", help="Follow the erasure until it ends.")]
_POLL_S = 0.5


def register_erase_commands(app: typer.Typer) -> None:
    """Add the `erase` group to `app`."""
    group = typer.Typer(help="Erase a source or a namespace for good, with a receipt.", no_args_is_help=True)
    app.add_typer(group, name="erase")

    @group.command("source")
    def source(
        source_id: Annotated[str, typer.Argument(help="The source's id (`tinymemory sources list`).")],
        kinds: KindsOption = None,
        wait: WaitOption = False,
        config: ConfigOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Erase every item a source stored, stop it and purge its state; prints the erasure's id."""
        raise typer.Exit(_erase(config, {"source_id": source_id}, kinds, wait, as_json))

    @group.command("namespace")
    def namespace(
        node: Annotated[str, typer.Argument(help="A namespace such as user:alice or team:acme/ws:docs.")],
        kinds: KindsOption = None,
        wait: WaitOption = False,
        config: ConfigOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Erase every item at a namespace node and below it (an account, a team, a workspace); prints the id."""
        raise typer.Exit(_erase(config, {"namespace": node}, kinds, wait, as_json))

    @group.command("status")
    def status(
        erasure_id: Annotated[str, typer.Argument(help="The id an erase request printed.")],
        config: ConfigOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """An erasure's receipt: what was asked, by whom, when, what it did and what the check found."""
        from worker import control

        with opened_services(config) as services:
            receipt = control.erasure_status(services.state(), erasure_id)
        typer.echo(receipt.model_dump_json() if as_json else describe(receipt))


def _kinds(values: list[str] | None) -> list[str]:
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def _erase(config: Path | None, target: dict[str, object], kinds: list[str] | None, wait: bool, as_json: bool) -> int:
    from pydantic import ValidationError

    from worker.control import ErasureTarget

    try:
        parsed = ErasureTarget.model_validate({**target, "kinds": _kinds(kinds)})
    except ValidationError as err:
        raise typer.BadParameter(str(err.errors()[0]["msg"]).removeprefix("Value error, ")) from err
    with opened_services(config) as services:
        receipt = asyncio.run(_ask(services, parsed, wait))
    if receipt is None:
        return 0
    typer.echo(receipt.model_dump_json() if as_json else describe(receipt))
    return 0 if receipt.status == "completed" else 1


async def _ask(services: Services, target: ErasureTarget, wait: bool) -> ErasureReceipt | None:
    """Ask, print the id at once, then follow the erasure when it runs here or `wait` says so."""
    from worker import control

    state, runner = services.state(), services.erasures()
    receipt = await control.request_erasure(state, runner, target, control.CLI_CALLER)
    typer.echo(receipt.id)  # at once: scripts read it while an embedded erasure runs
    if services.embedded:
        from worker.embedded import InProcessErasures

        if isinstance(runner, InProcessErasures):
            await runner.drain()
    elif not wait:
        return None
    while True:  # another process runs it: its receipt is all there is to watch
        receipt = control.erasure_status(state, receipt.id)
        if receipt.finished:
            return receipt
        await asyncio.sleep(_POLL_S)


def describe(receipt: ErasureReceipt) -> str:
    """A receipt for people: one line of what and where it stands, then what it did."""
    lines = [f"{receipt.id}  {receipt.status}  {receipt.target.describe()}"]
    lines.append(f"  asked by {receipt.requested_by} at {receipt.requested_at.isoformat()}")
    if receipt.started_at is not None:
        ended = f", ended {receipt.finished_at.isoformat()}" if receipt.finished_at else ""
        lines.append(f"  started {receipt.started_at.isoformat()}{ended} ({receipt.runs} run(s))")
    if receipt.method is not None:
        how = "erased by the engine" if receipt.method == "erase" else "forgotten"
        lines.append(
            f"  {how}: {receipt.forgotten} items forgotten, {receipt.erased_scopes} scopes erased; "
            f"nodes {', '.join(str(n) for n in receipt.scopes)}; sources {', '.join(receipt.sources) or 'none'}"
        )
    check = receipt.verification
    if check is not None:
        verdict = "nothing left" if check.passed else f"{check.remaining} items left"
        lines.append(f"  verified: {verdict} after {check.attempts} look(s)")
    if receipt.reason:
        lines.append(f"  reason: {receipt.reason}")
    return "\n".join(lines)
