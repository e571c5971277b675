"""Serving the API from the command line: on a socket bound here, so a taken port is one line, not a traceback.

The command line builds the app (`tinymemory_ingest.api.create_app`) and hands uvicorn the instance.
`tinymemory serve` runs it alone, over services opened from the settings; `tinymemory up` runs it as a task of
its own event loop, over the runtime's services, and keeps Ctrl-C for itself.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import uvicorn

from engines.contract import ConfigError
from worker.control import check_listen
from worker.settings import Settings
from worker.token_store import TokenStore

if TYPE_CHECKING:
    # Only named: `tinymemory ingest` imports this module and must not pay for importing FastAPI.
    from fastapi import FastAPI


def bind(settings: Settings) -> socket.socket:
    """A listening socket at the settings' host and port (port 0: any free one); refusals are `ConfigError`."""
    check_listen(settings.api_host, TokenStore(settings.token_path))
    host = settings.api_host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on such sockets, and without it a kept-alive request
    # waits ~40 ms for the client's delayed ACK (uvicorn writes a response's head and body apart). Set on the
    # listener too, which accepted connections inherit.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, settings.api_port))
    except OSError as err:
        sock.close()
        taken = " is in use by another program" if err.errno == errno.EADDRINUSE else f": {err.strerror or err}"
        raise ConfigError(
            f"cannot serve the API on {host}:{settings.api_port}{taken}; "
            "set TINYMEMORY_API_PORT to another port (0: any free one)"
        ) from err
    sock.listen(128)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _config(app: FastAPI) -> uvicorn.Config:
    return uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)


def serve_forever(sock: socket.socket, app: FastAPI) -> None:
    """Serve `app` until Ctrl-C or SIGTERM (uvicorn's own handling: it finishes the requests in flight)."""
    uvicorn.Server(_config(app)).run(sockets=[sock])


class _QuietServer(uvicorn.Server):
    """A server whose signals stay with its host: `tinymemory up` stops it when it stops itself."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class EmbeddedServer:
    """The API as a task of the current event loop; `stop` ends it after the requests in flight."""

    def __init__(self, sock: socket.socket, app: FastAPI) -> None:
        self.sock = sock
        self.url = url_of(sock)
        self._server = _QuietServer(_config(app))
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self.sock]), name="tm-api")

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task
        self.sock.close()
