"""The PostgreSQL engine's connections: one psycopg pool per engine, its SQL run on worker threads.

Hosts run each task in an event loop of its own (a Celery task calls `asyncio.run`), and an asyncio pool belongs
to the loop that opened it, so the engine keeps a thread-safe `psycopg_pool.ConnectionPool` and awaits each unit
of work on a thread (`asyncio.to_thread`): any loop may call it, and the vector backlog's thread shares it.

Every unit of work is one transaction, committed when it returns and rolled back when it raises. psycopg's
failures become contract errors here, at the edge: a server that cannot be reached, restarts or shuts a session
down is `UnavailableError` (hosts retry it); a refused password is `UnauthorizedError`; anything else is an
`EngineError` naming the SQLSTATE, never the endpoint's password.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool, PoolTimeout

from engines.contract import ConfigError, EngineError, Error, UnauthorizedError, UnavailableError
from engines.settings import masked_endpoint

T = TypeVar("T")

CONNECT_TIMEOUT_S = 5
"""How long one connection attempt waits for the server."""
POOL_TIMEOUT_S = 10.0
"""How long a unit of work waits for a connection before the server counts as unavailable."""
POOL_SIZE = 8
APPLICATION = "tinymemory"

Work = Callable[[psycopg.Connection], T]

# SQLSTATE classes that say "try again": connection exceptions, insufficient resources, operator intervention
# (a shutdown or restart), and a serialisation failure or deadlock (the transaction was the victim).
_TRANSIENT_CLASSES = ("08", "53", "57")
_TRANSIENT_STATES = ("40001", "40P01", "55P03")
_AUTH_STATES = ("28000", "28P01")


def check_endpoint(endpoint: str) -> str:
    """The endpoint, trimmed, when it is a `postgresql://` URL (or `postgres://`)."""
    url = endpoint.strip()
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ("postgresql", "postgres"):
        raise ConfigError(
            f'engine "postgres" needs a postgresql://user@host:5432/database endpoint, not {masked_endpoint(url)!r}'
        )
    return url


def translated(err: BaseException, endpoint: str) -> Error:
    """The contract error for a psycopg (or pool) failure talking to `endpoint`."""
    where = masked_endpoint(endpoint)
    if isinstance(err, PoolTimeout):
        return UnavailableError(f"postgresql at {where} gave no connection in time (is it running and reachable?)")
    state = getattr(err, "sqlstate", None) or ""
    if state in _AUTH_STATES:
        return UnauthorizedError(f"postgresql at {where} refused the credential ({state})")
    if isinstance(err, psycopg.OperationalError) and not state:
        # No SQLSTATE: the connection itself failed (refused, reset, closed by a restart).
        return UnavailableError(f"postgresql at {where} is unreachable: {_first_line(err)}")
    if state.startswith(_TRANSIENT_CLASSES) or state in _TRANSIENT_STATES:
        return UnavailableError(f"postgresql at {where} failed transiently ({state}): {_first_line(err)}")
    return EngineError(f"postgresql at {where} failed ({state or type(err).__name__}): {_first_line(err)}")


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:300] if text else type(err).__name__


class Database:
    """A pool of connections to one database; `open` it once (after the schema is settled), `close` it last."""

    def __init__(self, endpoint: str, password: str | None, pool_size: int = POOL_SIZE) -> None:
        self.endpoint = endpoint
        self._kwargs: dict[str, object] = {"connect_timeout": CONNECT_TIMEOUT_S, "application_name": APPLICATION}
        if password is not None:
            self._kwargs["password"] = password
        self._pool_size = pool_size
        self._pool: ConnectionPool | None = None
        self.pool_timeout_s = POOL_TIMEOUT_S

    def connect(self) -> psycopg.Connection:
        """One connection outside the pool (the schema is settled on it before the pool opens)."""
        try:
            return psycopg.connect(self.endpoint, **self._kwargs)  # type: ignore[arg-type]
        except psycopg.Error as err:
            raise translated(err, self.endpoint) from err

    def open(self) -> None:
        """Open the pool; every connection knows pgvector's type (the extension exists by now)."""
        if self._pool is not None:
            return
        self._pool = ConnectionPool(
            self.endpoint,
            min_size=1,
            max_size=self._pool_size,
            kwargs=self._kwargs,
            configure=register_vector,
            check=ConnectionPool.check_connection,
            timeout=self.pool_timeout_s,
            name=APPLICATION,
            open=False,
        )
        # Not waiting: a server down now is each call's `UnavailableError`, retried by the host, not a start failure.
        self._pool.open(wait=False)

    @property
    def password_given(self) -> bool:
        """Whether a password (the engine's credential) is presented, rather than libpq's own (PGPASSWORD, .pgpass)."""
        return "password" in self._kwargs

    @property
    def closed(self) -> bool:
        return self._pool is None

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def run_now(self, work: Work[T]) -> T:
        """Run `work` in one transaction on this thread; psycopg's failures as contract errors."""
        pool = self._pool
        if pool is None:
            raise EngineError("the postgresql engine is closed")
        try:
            with pool.connection() as conn:
                return work(conn)
        except Error:
            raise
        except (psycopg.Error, PoolTimeout) as err:
            raise translated(err, self.endpoint) from err

    async def run(self, work: Work[T]) -> T:
        """`run_now` on a worker thread, so the event loop never waits on the server."""
        return await asyncio.to_thread(self.run_now, work)


__all__ = ["Database", "check_endpoint", "translated"]
