"""How a console page is answered: its templates, its viewer, and HTML for every failure.

Console routes use `ConsoleRoute`, which answers a contract error with the error page (its status from the
API's table, its message as the error says it) and a page that needs a login with a redirect to the login
form, so no console page ever answers with the API's JSON.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Coroutine, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from starlette.responses import RedirectResponse, Response

from engines.contract import Error
from tinymemory_ingest.api.auth import tokens_of
from tinymemory_ingest.api.console.session import (
    FLASH_COOKIE,
    Keys,
    LoginRequiredError,
    Viewer,
    flash_of,
    remember,
    viewer_of,
)
from tinymemory_ingest.api.errors import mapping_of
from worker.control import Services, describe_vectors

logger = logging.getLogger(__name__)

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
_MARKER = re.compile(r"\[REDACTED[A-Z0-9_]*\]")


def _marked(text: str) -> Markup:
    """`text` escaped, with each redaction marker the scrubber left made visible."""
    escaped = str(escape(text))
    return Markup(_MARKER.sub(lambda m: f'<mark class="redacted">{m.group(0)}</mark>', escaped))


def _when(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 60:
        return f"{value:.1f} s"
    minutes, seconds = divmod(int(value), 60)
    return f"{minutes} min {seconds} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


TEMPLATES.env.filters["marked"] = _marked
TEMPLATES.env.filters["when"] = _when
TEMPLATES.env.filters["seconds"] = _seconds
TEMPLATES.env.filters["vectors"] = describe_vectors


def keys_of(request: Request) -> Keys:
    keys: Keys = request.app.state.console_keys
    return keys


def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def viewer(request: Request) -> Viewer:
    """The viewer of this request (`LoginRequiredError` when it must log in first)."""
    return viewer_of(request, keys_of(request), tokens_of(request))


def page(request: Request, template: str, who: Viewer | None, http_status: int = 200, **context: Any) -> Response:
    """Render `template` for `who`, showing (and clearing) the message the last action left."""
    flash = flash_of(request)
    response = TEMPLATES.TemplateResponse(
        request,
        template,
        {"viewer": who, "flash": flash, "path": request.url.path, **context},
        status_code=http_status,
    )
    remember(response, request)
    if flash is not None:
        response.delete_cookie(FLASH_COOKIE)
    return response


def fragment(request: Request, template: str, who: Viewer, **context: Any) -> Response:
    """Render part of a page (what a script swaps in), leaving cookies and messages alone."""
    return TEMPLATES.TemplateResponse(request, template, {"viewer": who, **context})


def back(request: Request, to: str, message: str | None = None) -> Response:
    """After an action: see `to` (303, so a reload does not repeat it), with `message` shown there."""
    response = RedirectResponse(to, status_code=303)
    remember(response, request, flash=message)
    return response


def _error_page(request: Request, error: Error) -> Response:
    status = mapping_of(error).status
    try:
        who: Viewer | None = viewer(request)
    except (LoginRequiredError, Error):
        who = None
    return page(request, "error.html", who, http_status=status, message=error.message, code=status)


def _to_login(request: Request, reason: str | None) -> Response:
    target = request.url.path if request.method == "GET" else "/"
    response = RedirectResponse(f"/login?next={quote(target, safe='/')}", status_code=303)
    if reason is not None:
        remember(response, request, flash=reason)
    return response


class ConsoleRoute(APIRoute):
    """A route whose failures are pages: contract errors render `error.html`, missing logins redirect."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequiredError as needed:
                return _to_login(request, needed.reason)
            except Error as err:
                return _error_page(request, err)

        return answer


def query_of(request: Request, *names: str) -> Mapping[str, str]:
    """The named query parameters the request has, stripped, blanks left out."""
    found = {}
    for name in names:
        value = request.query_params.get(name, "").strip()
        if value:
            found[name] = value
    return found
