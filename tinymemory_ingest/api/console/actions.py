"""The console's actions: each a POST from a form, by an admin, with the session's CSRF token, answered with
a redirect (303) to the page that shows what it did.

Syncs that an action asks for run in the background when they run in this process (embedded mode), so the
browser goes straight to the progress page and watches them there; the workers' queues answer at once anyway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from pydantic import ValidationError
from starlette.responses import Response

from engines.contract import Error, InvalidRequestError, ItemKind, Namespace
from tinymemory_ingest.api.console.pages import admin_viewer
from tinymemory_ingest.api.console.route import ConsoleRoute, back, keys_of, services_of
from tinymemory_ingest.api.console.session import CSRF_FIELD, Viewer
from worker import control
from worker.control import ErasureTarget, Services, SourceRequest, SyncOutcome, SyncRunner

logger = logging.getLogger(__name__)

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
# Every field has a default: a form missing one is answered by the console's own checks, as a page, not
# by the framework's JSON validation error.
Csrf = Annotated[str, Form(alias=CSRF_FIELD)]


class BackgroundSyncs:
    """A `SyncRunner` that starts each sync as a task of this event loop and answers `queued` at once."""

    def __init__(self, runner: SyncRunner) -> None:
        self.runner = runner
        self._running: set[asyncio.Task[SyncOutcome]] = set()

    async def request_sync(self, source_id: str, hints: Sequence[str] | None = None) -> SyncOutcome:
        task = asyncio.create_task(self._sync(source_id, hints))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return SyncOutcome(source_id=source_id, status="queued")

    async def _sync(self, source_id: str, hints: Sequence[str] | None) -> SyncOutcome:
        try:
            return await self.runner.request_sync(source_id, hints)
        except Error as err:
            # Already recorded where the console shows it (a listing failure is a dead letter).
            logger.warning("console sync of %s failed: %s", source_id, err.message)
            raise


def _runner(request: Request, services: Services) -> SyncRunner:
    if not services.embedded:
        return services.runner()
    syncs: BackgroundSyncs | None = getattr(request.app.state, "console_syncs", None)
    if syncs is None or syncs.runner is not services.runner():
        syncs = request.app.state.console_syncs = BackgroundSyncs(services.runner())
    return syncs


def _allowed(request: Request, csrf: str) -> tuple[Viewer, Services]:
    """The admin asking, once the form's CSRF token is checked, and the services to act with."""
    who = admin_viewer(request)
    keys_of(request).check(who.session, csrf)
    return who, services_of(request)


def _says(outcome: SyncOutcome) -> str:
    if outcome.status == "already_queued":
        return f"a sync of {outcome.source_id} is already queued or running; it runs again right after"
    return f"syncing {outcome.source_id}"


@router.post("/sources")
async def add_source(
    request: Request,
    csrf: Csrf = "",
    kind: Annotated[str, Form()] = "",
    target: Annotated[str, Form()] = "",
    id: Annotated[str, Form()] = "",
    label: Annotated[str, Form()] = "",
    namespace: Annotated[str, Form()] = "",
    interval_s: Annotated[str, Form()] = "",
    include: Annotated[str, Form()] = "",
) -> Response:
    _, services = _allowed(request, csrf)
    fields: dict[str, Any] = {
        "kind": kind.strip(),
        "target": target.strip(),
        "id": id.strip() or None,
        "label": label.strip() or None,
        "namespace": namespace.strip() or None,
        "interval_s": interval_s.strip() or None,
        "include": [p.strip() for p in include.replace(",", "\n").splitlines() if p.strip()],
    }
    try:
        wanted = SourceRequest.model_validate(fields)
    except ValidationError as err:
        raise InvalidRequestError(f"the source is not valid: {_problem(err)}") from err
    entry = control.add_source(services.state(), wanted)
    outcome = await control.sync_now(services.state(), _runner(request, services), entry.id)
    return back(request, "/progress", f"added {entry.id}; {_says(outcome)}")


