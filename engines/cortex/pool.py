"""`ClientPool`: the engine's `httpx.AsyncClient`, one per event loop, and the locks that belong to that loop.

An engine is shared by every task of a process, and some hosts run each job in a fresh `asyncio.run` (a Celery
task), where a connection opened in an earlier loop cannot be reused. Within one loop every call shares one
client, so its connections are pooled; a new loop gets a new client and the old one is dropped with its loop.
"""

from __future__ import annotations

import asyncio
import weakref

import httpx

REQUEST_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 10.0


def new_client() -> httpx.AsyncClient:
    """A client that follows no redirect and ignores proxy variables (docs/spec/cortexdb.md §4.1)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=min(CONNECT_TIMEOUT_S, REQUEST_TIMEOUT_S)),
        follow_redirects=False,
        trust_env=False,
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
    )


class ClientPool:
    """The client of the running loop (an injected one is used as is, in whichever loop calls it)."""

    def __init__(self, injected: httpx.AsyncClient | None = None) -> None:
        self._injected = injected
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
        self._closing: set[asyncio.Task[None]] = set()

    def client(self) -> httpx.AsyncClient:
        if self._injected is not None:
            return self._injected
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            # The previous loop is gone (or going): its connections cannot serve this one.
            self._client, self._loop = new_client(), loop
        return self._client

    def lock(self) -> asyncio.Lock:
        """A lock of the running loop, one per pool (an asyncio lock is bound to the loop that first waits on it)."""
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def aclose(self) -> None:
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            await client.aclose()

    def close(self) -> None:
        """Release the connections from synchronous code, in or outside the loop that opened them."""
        client, loop = self._client, self._loop
        self._client = self._loop = None
        if client is None or loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            task = loop.create_task(client.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        elif running is None and not loop.is_running():
            loop.run_until_complete(client.aclose())
