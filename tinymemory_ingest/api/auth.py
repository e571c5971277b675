"""Who a request speaks for, and how far it may read: the bearer token's scope applied to every request.

Every read is confined to the token's reach: a request that names no reach gets the token's, one that names
a reach must name one within it (`Reach.within`), else 403 saying why. Writes need a token that is not
read-only, and the admin routes an admin token. With no tokens at all every request is the root's, with every
right (the app then listens on loopback only).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, TypeVar

from fastapi import Depends, Request

from engines.contract import ExploreRequest, FetchRequest, ListRequest, Reach, RecallRequest
from tinymemory_ingest.api.errors import ForbiddenError
from worker.control import Caller, Services, TokenStore, authenticate

_BEARER = "bearer "
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


async def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def tokens_of(request: Request) -> TokenStore:
    tokens: TokenStore = request.app.state.tokens
    return tokens


def caller_of(request: Request) -> Caller:
    """The caller the request's `Authorization: Bearer` token speaks for (401 when it is missing or wrong).

    Without tokens, only requests from loopback addressed to loopback are answered. A web page that rebinds its
    own name to 127.0.0.1 sends its own name as the Host; and a server listening beyond loopback whose last
    token was revoked must not serve a remote client that merely writes `Host: 127.0.0.1`.
    """
    header = request.headers.get("authorization", "")
    token = header[len(_BEARER) :].strip() if header.lower().startswith(_BEARER) else None
    caller = authenticate(tokens_of(request), token)
    if caller.name is not None:
        return caller
    host = (request.url.hostname or "").strip("[]")
    if host not in _LOOPBACK_NAMES:
        raise ForbiddenError(
            f"without tokens this API answers only requests addressed to loopback, not to {host!r}; "
            "add a token (`tinymemory tokens add NAME`) to serve others"
        )
    peer = request.client.host if request.client is not None else ""
    if not _is_loopback(peer):
        raise ForbiddenError(
            f"without tokens this API answers only requests from loopback, not from {peer or 'an unknown peer'!r}; "
            "add a token (`tinymemory tokens add NAME`) to serve others"
        )
    return caller


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


async def admin_of(request: Request) -> Caller:
    caller = caller_of(request)
    if not caller.admin:
        raise ForbiddenError(f"this route needs an admin token, and token {caller.name!r} is not one")
    return caller


async def _caller(request: Request) -> Caller:
    # Dependencies are coroutines: FastAPI would run a plain function in its thread pool, a hop per request.
    return caller_of(request)


CallerDep = Annotated[Caller, Depends(_caller)]
AdminDep = Annotated[Caller, Depends(admin_of)]
ServicesDep = Annotated[Services, Depends(services_of)]


def confined(caller: Caller, reach: Reach | None) -> Reach | None:
    """The reach a request may read with: its own when within the caller's, the caller's when it names none."""
    if caller.reach is None:
        return reach
    if reach is None:
        return caller.reach
    if not reach.within(caller.reach):
        raise ForbiddenError(
            f"the reach {_shown(reach)} is not within token {caller.name!r}'s reach {_shown(caller.reach)}; "
            "ask for a reach inside it, or name none to read all it allows"
        )
    return reach


_Filtered = TypeVar("_Filtered", RecallRequest, FetchRequest, ListRequest, ExploreRequest)


def within_reach(caller: Caller, request: _Filtered) -> _Filtered:
    """`request` with its filter's reach confined to the caller's (the same object when nothing changes)."""
    reach = confined(caller, request.filter.reach)
    if reach is request.filter.reach:
        return request
    return request.model_copy(update={"filter": request.filter.model_copy(update={"reach": reach})})


def _shown(reach: Reach) -> str:
    return reach.model_dump_json()
