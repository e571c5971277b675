"""`ChildProcess`: a fresh interpreter running one named function, and this process's end of its connection.

The child is `python -c` with the parent's import path, never `multiprocessing`'s spawn: spawn imports the
parent's main module again in the child (a benchmark's main took 0.7 s of CPU), and a fork would copy the
parent's threads, locks and connections. What it runs is named as `module:function`; the function gets a
duplex `multiprocessing.connection.Connection` over a socket pair and returns when its work is over. Before the
function's module is even imported, the child ignores SIGINT (Ctrl-C reaches the whole process group, and the
parent decides when its children stop), refuses to dump core, takes its memory ceiling and starts watching
the parent, so that it exits when the parent dies (`pipeline.processes.startup`). It stays in the parent's
process group, so that stopping or killing the group stops the children with it.

Messages are whatever bytes the owner chooses: an owner whose child parses untrusted input must not unpickle
what comes back.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection
from socket import socketpair

from pipeline.processes.startup import EXIT_OUT_OF_MEMORY

REAP_S = 5.0
"""How long reaping waits for a child that was killed (or told to stop) to be gone."""

_START = (
    "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "from pipeline.processes.startup import main; main()"
)


@dataclass(frozen=True)
class ChildSpec:
    """What a child runs: `target`, as `module:function`, called with the child's end of the connection.

    With `memory_bytes`, the child's address space is capped at that many bytes from before `target`'s module
    is imported; a child that runs out of it exits with `EXIT_OUT_OF_MEMORY` (unless the target handles
    `MemoryError` itself).
    """

    target: str
    memory_bytes: int | None = None


class ChildProcess:
    """One started child and the parent's end of its connection.

    One thread at a time may send and receive; `kill` may come from any thread, at any time. A child ends when
    its target returns, so closing the connection (`stop` with a grace) is how a parent asks one to exit.
    """

    def __init__(self, process: subprocess.Popen[bytes], conn: Connection) -> None:
        self._process = process
        self._conn = conn

    @classmethod
    def start(cls, spec: ChildSpec) -> ChildProcess:
        """Start a child running `spec`; returns at once, before the child has imported anything.

        Raises `OSError` when no process can start (no more processes, no interpreter to run).
        """
        ours, theirs = socketpair()
        fd = theirs.fileno()
        paths = json.dumps([path for path in sys.path if path])
        ceiling = "" if spec.memory_bytes is None else str(spec.memory_bytes)
        command = [sys.executable, "-c", _START, paths, str(fd), str(os.getpid()), spec.target, ceiling]
        try:
            process = subprocess.Popen(command, pass_fds=(fd,), stdin=subprocess.DEVNULL)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return cls(process, Connection(ours.detach()))

    @property
    def pid(self) -> int:
        return self._process.pid

    def alive(self) -> bool:
        """Whether the child still runs (one that exited is reaped by asking)."""
        return self._process.poll() is None

    def send(self, payload: bytes) -> None:
        """Send one message; `OSError` when the child is gone (or the connection was closed here)."""
        self._conn.send_bytes(payload)

    def poll(self, timeout: float = 0.0) -> bool:
        """Whether a message (or the end of the connection) can be read within `timeout` seconds."""
        return self._conn.poll(timeout)

    def receive(self, timeout: float | None = None, max_bytes: int | None = None) -> bytes:
        """The next message, waiting at most `timeout` seconds (None: as long as it takes).

        Raises `TimeoutError` when nothing came in time (a subclass of `OSError`: catch it first), `EOFError`
        when the child hung up (it exited, or was killed, even with a message of ours unread), and `OSError`
        for a message over `max_bytes` (the connection is then unusable) or a broken connection.
        """
        if timeout is not None and not self._conn.poll(timeout):
            raise TimeoutError(f"no message from child process {self.pid} within {timeout:g} s")
        try:
            return self._conn.recv_bytes(max_bytes)
        except ConnectionResetError:
            # A child that exits with a message of ours unread resets the connection instead of closing it.
            raise EOFError(f"child process {self.pid} hung up") from None

    async def areceive(self) -> bytes:
        """`receive`, waiting for the message without holding up the event loop."""
        if not self._conn.poll():
            await _readable(self._conn.fileno())
        return self.receive()

    def kill(self) -> None:
        """SIGKILL the child, unless it has already exited; it still has to be reaped (`stop`)."""
        self._process.kill()

    def stop(self, grace: float = 0.0) -> int | None:
        """End the child and reap it; its exit code (None: it would not exit).

        With a `grace`, the connection is closed first and the child gets that many seconds to exit on its own
        (its target sees the end of the connection); then, or at once without one, it is killed.
        """
        if grace > 0 and self.alive():
            self._conn.close()
            with suppress(subprocess.TimeoutExpired):
                self._process.wait(grace)
        self.kill()
        self._conn.close()
        try:
            return self._process.wait(REAP_S)
        except subprocess.TimeoutExpired:
            return None


def exit_story(exitcode: int | None) -> str:
    """How a child ended, for a message: `was killed by SIGKILL`, `exited with code 3`, `ran out of memory`."""
    if exitcode is None:
        return "stopped answering"
    if exitcode == EXIT_OUT_OF_MEMORY:
        return "ran out of memory"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by {name}"
    return f"exited with code {exitcode}"


async def _readable(fd: int) -> None:
    """Wait, without holding up the event loop, until `fd` can be read."""
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, _settle, readable)
    try:
        await readable
    finally:
        loop.remove_reader(fd)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
