"""The local engine's connections: one SQLite file in WAL mode, one writing thread and a few reading ones.

Several processes (workers, the API) share the file: readers never block the writer, and a
writer waits for another's transaction (busy timeout) instead of failing. Each engine runs its
SQL on worker threads so the event loop never blocks on the disk: writes on one thread (SQLite
has one writer anyway), reads on a small pool, each thread with its own connection. SQLite
releases the GIL while a statement runs, so concurrent searches use every core.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from threadpoolctl import threadpool_limits

from engines.contract import ConfigError, EngineError, UnavailableError
from engines.local.schema import ensure_schema

T = TypeVar("T")

BUSY_TIMEOUT_MS = 60_000

_PRAGMAS = (
    # Only takes effect when the file is created; 16 KiB pages hold several 2 KB items each.
    "PRAGMA page_size = 16384",
    "PRAGMA journal_mode = WAL",
    # NORMAL in WAL mode loses nothing when a process dies; only a power cut can drop the last commit.
    "PRAGMA synchronous = NORMAL",
    f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
    "PRAGMA foreign_keys = ON",
    "PRAGMA temp_store = MEMORY",
    "PRAGMA cache_size = -65536",
    "PRAGMA mmap_size = 268435456",
)


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating when absent) and migrate the memory file at `path`."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: transactions are opened explicitly, so reads never hold a lock.
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
    except (sqlite3.DatabaseError, OSError) as err:
        raise ConfigError(f"cannot create memory file {path}: {getattr(err, 'strerror', None) or err}") from err
    try:
        for pragma in _PRAGMAS:
            _settle(conn, pragma)
        ensure_schema(conn, str(path))
    except sqlite3.DatabaseError as err:
        conn.close()
        raise ConfigError(f"cannot open memory file {path}: {err}") from err
    except ValueError as err:  # a stored item a migration could not read back (rolled back whole)
        conn.close()
        raise ConfigError(f"cannot migrate memory file {path}: {err}") from err
    except BaseException:
        conn.close()
        raise
    return conn


def _settle(conn: sqlite3.Connection, pragma: str) -> None:
    """Run `pragma`, waiting while another connection holds the file. Switching a brand-new file to WAL
    answers "database is locked" at once, without the busy handler, when two connections (two reading
    threads, or two processes starting together) create it at the same moment."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute(pragma)
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One atomic write: all of it is committed, or none of it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextmanager
def read_snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Reads that see one state of the file: every statement in it sees the commits made before its first one
    (outside it, each statement sees the latest, so counts read one after another may disagree). Within a
    transaction already, it is that transaction's."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def _translate(err: sqlite3.Error) -> Exception:
    text = str(err)
    if isinstance(err, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return UnavailableError(f"the memory file is busy: {text}")
    if isinstance(err, sqlite3.OperationalError) and ("disk" in text or "full" in text):
        return UnavailableError(f"the memory file cannot be written: {text}")
    return EngineError(f"local engine failed: {text}")


def _started(threads: int, name: str) -> ThreadPoolExecutor:
    """A pool whose threads all run already, started by the calling thread.

    A thread takes its scheduling priority from the thread that starts it, and a pool starts a thread when
    work comes in and no thread is free. Started lazily, a reading thread could be started by the vector
    backlog (which runs at a lower priority) and then serve every search at that priority: seen as one of
    an API's two reading threads running at nice 10.
    """
    executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
    all_busy = threading.Barrier(threads + 1)
    for _ in range(threads):
        executor.submit(all_busy.wait)  # each finds no thread free, so each starts one
    all_busy.wait()
    return executor


class _Lane:
    """One connection and the one thread that uses it."""

    def __init__(self, path: Path, name: str) -> None:
        self._path = path
        self._executor = _started(1, f"tm-local-{name}")
        self._conn: sqlite3.Connection | None = None

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await self.submit(work)

    def submit(self, work: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        return asyncio.get_running_loop().run_in_executor(self._executor, self._call, work)

    def run_now(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return self._executor.submit(self._call, work).result()

    def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        if self._conn is None:
            self._conn = connect(self._path)
        try:
            return work(self._conn)
        except sqlite3.Error as err:
            raise _translate(err) from err

    def close(self) -> None:
        def _close(_: object) -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        self._executor.submit(_close, None).result()
        self._executor.shutdown(wait=True)


class _ReadPool:
    """Reading threads, each with a connection of its own opened on first use."""

    def __init__(self, path: Path, threads: int) -> None:
        self._path = path
        self._executor = _started(threads, "tm-local-read")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: list[sqlite3.Connection] = []

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, work)

    def run_now(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return self._executor.submit(self._call, work).result()

    def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = connect(self._path)
            with self._lock:
                self._conns.append(conn)
        try:
            return work(conn)
        except sqlite3.Error as err:
            raise _translate(err) from err

    def close(self) -> None:
        # Shut the threads down first, so no read is running on a connection as it closes.
        self._executor.shutdown(wait=True)
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()


def one_blas_thread() -> None:
    """Let numpy's BLAS use one thread per call, in this whole process, from now on.

    Searches already run side by side on the reading threads, one per core. A BLAS that also spreads
    each vector product over every core makes those threads wait on one another: measured on 2 cores,
    a hybrid search's vector ranking took 10 ms a query with OpenBLAS's default and 0.4 ms with one
    thread (4,000 passages, under concurrent reads). Nothing in this project gains from a threaded BLAS.
    """
    global _ONE_BLAS_THREAD
    if not _ONE_BLAS_THREAD:
        threadpool_limits(limits=1, user_api="blas")
        _ONE_BLAS_THREAD = True


_ONE_BLAS_THREAD = False


def read_threads() -> int:
    """Reading threads per engine: one per core, at least 2 (one search never waits on another's disk
    read) and at most 8 (more would only hold more connections and page caches)."""
    return max(2, min(8, os.cpu_count() or 1))


class Database:
    """The memory file as a writing lane and a pool of reading threads.

    WAL lets readers run while a write is in progress, so a search (or the replay check of the
    next batch) never waits behind a long write transaction of this process, nor behind another search.
    """

    def __init__(self, path: Path, readers: int | None = None) -> None:
        one_blas_thread()
        self.path = path
        self.closed = False
        self._writer = _Lane(path, "write")
        self._reader = _ReadPool(path, readers or read_threads())

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` on the writing thread; SQLite failures become contract errors."""
        return await self._writer.run(work)

    def submit(self, work: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """`run`, with `work` handed to the writing thread at once (before the caller next awaits), so the
        caller can go on with what `work` waits for (see `feed.Feed`)."""
        return self._writer.submit(work)

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run read-only `work` on a reading thread; it sees every committed write. `work` may run at the
        same time as other reads, on another connection: what it shares with them must be thread-safe."""
        return await self._reader.run(work)

    def run_now(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`run`, from a thread without an event loop (the vector backlog's); waits for the result."""
        return self._writer.run_now(work)

    def read_now(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`read`, from a thread without an event loop; waits for the result."""
        return self._reader.run_now(work)

    def open_now(self) -> None:
        """Open the file at once, so configuration errors surface now rather than at first use."""
        self._writer.run_now(lambda conn: None)

    def close(self) -> None:
        self.closed = True
        self._writer.close()
        self._reader.close()
