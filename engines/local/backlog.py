"""The vector backlog: passages stored without vectors, embedded in batches on a thread of their own.

Storing an item commits it, keyword-searchable, without waiting for the embedder; its passages
are queued, and this thread claims them a batch at a time, embeds them, and saves the vectors.
Every process on the file runs one: each wakes when it stores something and otherwise looks
every few seconds, so a queue left by a process that stopped is embedded by another.

A backfill is not slowed by it: on two cores, embedding beside a backfill cost the backfill a
third of its speed or more. So the backlog yields while any process on the file is storing or
removing items (writes note when they last did), embedding in the pauses between them and after a backfill;
under stores that never pause it still embeds a batch every `MAX_YIELD_S`. Its thread also runs
at a lower CPU priority.

An embedder that fails (an endpoint down) is retried with growing pauses and never fails a
store; meanwhile ranked reads fall back to keyword for what is not embedded, and `problem` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time

from engines.contract import Error
from engines.lane import Lane
from engines.local import pending, progress
from engines.local.database import Database
from engines.local.embed import Embedder
from engines.local.rows import indexed_texts

logger = logging.getLogger(__name__)

BATCH = 64
"""Passages embedded per call: enough to share a model's (or an endpoint's) per-call cost."""

CLAIM_MS = 120_000
"""How long a claim holds: far longer than a batch takes, short enough that a dead process's claims lapse soon."""

LOOK_S = 2.0
"""How often an idle backlog looks for passages another process queued."""

QUIET_S = 0.25
"""How long after the last store or removal the backlog waits before it embeds: a backfill's come closer."""

MAX_YIELD_S = 30.0
"""The longest the backlog yields to writes before it embeds a batch anyway."""

_PAUSES_S = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


def _now_ms() -> int:
    return int(time.time() * 1000)


class VectorBacklog(Lane):
    """The backlog thread of one engine; `start` it once the file's embedder is settled, `close` it last
    (a batch being embedded is abandoned: its claims are handed back)."""

    def __init__(self, db: Database, embedder: Embedder, path: str, batch: int | None = None) -> None:
        super().__init__(name="tm-local-embed", label=f"vector backlog of {path}", pauses=_PAUSES_S, log=logger)
        self._db = db
        self._embedder = embedder
        self._path = path
        # A model as slow as MiniLM names a smaller batch: closing an engine waits for the batch being embedded.
        preferred: int = getattr(embedder, "backlog_batch", BATCH)
        self._batch = batch if batch is not None else preferred
        self._owner = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._yielding_since: float | None = None

    def finished(self) -> None:
        with contextlib.suppress(Exception):  # the file may be closed already
            self._db.run_now(lambda conn: pending.release(conn, self._owner))

    def round_once(self, loop: asyncio.AbstractEventLoop) -> float:
        """One batch; how long to pause before the next (0: go on at once)."""
        try:
            done = self._embed_batch(loop)
        except Error as err:
            return self._embedder_failed(str(err))
        except Exception as err:
            # The file was closed under the thread, or the interpreter is exiting with the engine left open
            # (its executors then refuse work, saying so): stop, quietly.
            exiting = isinstance(err, RuntimeError) and "after" in str(err) and "shutdown" in str(err)
            if self._stopping.is_set() or self._db.closed or exiting:
                self._stopping.set()
                return 0.0
            # Anything else is a bug; it must not end the thread and leave the backlog stuck.
            logger.exception("vector backlog of %s failed", self._path)
            return self._embedder_failed(f"{type(err).__name__}: {err}")
        if done is None:
            return QUIET_S
        return 0.0 if done else LOOK_S

    def _yields(self, since_write_ms: int) -> bool:
        """Whether to leave the machine to stores now (never for longer than MAX_YIELD_S in a row)."""
        if since_write_ms >= QUIET_S * 1000:
            self._yielding_since = None
            return False
        began = self._yielding_since = self._yielding_since or time.monotonic()
        if time.monotonic() - began < MAX_YIELD_S:
            return True
        self._yielding_since = None
        return False

    def _embed_batch(self, loop: asyncio.AbstractEventLoop) -> int | None:
        """How many passages were embedded; None when it yielded to stores."""
        now = _now_ms()
        claimable, written = self._db.read_now(lambda conn: (pending.claimable(conn, now), pending.last_written(conn)))
        if not claimable:
            return 0
        if self._yields(now - written):
            return None
        spans = self._db.run_now(lambda conn: pending.claim(conn, self._owner, now, CLAIM_MS, self._batch))
        if not spans or self._stopping.is_set():
            return 0
        rowids = [span[0] for span in spans]
        texts = [text for _, text in indexed_texts(spans)]
        try:
            vectors = loop.run_until_complete(self._embedder.embed(texts))
        except BaseException:
            self._db.run_now(lambda conn: pending.release(conn, self._owner))
            raise
        self.recovered()  # before saving, so nobody sees the backlog empty and still failing
        identity = self._embedder.identity
        saved = self._db.run_now(lambda conn: pending.save(conn, identity, rowids, vectors))
        if saved is None:
            return self._outvoted()
        self._db.run_now(progress.stamp)  # how fast vectors are stored, for every process's status
        return len(spans)

    def _embedder_failed(self, reason: str) -> float:
        return self.failed(reason, f"the embedder {self._embedder.identity} is failing: {reason}")

    def _outvoted(self) -> int:
        # Another process made the file another embedder's after this one opened it. Taking it back
        # would have the two re-embed the file in turn for ever: this process stops embedding instead.
        found = self._db.read_now(pending.recorded_embedder)
        self.problem = (
            f"memory file {self._path} is now indexed with embedder {found}, not this process's "
            f"{self._embedder.identity}; configure the same embedder in every process and restart this one"
        )
        logger.error("%s; it searches by keyword only until then", self.problem)
        self._stopping.set()
        return 0
