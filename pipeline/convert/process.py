"""One worker process of a `ConverterPool`: started on demand, given one job at a time, killed when it overruns."""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from engines.contract import EngineError, Error, InvalidRequestError
from pipeline.convert.documents import ConvertedDocument, RawDocument
from pipeline.convert.limits import ConvertLimits, format_bytes, format_seconds
from pipeline.convert.messages import Done, Failed, Ready, Stop, document_of, error_of, job_for, read_reply
from pipeline.convert.worker import EXIT_OUT_OF_MEMORY, serve

# Importing the parsing libraries takes a second or two; a worker that is not ready by then is broken.
START_TIMEOUT_S = 60.0
_STOP_GRACE_S = 2.0
# spawn, not fork: a fresh interpreter inherits no threads, locks or open files from a busy parent.
_CONTEXT = multiprocessing.get_context("spawn")


class WorkerProcess:
    """A worker slot: at most one live process, started lazily, replaced after any failure.

    Only one thread at a time may call `convert` (the pool hands each slot to one caller); `close` may come
    from any thread and kills a process that is still converting.
    """

    def __init__(self, limits: ConvertLimits, chain_factory: str) -> None:
        self._limits = limits
        self._chain_factory = chain_factory
        self._max_reply = 4 * max(limits.max_decompressed_bytes, limits.max_input_bytes)
        self._lock = threading.Lock()
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self._busy = False
        self._closed = False

    def convert(self, raw: RawDocument) -> ConvertedDocument:
        """`raw` converted by this slot's process, which is started or replaced as needed."""
        with self._lock:
            if self._closed:
                raise EngineError(f"{raw.label}: the converter pool is closed")
            self._busy = True
        try:
            return self._exchange(raw)
        finally:
            with self._lock:
                self._busy = False
                if self._closed:
                    self._stop()

    def close(self) -> None:
        """Stop the process: politely when idle, by SIGKILL when a conversion is still running."""
        with self._lock:
            self._closed = True
            if not self._busy:
                self._stop()
            elif self._process is not None:
                self._process.kill()

    def _exchange(self, raw: RawDocument) -> ConvertedDocument:
        conn = self._connection()
        try:
            _send(conn, raw)
        except OSError:
            # The process died while idle (killed from outside); nothing of this job reached it.
            self._discard()
            conn = self._connection()
            _send(conn, raw)
        if not conn.poll(self._limits.timeout_s):
            self._discard()
            raise InvalidRequestError(
                f"conversion of {raw.label} took longer than {format_seconds(self._limits.timeout_s)}"
            )
        return self._reply(conn, raw)

    def _reply(self, conn: Connection, raw: RawDocument) -> ConvertedDocument:
        try:
            payload = conn.recv_bytes(self._max_reply)
        except EOFError:
            raise self._death(raw) from None
        except OSError as exc:
            self._discard()
            raise EngineError(
                f"{raw.label}: the converter worker sent a reply over {format_bytes(self._max_reply)}"
            ) from exc
        try:
            reply = read_reply(payload)
        except ValueError:
            reply = None
        if isinstance(reply, Done):
            return document_of(reply)
        if isinstance(reply, Failed):
            raise error_of(reply)
        self._discard()
        raise EngineError(f"{raw.label}: the converter worker sent an unreadable reply and was replaced")

    def _death(self, raw: RawDocument) -> Error:
        """The error for a worker that hung up mid-job, after reaping it; its exit says which limit it hit."""
        exitcode = self._discard()
        if exitcode == EXIT_OUT_OF_MEMORY:
            ceiling = format_bytes(self._limits.memory_bytes)
            return InvalidRequestError(f"conversion of {raw.label} ran out of its {ceiling} memory ceiling")
        return EngineError(f"conversion of {raw.label} failed: its worker process {_exit_story(exitcode)}")

    def start(self) -> None:
        """Start the process now if it is not running; a failure to start is left for the next job."""
        try:
            self._connection()
        except Error:
            return

    def _connection(self) -> Connection:
        """The live process's pipe, starting a process first when there is none or it died."""
        with self._lock:
            if self._process is not None and self._conn is not None and self._process.is_alive():
                return self._conn
            self._stop()
            return self._start()

    def _start(self) -> Connection:
        parent, child = _CONTEXT.Pipe()
        process = _CONTEXT.Process(
            target=serve, args=(child, self._limits, self._chain_factory), name="tinymemory-convert", daemon=True
        )
        process.start()
        child.close()
        self._process, self._conn = process, parent
        try:
            _await_ready(parent, self._limits)
        except Error:
            self._stop()
            raise
        return parent

    def _discard(self) -> int | None:
        """Kill and reap the process (if any) and return its exit code."""
        with self._lock:
            return self._stop(kill=True)

    def _stop(self, *, kill: bool = False) -> int | None:
        """Stop and reap the process; the caller holds the lock. Returns its exit code."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if process is None or conn is None:
            return None
        if not kill and process.is_alive():
            _try_send_stop(conn)
            process.join(_STOP_GRACE_S)
        if process.is_alive():
            process.kill()
        process.join(_STOP_GRACE_S)
        conn.close()
        exitcode = process.exitcode
        process.close()
        return exitcode


def _send(conn: Connection, raw: RawDocument) -> None:
    conn.send_bytes(job_for(raw).model_dump_json().encode())
    conn.send_bytes(raw.data)


def _await_ready(conn: Connection, limits: ConvertLimits) -> None:
    if not conn.poll(START_TIMEOUT_S):
        raise EngineError(f"the converter worker did not start within {format_seconds(START_TIMEOUT_S)}")
    try:
        reply = read_reply(conn.recv_bytes(1 << 20))
    except EOFError:
        raise _start_failure(limits) from None
    except (OSError, ValueError):
        reply = None
    if isinstance(reply, Failed):
        raise error_of(reply)
    if not isinstance(reply, Ready):
        raise EngineError("the converter worker sent an unreadable greeting")


def _start_failure(limits: ConvertLimits) -> Error:
    # Reaping happens in the caller's `_stop`; the greeting's absence is enough to say what went wrong.
    ceiling = format_bytes(limits.memory_bytes)
    return EngineError(f"the converter worker exited while starting (is its {ceiling} memory ceiling too low?)")


def _try_send_stop(conn: Connection) -> None:
    with contextlib.suppress(OSError):
        conn.send_bytes(Stop().model_dump_json().encode())


def _exit_story(exitcode: int | None) -> str:
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by {name} and was replaced"
    return f"exited with code {exitcode} and was replaced"
