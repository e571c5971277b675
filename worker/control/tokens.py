"""Tokens: make, list and revoke them, and tell who a request's bearer token speaks for.

Without any token the API serves everyone as the root with every right, which is why it may then listen on
loopback only (`tinymemory_ingest.api.app`); once one token exists, every request needs a valid one.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import Field

from engines.contract import ConfigError, Namespace, Reach, UnauthorizedError
from worker.control.results import Result
from worker.token_store import ReachShape, TokenRecord, TokenStore


class Caller(Result):
    """Who a request speaks for: its token's name, place and reach, and whether it may write and administer."""

    name: str | None = None
    place: Namespace = Namespace.ROOT
    reach: Reach | None = None
    writes: bool = True
    admin: bool = True

    @classmethod
    def of(cls, record: TokenRecord) -> Caller:
        return cls(
            name=record.name,
            place=record.namespace(),
            reach=record.reach_of(),
            writes=not record.read_only,
            admin=record.admin,
        )


class NewToken(Result):
    """A token just made: `token` is shown this once; the file keeps only its digest."""

    name: str
    token: str
    place: str
    reach: ReachShape
    read_only: bool
    admin: bool


class TokenInfo(Result):
    """A token as listed: everything but the token and its digest."""

    name: str
    place: str
    reach: ReachShape
    read_only: bool
    admin: bool
    created_at: str = Field(description="when it was made, RFC 3339")


def add_token(
    path: Path,
    name: str,
    *,
    place: str = "",
    reach: ReachShape = "inherit",
    read_only: bool = False,
    admin: bool = False,
) -> NewToken:
    record, token = TokenStore(path).add(name, place=place, reach=reach, read_only=read_only, admin=admin)
    return NewToken(
        name=record.name, token=token, place=record.place, reach=record.reach, read_only=read_only, admin=admin
    )


def list_tokens(path: Path) -> list[TokenInfo]:
    return [_info(record) for record in TokenStore(path).records()]


def revoke_token(path: Path, name: str) -> TokenInfo:
    return _info(TokenStore(path).revoke(name))


def authenticate(store: TokenStore, token: str | None) -> Caller:
    """The caller a bearer token speaks for; with no tokens at all, the root with every right.

    A missing or unknown token, while tokens exist, is `UnauthorizedError`.
    """
    if not store.records():
        return Caller()
    if not token:
        raise UnauthorizedError("a bearer token is required: send `Authorization: Bearer <token>`")
    record = store.authenticate(token)
    if record is None:
        raise UnauthorizedError("the bearer token is not valid here; `tinymemory tokens list` shows the tokens")
    return Caller.of(record)


def _info(record: TokenRecord) -> TokenInfo:
    return TokenInfo(
        name=record.name,
        place=record.place,
        reach=record.reach,
        read_only=record.read_only,
        admin=record.admin,
        created_at=record.created_at.isoformat(),
    )


def check_listen(host: str, store: TokenStore) -> None:
    """Refuse to serve beyond loopback while no token exists: anyone reaching the port would own the memory."""
    if _loopback(host) or store.records():
        return
    raise ConfigError(
        f"the API would listen on {host} with no tokens, so anyone who reaches it could read and change memory; "
        "add a token (`tinymemory tokens add NAME --admin`) or set TINYMEMORY_API_HOST=127.0.0.1"
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