@router.post("/sources/{source_id}/sync")
async def sync_source(request: Request, source_id: str, csrf: Csrf = "") -> Response:
    _, services = _allowed(request, csrf)
    outcome = await control.sync_now(services.state(), _runner(request, services), source_id)
    return back(request, "/progress", _says(outcome))


@router.post("/sources/{source_id}/enabled")
async def set_enabled(
    request: Request, source_id: str, csrf: Csrf = "", enabled: Annotated[str, Form()] = ""
) -> Response:
    _, services = _allowed(request, csrf)
    if enabled not in ("true", "false"):
        raise InvalidRequestError("enabled must be true or false")
    entry = control.set_enabled(services.state(), source_id, enabled == "true")
    return back(request, "/sources", f"{entry.id} is {'enabled' if entry.enabled else 'disabled'}")


@router.post("/sources/{source_id}/remove")
async def remove_source(
    request: Request, source_id: str, csrf: Csrf = "", keep_items: Annotated[str, Form()] = ""
) -> Response:
    _, services = _allowed(request, csrf)
    keep = keep_items == "on"
    removal = await control.remove_source(
        services.state(), None if keep else services.engine(), source_id, keep_items=keep
    )
    kept = "its items were kept" if keep else f"{removal.forgotten} items forgotten"
    return back(request, "/sources", f"removed {source_id}; {kept}")


@router.post("/dead-letters/{letter}/replay")
async def replay_one(request: Request, letter: str, csrf: Csrf = "") -> Response:
    _, services = _allowed(request, csrf)
    done = await control.replay_dead_letter(services.state(), _runner(request, services), letter)
    return back(request, "/progress", f"replaying {', '.join(done.units) or 'the source'} of {done.source_id}")


@router.post("/dead-letters/replay")
async def replay_all(request: Request, csrf: Csrf = "", source: Annotated[str, Form()] = "") -> Response:
    _, services = _allowed(request, csrf)
    replays = await control.replay_dead_letters(services.state(), _runner(request, services), source or None)
    units = sum(len(r.units) for r in replays)
    return back(request, "/progress", f"replaying {units} units of {len(replays)} sources")


@router.post("/dead-letters/purge")
async def purge(
    request: Request, csrf: Csrf = "", source: Annotated[str, Form()] = "", confirm: Annotated[str, Form()] = ""
) -> Response:
    _, services = _allowed(request, csrf)
    where = "/dead-letters" + (f"?source={source}" if source else "")
    if confirm != "on":
        return back(request, where, "tick the box to confirm the purge: purged letters are not retried")
    gone = control.purge_dead_letters(services.state(), source or None)
    return back(request, where, f"purged {gone} dead letters")


@router.post("/erasures")
async def request_erasure(
    request: Request,
    csrf: Csrf = "",
    scope: Annotated[str, Form()] = "",
    target: Annotated[str, Form()] = "",
    confirm: Annotated[str, Form()] = "",
    kinds: Annotated[list[str] | None, Form()] = None,
) -> Response:
    who, services = _allowed(request, csrf)
    target = target.strip()
    if confirm.strip() != target:
        return back(request, "/erasures", f"type {target!r} again to confirm: an erasure cannot be undone")
    erasure = _target(scope, target, kinds or [])
    receipt = await control.request_erasure(services.state(), services.erasures(), erasure, who.name)
    return back(request, f"/erasures/{receipt.id}", f"erasure {receipt.id} asked for; its receipt follows it here")


def _target(scope: str, target: str, kinds: Iterable[str]) -> ErasureTarget:
    try:
        chosen = [ItemKind(k) for k in kinds]
        if scope == "source":
            return ErasureTarget(source_id=target, kinds=chosen)
        if scope == "namespace":
            return ErasureTarget(namespace=Namespace.parse(target), kinds=chosen)
    except (ValueError, ValidationError) as err:
        raise InvalidRequestError(f"cannot erase {target!r}: {_problem(err)}") from err
    raise InvalidRequestError(f"erase a source or a namespace, not {scope!r}")


def _problem(err: ValueError) -> str:
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(err)
