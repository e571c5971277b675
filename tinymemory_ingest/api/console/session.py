"""Who is using the console, and proof that a form was the console's own: cookies and CSRF tokens.

The login form takes one of the API's tokens and keeps it in an HttpOnly, SameSite=Strict cookie, so the
console reads with exactly the rights and reach the API gives that token. Every page also sets a random
session cookie; each form carries an HMAC of it under a key this process made, and every POST must bring
that value back. A cross-site form can send the cookies but cannot read them, so it cannot forge the field.
With no tokens at all the console, like the API, answers only on loopback, as the root.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import quote, unquote

from fastapi import Request
from starlette.responses import Response

from engines.contract import UnauthorizedError
from tinymemory_ingest.api.auth import caller_of
from tinymemory_ingest.api.errors import ForbiddenError
from worker.control import Caller, TokenStore, authenticate

TOKEN_COOKIE = "tm_token"
SESSION_COOKIE = "tm_session"
FLASH_COOKIE = "tm_flash"
CSRF_FIELD = "csrf"


class LoginRequiredError(Exception):
    """The page needs a token and the request brought none that is valid: the browser goes to log in."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(reason or "log in")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Viewer:
    """The console's user: the caller its token speaks for, and the CSRF value its forms carry."""

    caller: Caller
    csrf: str
    session: str
    # Whether tokens exist at all (without them there is no login, and no logout either).
    guarded: bool

    @property
    def name(self) -> str:
        return self.caller.name or "loopback"

    @property
    def admin(self) -> bool:
        return self.caller.admin


class Keys:
    """The key this process signs CSRF values with (forms from before a restart are refused, and say so)."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def csrf_for(self, session: str) -> str:
        return hmac.new(self._key, session.encode(), hashlib.sha256).hexdigest()

    def check(self, session: str | None, sent: str | None) -> None:
        if not session or not sent or not hmac.compare_digest(self.csrf_for(session), sent):
            raise ForbiddenError(
                "this form is stale or did not come from the console (its CSRF token does not match); "
                "reload the page and try again"
            )


def session_of(request: Request) -> tuple[str, bool]:
    """The request's session id, and whether it is new (then the response must set it)."""
    current = request.cookies.get(SESSION_COOKIE)
    if current and len(current) <= 64:
        return current, False
    # Made once per request: the page's forms and the cookie that the response sets must agree.
    made: str | None = getattr(request.state, "console_session", None)
    if made is None:
        made = request.state.console_session = secrets.token_urlsafe(24)
    return made, True


def viewer_of(request: Request, keys: Keys, tokens: TokenStore) -> Viewer:
    """The viewer the request's cookies name; `LoginRequiredError` when tokens exist and none valid was kept."""
    session, _ = session_of(request)
    guarded = bool(tokens.records())
    token = request.cookies.get(TOKEN_COOKIE)
    try:
        caller = _caller(request, tokens, token)
    except UnauthorizedError as err:
        if isinstance(err, ForbiddenError):
            raise
        raise LoginRequiredError(None if token is None else "that token is no longer valid; log in again") from err
    return Viewer(caller=caller, csrf=keys.csrf_for(session), session=session, guarded=guarded)


def _caller(request: Request, tokens: TokenStore, token: str | None) -> Caller:
    if token is None:
        # No cookie: the API's rules (the root on loopback while no token exists, else a 401).
        return caller_of(request)
    return authenticate(tokens, token)


def check_token(tokens: TokenStore, token: str) -> Caller:
    """The caller a token typed into the login form speaks for; a contract error saying why when none."""
    if not token.strip():
        raise UnauthorizedError("type a token: `tinymemory tokens add NAME` makes one")
    caller = authenticate(tokens, token.strip())
    if caller.name is None:
        raise UnauthorizedError("this console has no tokens; there is nothing to log in to")
    return caller


def remember(response: Response, request: Request, *, token: str | None = None, flash: str | None = None) -> None:
    """Set the session cookie when it is new, the token after a login, a message for the next page."""
    session, new = session_of(request)
    secure = request.url.scheme == "https"
    if new:
        response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="strict", secure=secure)
    if token is not None:
        response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", secure=secure)
    if flash is not None:
        # Quoted, so a message's spaces and semicolons survive the cookie header as they are.
        response.set_cookie(
            FLASH_COOKIE, quote(flash[:500]), httponly=True, samesite="strict", secure=secure, max_age=60
        )


def forget(response: Response) -> None:
    response.delete_cookie(TOKEN_COOKIE)


def flash_of(request: Request) -> str | None:
    kept = request.cookies.get(FLASH_COOKIE)
    return None if kept is None else unquote(kept)
