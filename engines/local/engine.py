"""`LocalEngine`: the embedded default, a persistent SQLite memory with keyword, vector and hybrid search."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from engines.contract import (
    EngineDescriptor,
    EngineHealth,
    EraseReport,
    EraseRequest,
    Error,
    ExplorePage,
    ExploreRequest,
    ExportPage,
    FetchMode,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    GetRequest,
    Hit,
    Item,
    ListPage,
    ListRequest,
    MemoryEngine,
    MetaFilter,
    RecallAnswer,
    RecallRequest,
    StoreReceipt,
    TimeHint,
    in_request_order,
    validate_many,
)
from engines.local import pending, progress, reads, writes
from engines.local.backlog import VectorBacklog
from engines.local.database import Database, read_snapshot
from engines.local.embed import Embedder, Vectors
from engines.local.feed import store_items
from engines.local.fusion import fusion_for
from engines.local.minilm import MiniLMEmbedder
from engines.local.openai import ChatSynthesizer
from engines.local.postings import Postings
from engines.local.ranking import Rankers, Ranking, RankRequest, rank
from engines.local.recall import extractive_answer
from engines.local.rows import indexed_texts
from engines.local.search import TermCounts
from engines.local.vectors import VectorIndex
from engines.local.where import Where, add_erase_scope, add_reach, filter_where, kinds_where

logger = logging.getLogger(__name__)

# Aliases for annotations inside LocalEngine, where the method `list` shadows the builtin.
_Hits = list[Hit]
_Items = list[Item]
_Receipts = list[StoreReceipt]

DESCRIPTOR = EngineDescriptor(
    id="local",
    label="Local",
    description="An embedded SQLite memory on this machine with keyword (BM25), vector and hybrid search.",
    fetch_modes=(FetchMode.KEYWORD, FetchMode.VECTOR, FetchMode.HYBRID),
)

DEFAULT_PASSAGE_CHARS = 3000
DEFAULT_MIN_SIMILARITY = 0.15

FALLBACK_LOG_S = 60.0
"""At most one log line a minute says that ranked reads stood on keyword for items without vectors."""
QUERY_VECTORS = 1024
"""Query vectors kept, least recently used dropped first (1.5 KiB each at 384 dimensions)."""


RANKING_BLOCK = 100

# SQLite binds 64-bit integers only. No store holds this many rows, so a larger limit, cursor or offset
# answers the same once bounded to it, and the ranking windows computed from it stay within range.
MAX_ROWS = 2**40


def ranking_window(want: int) -> int:
    """How deep each ranking is read for `want` hits: whole blocks of 100.

    Fusion and the time hint reorder within what was read, so reading to a depth that depends
    only on the block keeps the order of every page within one block identical, and a cursor
    never shows an item twice there. (A time hint reads four times deeper, as it reorders.)
    """
    return -(-want // RANKING_BLOCK) * RANKING_BLOCK


def _bounded(rows: int) -> int:
    return min(rows, MAX_ROWS)


class LocalEngine(MemoryEngine):
    """One SQLite file (WAL) shared safely by several processes; `tenant` isolates users of one file.

    Every write is one transaction. Reads see every committed write of every process. An item is
    keyword-searchable once stored; its vectors follow from the backlog (for every item with an
    embedder as cheap as the hashing one, as it is stored), and until then vector and hybrid reads
    rank it by keyword. The last item of a store call is the exception the contract asks for: the
    first vector or hybrid read after the call embeds it, if the backlog has not yet, before it
    ranks. The embedder defaults to all-MiniLM-L6-v2 (`minilm.py`: semantic, offline). A file indexed
    with another embedder is re-embedded with this one, in the background; vectors of two embedders are
    never searched together.
    """

    stores_in_process = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        tenant: str | None = None,
        embedder: Embedder | None = None,
        chat: ChatSynthesizer | None = None,
        passage_chars: int = DEFAULT_PASSAGE_CHARS,
        min_similarity: float = DEFAULT_MIN_SIMILARITY,
    ) -> None:
        self._db = Database(Path(path))
        self._tenant = tenant or ""
        self._embedder = embedder or MiniLMEmbedder()
        self._chat = chat
        self._passage_chars = passage_chars
        self._rankers = Rankers(
            vectors=VectorIndex(self._embedder.identity, self._embedder.dimensions),
            counts=TermCounts(),
            min_similarity=min_similarity,
            fusion=fusion_for(self._embedder),
            postings=Postings(),
        )
        self._backlog = VectorBacklog(self._db, self._embedder, str(self._db.path))
        self._opened = threading.Event()
        self._fallback_said = -FALLBACK_LOG_S
        self._query_vectors: OrderedDict[str, NDArray[np.float32]] = OrderedDict()

    @property
    def path(self) -> Path:
        return self._db.path

    def descriptor(self) -> EngineDescriptor:
        return DESCRIPTOR

    def close(self) -> None:
        self._backlog.close()
        if self._rankers.postings is not None:
            self._rankers.postings.close()  # its catch-up thread, which would otherwise wait for collection
        self._db.close()

    async def health(self) -> EngineHealth:
        try:
            await self._db.read(lambda conn: conn.execute("SELECT count(*) FROM schema_version").fetchone())
        except Error as err:
            return EngineHealth.down(str(err))
        problem = self._backlog.problem
        return (
            EngineHealth.degraded(f"{problem}; ranked reads use keyword search meanwhile")
            if problem
            else EngineHealth.ok()
        )

    async def vector_backlog(self) -> int:
        """How many passages are waiting for their vectors (in the whole file, every tenant's)."""
        return await self._db.read(pending.pending_count)

    async def vector_progress(self) -> progress.VectorProgress:
        """The file's vector backlog: passages waiting, vectors stored so far, and the rate over the last minute,
        every process's embedding counted; a cheap read that starts no embedding (a status may call it)."""
        return await self._db.read(progress.read)

    async def wait_for_vectors(self, timeout_s: float = 60.0) -> bool:
        """Wait until no passage waits for its vector; False when `timeout_s` passed first."""
        await self._open()
        deadline = time.monotonic() + timeout_s
        while await self.vector_backlog():
            if time.monotonic() >= deadline:
                return False
            self._backlog.notify()
            await asyncio.sleep(0.02)
        return True

    async def wait_for_keyword_index(self, timeout_s: float = 600.0) -> bool:
        """Wait until the derived keyword index holds every passage (True at once for a file too small to have
        one); False when `timeout_s` passed first. Searches never wait for it (FTS5 answers what it lacks): this
        is for benchmarks that mean to measure the index itself."""
        postings = self._rankers.postings
        if postings is None:
            return True
        return await self._db.read(lambda conn: postings.wait_caught_up(conn, timeout_s))

    async def _open(self) -> None:
        """Settle the file's embedder (adopting it, and queueing a re-embedding, when it is another's)
        and start the backlog; once per engine."""
        if self._opened.is_set():
            return
        identity = self._embedder.identity
        if await self._db.read(pending.recorded_embedder) != identity:
            replaced, queued = await self._db.run(lambda conn: pending.adopt(conn, identity))
            if replaced is not None:
                logger.warning(
                    "memory file %s was indexed with embedder %s; re-embedding its %d passages with %s in the "
                    "background (vector and hybrid reads use keyword search for them meanwhile)",
                    self.path,
                    replaced,
                    queued,
                    identity,
                )
        self._opened.set()
        self._backlog.start()

    # -- writes ---------------------------------------------------------------------------------

    async def store(self, item: Item) -> StoreReceipt:
        item.check()
        return (await self._store([item]))[0]

    async def store_many(self, items: _Items) -> _Receipts:
        validate_many(items)
        return await self._store(items)

    async def _store(self, items: _Items) -> _Receipts:
        await self._open()
        return await store_items(
            self._db, self._tenant, self._embedder, items, self._passage_chars, self._backlog.notify
        )

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        target.check()
        if target.filter is not None:
            where = filter_where(self._tenant, target.filter)
            removed = await self._db.run(lambda conn: writes.delete_where(conn, where))
            return ForgetReport(forgotten=len(removed))
        ids = list(dict.fromkeys(target.ids or []))
        forgotten = await self._db.run(lambda conn: writes.delete_ids(conn, self._tenant, ids))
        return ForgetReport(forgotten=forgotten)

    async def erase(self, req: EraseRequest) -> EraseReport:
        req.check()
        where = Where()
        where.add("i.tenant = ?", self._tenant)
        add_erase_scope(where, req.reach)
        kinds_where(where, req.kinds)
        removed = await self._db.run(lambda conn: writes.delete_where(conn, where))
        return EraseReport(erased_scopes=len(set(removed)))

    # -- listing reads --------------------------------------------------------------------------

    async def list(self, req: ListRequest) -> ListPage:
        req.check()
        after, limit = _bounded(reads.list_after(req.cursor)), _bounded(req.limit)
        where = filter_where(self._tenant, req.filter)
        hits, cursor = await self._db.read(lambda conn: reads.list_page(conn, where, after, limit))
        return ListPage(items=hits, next_cursor=cursor)

    async def export(self, req: ListRequest) -> ExportPage:
        req.check()
        after, limit = _bounded(reads.list_after(req.cursor)), _bounded(req.limit)
        where = filter_where(self._tenant, req.filter)
        items, cursor = await self._db.read(lambda conn: reads.export_page(conn, where, after, limit))
        return ExportPage(items=items, next_cursor=cursor)

    async def get(self, req: GetRequest) -> _Hits:
        req.check()
        where = Where()
        where.add("i.tenant = ?", self._tenant)
        add_reach(where, req.reach)
        found = await self._db.read(lambda conn: reads.get_hits(conn, where, req.ids))
        return in_request_order(req.ids, found)

    async def explore(self, req: ExploreRequest) -> ExplorePage:
        req.check()
        where = filter_where(self._tenant, req.filter)
        return await self._db.read(lambda conn: reads.explore_counts(conn, where, req.facet, req.limit))

    # -- ranked reads ---------------------------------------------------------------------------

    async def fetch(self, req: FetchRequest) -> FetchPage:
        req.check()
        DESCRIPTOR.ensure_mode(req.mode)
        offset, limit = _bounded(reads.fetch_offset(req.cursor)), _bounded(req.limit)
        hits = await self._ranked(req.query, req.mode, req.filter, offset + limit + 1, req.refers_to, offset)
        more = len(hits) > limit
        return FetchPage(hits=hits[:limit], next_cursor=reads.fetch_cursor(offset + limit) if more else None)

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        req.check()
        hits = await self._ranked(req.question, FetchMode.HYBRID, req.filter, _bounded(req.limit), req.refers_to)
        answer = extractive_answer(req.question, hits)
        if self._chat is None or not hits:
            return answer
        try:
            text = await self._chat.answer(req.question, req.instructions, hits)
        except Error as err:
            logger.warning("recall synthesis failed, answering extractively: %s", err)
            return answer
        return answer.model_copy(update={"answer": text, "model": self._chat.model})

    async def _ranked(
        self,
        query: str,
        mode: FetchMode,
        filter: MetaFilter,
        want: int,
        refers_to: TimeHint | None,
        skip: int = 0,
    ) -> _Hits:
        """Hits ranked `skip` to `want` (exclusive); only those are read back from the file."""
        await self._open()
        # Keyword's first items are the same however deep it reads (a plain sort, unlike a fusion or a time hint):
        # it reads only as deep as this page.
        plain = mode is FetchMode.KEYWORD and refers_to is None
        window = want if plain else ranking_window(want * 4 if refers_to is not None else want)
        vector = None
        if mode is not FetchMode.KEYWORD:
            vector, _ = await asyncio.gather(self._query_vector(query), self._keep_promise())
        request = RankRequest(filter_where(self._tenant, filter), query, mode, vector, window)

        def work(conn: sqlite3.Connection) -> tuple[_Hits, Ranking]:
            # One state of the file: the counts a ranking is scored with, and the hits read back, agree.
            with read_snapshot(conn):
                ranking = rank(conn, request, self._rankers)
                if refers_to is None:
                    return reads.ranked_hits(conn, ranking.ranked[skip:want]), ranking
                # The hint reorders by observation day, which only the read-back hits know.
                return refers_to.rank(reads.ranked_hits(conn, ranking.ranked))[skip:want], ranking

        hits, ranking = await self._db.read(work)
        if ranking.keyword_only or (vector is None and mode is not FetchMode.KEYWORD):
            self._say_fallback(mode, ranking)
        return hits

    async def _query_vector(self, query: str) -> NDArray[np.float32] | None:
        known = self._query_vectors.get(query)
        if known is not None:
            self._query_vectors.move_to_end(query)
            return known
        try:
            vectors: Vectors = await self._embedder.embed([query])
        except Error as err:
            logger.warning("cannot embed a query, ranking it by keyword: %s", err)
            return None
        query_vector: NDArray[np.float32] = vectors[0]
        # Agents ask again (and recall reads after fetch): a model's milliseconds, or an endpoint's round trip, once.
        self._query_vectors[query] = query_vector
        if len(self._query_vectors) > QUERY_VECTORS:
            self._query_vectors.popitem(last=False)
        return query_vector

    async def _keep_promise(self) -> None:
        """Embed what is left of the items promised by store calls (`pending.promise`, a bounded part of them)."""
        spans = await self._db.read(pending.promised)
        if not spans:
            return
        try:
            vectors = await self._embedder.embed([text for _, text in indexed_texts(spans)])
        except Error as err:
            logger.warning("cannot embed the last stored item, ranking it by keyword: %s", err)
            return
        identity, rowids = self._embedder.identity, [span[0] for span in spans]
        await self._db.run(lambda conn: pending.save(conn, identity, rowids, vectors))

    def _say_fallback(self, mode: FetchMode, ranking: Ranking) -> None:
        now = time.monotonic()
        if now - self._fallback_said < FALLBACK_LOG_S:
            return
        self._fallback_said = now
        if ranking.foreign_vectors:
            reason = f"the memory file's vectors are another embedder's than {self._embedder.identity}"
        elif ranking.keyword_only:
            reason = "their vectors are still being computed"
        else:
            reason = "the query could not be embedded"
        logger.info("a %s read ranked %d of its items by keyword: %s", mode.value, ranking.keyword_only, reason)
