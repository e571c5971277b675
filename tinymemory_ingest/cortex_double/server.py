"""Running a `CortexDouble` on loopback: in a background thread for tests, or in the foreground for a command."""

from __future__ import annotations

import argparse
import gc
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from tinymemory_ingest.cortex_double.config import DoubleConfig
from tinymemory_ingest.cortex_double.double import ASGIApp, CortexDouble
from tinymemory_ingest.cortex_double.http import Receive, Send

START_TIMEOUT_S = 10.0
FULL_COLLECTION_EVERY = 1000


class _Expected(logging.Filter):
    """Injected dropped and cut-off answers are the point of those faults, not server errors worth a log line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "without completing response" not in record.getMessage()


def _listener(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Without it a kept-alive request waits for the client's delayed ACK (the answer's head and body go apart).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(512)
    return sock


class _LongLived:
    """A double's app in a process of its own, with the cyclic collector kept off the log.

    The log only grows and holds no cycles, yet every full collection walks all of it (a 60 ms pause once it
    holds 15,000 events, in the middle of some request). So the heap is frozen after each write, and the
    collector sees only what came since; a full collection every 1,000 writes frees the cycles a freeze kept
    (a connection closed since, say)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.writes = 0

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
        if scope["type"] == "http" and scope["method"] != "GET":
            self.writes += 1
            if self.writes % FULL_COLLECTION_EVERY == 0:
                gc.unfreeze()
                gc.collect()
            gc.freeze()


def _server(app: ASGIApp) -> uvicorn.Server:
    logging.getLogger("uvicorn.error").addFilter(_Expected())
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",
        access_log=False,
        http="h11",
        interface="asgi3",
        timeout_keep_alive=60,
    )
    return uvicorn.Server(config)


@contextmanager
def serve(double: CortexDouble, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve `double` on `host` (an ephemeral port unless given) from a background thread; yields its base URL."""
    sock = _listener(host, port)
    server = _server(double.app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="cortex-double", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError("the CortexDB double did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def run(port: int, wire: str = "direct", data: Path | None = None, host: str = "127.0.0.1") -> None:
    """Serve a double in the foreground until interrupted (`tinymemory dev cortex-double`)."""
    config = DoubleConfig(wire="hosted" if wire == "hosted" else "direct", rate_limit_per_minute=None)
    double = CortexDouble(config, data=data)
    sock = _listener(host, port)
    print(f"CortexDB double ({config.wire}) on http://{host}:{sock.getsockname()[1]}", flush=True)
    _server(_LongLived(double.app)).run(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tinymemory_ingest.cortex_double", description=run.__doc__)
    parser.add_argument("--port", type=int, default=3141)
    parser.add_argument("--wire", choices=("direct", "hosted"), default="direct")
    parser.add_argument("--data", type=Path, default=None, help="a file that keeps the log across restarts")
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    run(args.port, args.wire, args.data, args.host)
