"""The PostgreSQL engine's vector backlog: a thread that claims queued passages, embeds them and saves the vectors.

Every process on the database runs one (workers on many hosts, the API): each claims its batch with
`FOR UPDATE SKIP LOCKED` (`vectors.claim`), so they share the queue without ever embedding a passage twice, and
a batch held by a process that died goes back to the queue with its connection. The thread wakes when its own
engine queued passages and otherwise looks every `LOOK_S`, so what another process left is embedded too. An
embedder or a server that fails is retried with growing pauses and never fails a store; ranked reads stand on
keyword for what has no vector meanwhile, and `problem` says why.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

import psycopg

from engines.contract import Error
from engines.lane import Lane
from engines.local.embed import Embedder, Vectors
from engines.postgres import vectors
from engines.postgres.connection import Database

logger = logging.getLogger(__name__)

BATCH = 64
LOOK_S = 2.0
_PAUSES_S = (1.0, 2.0, 5.0, 10.0, 30.0)


class VectorBacklog(Lane):
    """The backlog thread of one engine: `start` once the schema is settled, `close` before the pool (a batch
    being embedded is abandoned: its transaction rolls back, the rows go back)."""

    def __init__(self, db: Database, embedder: Embedder, where: str, batch: int | None = None) -> None:
        label = f"vector backlog of postgresql at {where}"
        super().__init__(name="tm-postgres-embed", label=label, pauses=_PAUSES_S, log=logger)
        self._db = db
        self._embedder = embedder
        self._where = where
        preferred: int = getattr(embedder, "backlog_batch", BATCH)
        self._batch = batch if batch is not None else preferred

    def round_once(self, loop: asyncio.AbstractEventLoop) -> float:
        """One batch; how long to pause before the next (0: go on at once)."""
        try:
            done = self._db.run_now(lambda conn: embed_batch(conn, self._embed(loop), self._batch, self._stopping))
        except Error as err:
            if self._stopping.is_set() or self._db.closed:
                return 0.0
            return self._failed(str(err))
        except Exception as err:
            if self._stopping.is_set() or self._db.closed:
                self._stopping.set()
                return 0.0
            logger.exception("vector backlog of postgresql at %s failed", self._where)
            return self._failed(f"{type(err).__name__}: {err}")
        self.recovered()
        return 0.0 if done else LOOK_S

    def _embed(self, loop: asyncio.AbstractEventLoop) -> Callable[[list[str]], Vectors]:
        return lambda texts: loop.run_until_complete(self._embedder.embed(texts))

    def _failed(self, reason: str) -> float:
        return self.failed(reason, f"vectors are not being computed: {reason}")


class AbandonedError(Exception):
    """The engine is closing: the batch's transaction rolls back and its passages go back to the queue."""


def embed_batch(
    conn: psycopg.Connection,
    embed: Callable[[list[str]], Vectors],
    limit: int,
    stopping: threading.Event | None = None,
    among: list[int] | None = None,
) -> int:
    """Claim, embed (with `embed`, on this thread) and save one batch in one transaction; how many passages were
    embedded. `among` claims only those passages (a store call's promised last item)."""
    with conn.transaction():
        claimed = vectors.claim(conn, limit, among)
        if not claimed:
            return 0
        embedded = embed([text for _, text in claimed])
        if stopping is not None and stopping.is_set():
            raise AbandonedError
        vectors.finish(conn, [passage for passage, _ in claimed], embedded)
    return len(claimed)


__all__ = ["VectorBacklog", "embed_batch"]
