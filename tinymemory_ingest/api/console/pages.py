"""The console's status pages: sources, live progress, dead letters, erasures, and the login form.

Every page reads through `worker.control`, as the admin API does. A token that is not an admin's sees the
sources its reach admits, their progress and dead letters, and no action; erasure receipts are an admin's.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from starlette.responses import Response

from engines.contract import ItemKind, Reach, UnauthorizedError
from tinymemory_ingest.api.console.route import ConsoleRoute, back, fragment, page, services_of, viewer
from tinymemory_ingest.api.console.session import (
    CSRF_FIELD,
    SESSION_COOKIE,
    LoginRequiredError,
    Viewer,
    check_token,
    forget,
    remember,
    session_of,
)
from tinymemory_ingest.api.errors import ForbiddenError
from worker import control
from worker.control import RunView, Services, SourceEntry, Status

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

LETTERS_SHOWN = 500


def admin_viewer(request: Request) -> Viewer:
    who = viewer(request)
    if not who.admin:
        raise ForbiddenError(f"this needs an admin token, and token {who.name!r} is not one")
    return who


def visible(who: Viewer, entry: SourceEntry) -> bool:
    """Whether the viewer's reach admits where the source stores its items."""
    return Reach.admitted_by(who.caller.reach, entry.placed_at())


def _visible_ids(who: Viewer, services: Services) -> set[str]:
    return {e.id for e in control.list_sources(services.state()) if visible(who, e)}


def _status(who: Viewer, services: Services) -> Status:
    shown = control.status(services.state(), services.probe())
    if who.caller.reach is None:
        return shown
    ids = _visible_ids(who, services)
    sources = [s for s in shown.sources if s.id in ids]
    return shown.model_copy(update={"sources": sources, "dead_letters": sum(s.dead_letters for s in sources)})


@router.get("/")
async def home(request: Request) -> Response:
    viewer(request)
    return back(request, "/sources")


@router.get("/sources")
async def sources_page(request: Request) -> Response:
    who = viewer(request)
    services = services_of(request)
    shown = _status(who, services)
    kinds = [k for k in control.source_kinds() if k.available]
    return page(request, "sources.html", who, status=shown, kinds=kinds, embedded=services.embedded)


def _runs(who: Viewer, services: Services) -> list[RunView]:
    ids = _visible_ids(who, services)
    return [r for r in control.runs(services.runner()) if r.source_id is None or r.source_id in ids]


@router.get("/progress")
async def progress_page(request: Request) -> Response:
    who = viewer(request)
    return page(request, "progress.html", who, **await _progress(who, services_of(request)))


@router.get("/progress/live")
async def progress_live(request: Request) -> Response:
    """The live part of the progress page alone, which its script fetches each second and swaps in."""
    who = viewer(request)
    return fragment(request, "live.html", who, **await _progress(who, services_of(request)))


async def _progress(who: Viewer, services: Services) -> dict[str, Any]:
    probe = services.probe()
    queues = None if probe is None else probe.queue_depths()
    # The backlog counts the whole memory file, every tenant's passages: an admin's to see.
    vectors = await control.engine_vector_backlog(services.engine()) if who.admin else None
    return {"runs": _runs(who, services), "queues": queues, "embedded": services.embedded, "vectors": vectors}


@router.get("/dead-letters")
async def letters_page(request: Request, source: str | None = None) -> Response:
    who = viewer(request)
    services = services_of(request)
    ids = _visible_ids(who, services)
    if source is not None and source not in ids:
        raise ForbiddenError(f"no source {source!r} this token may see")
    letters = control.dead_letters(services.state(), source or None, limit=LETTERS_SHOWN)
    shown = [(control.letter_id(d), d) for d in letters if d.source_id in ids or who.caller.reach is None]
    by_source = dict(sorted(Counter(d.source_id for _, d in shown).items()))
    return page(request, "letters.html", who, letters=shown, source=source, by_source=by_source)


@router.get("/erasures")
async def erasures_page(request: Request) -> Response:
    who = admin_viewer(request)
    services = services_of(request)
    receipts = services.state().recent_erasures()
    sources = control.list_sources(services.state())
    return page(request, "erasures.html", who, receipts=receipts, sources=sources, kinds=list(ItemKind))


@router.get("/erasures/{erasure_id}")
async def erasure_page(request: Request, erasure_id: str) -> Response:
    who = admin_viewer(request)
    receipt = control.erasure_status(services_of(request).state(), erasure_id)
    return page(request, "erasure.html", who, receipt=receipt)


@router.get("/login")
async def login_page(request: Request, next: str = "/") -> Response:
    try:
        who: Viewer | None = viewer(request)
    except LoginRequiredError:
        who = None
    session, _ = session_of(request)
    csrf = request.app.state.console_keys.csrf_for(session)
    return page(request, "login.html", who, next=_local(next), csrf=csrf)


@router.post("/login")
async def login(
    request: Request,
    token: Annotated[str, Form()] = "",
    csrf: Annotated[str, Form(alias=CSRF_FIELD)] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    session, _ = session_of(request)
    request.app.state.console_keys.check(session if request.cookies.get(SESSION_COOKIE) else None, csrf)
    try:
        caller = check_token(request.app.state.tokens, token)
    except UnauthorizedError as err:
        return back(request, f"/login?next={_local(next)}", err.message)
    response = back(request, _local(next), f"logged in as {caller.name}")
    remember(response, request, token=token.strip(), flash=f"logged in as {caller.name}")
    return response


@router.post("/logout")
async def logout(request: Request, csrf: Annotated[str, Form(alias=CSRF_FIELD)] = "") -> Response:
    who = viewer(request)
    request.app.state.console_keys.check(who.session, csrf)
    response = back(request, "/login", "logged out")
    forget(response)
    return response


def _local(target: str) -> str:
    """A place in the console to go back to: a path here, never another site (`//evil` or a scheme)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
