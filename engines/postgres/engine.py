"""`PostgresEngine`: memory in a PostgreSQL database with pgvector, shared by processes on many hosts."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict

import numpy as np
import psycopg
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
    ItemId,
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
from engines.local.embed import Embedder, Vectors, embeds_quickly
from engines.local.engine import DEFAULT_MIN_SIMILARITY, DEFAULT_PASSAGE_CHARS, MAX_ROWS, ranking_window
from engines.local.feed import prepared_item
from engines.local.fusion import fusion_for
from engines.local.minilm import MiniLMEmbedder
from engines.local.openai import ChatSynthesizer
from engines.local.ranking import Ranking
from engines.local.reads import fetch_cursor, fetch_offset, list_after
from engines.local.recall import extractive_answer
from engines.local.rows import PreparedItem
from engines.local.where import Where, add_erase_scope, add_reach, filter_where, kinds_where
from engines.postgres import reads, vectors, writes
from engines.postgres.backlog import VectorBacklog, embed_batch
from engines.postgres.connection import Database, translated
from engines.postgres.keyword import KeywordStats
from engines.postgres.ranking import rank
from engines.postgres.schema import ensure_schema
from engines.settings import masked_endpoint

logger = logging.getLogger(__name__)

_Hits = list[Hit]
_Items = list[Item]
_Receipts = list[StoreReceipt]

DESCRIPTOR = EngineDescriptor(
    id="postgres",
    label="PostgreSQL",
    description="A PostgreSQL database with pgvector, shared by workers on many hosts: keyword (BM25), vector "
    "(HNSW) and hybrid search.",
    needs_endpoint=True,
    default_endpoint="postgresql://tinymemory@localhost:5432/tinymemory",
    fetch_modes=(FetchMode.KEYWORD, FetchMode.VECTOR, FetchMode.HYBRID),
)

QUERY_VECTORS = 1024
PROMISED_PASSAGES = 16
"""Passages of the last stored item a vector read embeds first, at most (`engines.local.pending.PROMISED_PASSAGES`)."""


class PostgresEngine(MemoryEngine):
    """One PostgreSQL database shared by every process and host; `tenant` isolates users of one database.

    Every store call is one transaction. An item is keyword-searchable once stored; its vectors follow from the
    backlog (at once, in the same transaction, for an embedder as cheap as hashing), and until then vector and
    hybrid reads rank it by keyword. As with the local engine, the last item of a store call is embedded by the
    next vector or hybrid read of this engine, if the backlog has not yet. The database's vectors are one
    embedder's: an engine built with another is refused when it opens the database.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        password: str | None = None,
        tenant: str | None = None,
        embedder: Embedder | None = None,
        chat: ChatSynthesizer | None = None,
        passage_chars: int = DEFAULT_PASSAGE_CHARS,
        min_similarity: float = DEFAULT_MIN_SIMILARITY,
    ) -> None:
        self._db = Database(endpoint, password)
        self._where = masked_endpoint(endpoint)
        self._tenant = tenant or ""
        self._embedder = embedder or MiniLMEmbedder()
        self._chat = chat
        self._passage_chars = passage_chars
        self._min_similarity = min_similarity
        self._fusion = fusion_for(self._embedder)
        self._stats = KeywordStats()
        self._backlog = VectorBacklog(self._db, self._embedder, self._where)
        self._open_lock = threading.Lock()
        self._opened = False
        self._promised: list[int] = []
        self._query_vectors: OrderedDict[str, NDArray[np.float32]] = OrderedDict()

    @property
    def database(self) -> Database:
        return self._db

    def descriptor(self) -> EngineDescriptor:
        return DESCRIPTOR

    def settle(self) -> None:
        """Settle the database now (schema, pgvector, embedder) and open the pool; once per engine. A wrong
        database is a `ConfigError`, an unreachable one `UnavailableError` (the next call tries again)."""
        with self._open_lock:
            if self._opened:
                return
            conn = self._db.connect()
            try:
                ensure_schema(conn, self._where, self._embedder.identity, self._embedder.dimensions)
            except psycopg.Error as err:
                raise self._translated(err) from err
            finally:
                conn.close()
            self._db.open()
            self._backlog.start()
            self._opened = True

    def _translated(self, err: BaseException) -> Error:
        return translated(err, self._db.endpoint)

    async def _open(self) -> None:
        if not self._opened:
            await asyncio.to_thread(self.settle)

    def close(self) -> None:
        self._backlog.close()
        self._db.close()

    async def health(self) -> EngineHealth:
        try:
            await self._open()
            await self._db.run(lambda conn: conn.execute("SELECT 1 FROM schema_version LIMIT 1").fetchone())
        except Error as err:
            return EngineHealth.down(str(err))
        problem = self._backlog.problem
        return (
            EngineHealth.degraded(f"{problem}; ranked reads use keyword search meanwhile")
            if problem
            else (EngineHealth.ok())
        )

    async def vector_backlog(self) -> int:
        """How many passages are waiting for their vectors (in the whole database, every tenant's)."""
        await self._open()
        return await self._db.run(vectors.pending_count)

    async def vector_progress(self) -> vectors.VectorProgress:
        """The database's vector backlog (every process's work counted): a cheap read that starts no embedding."""
        await self._open()
        return await self._db.run(vectors.progress)

    async def wait_for_vectors(self, timeout_s: float = 60.0) -> bool:
        """Wait until no passage waits for its vector; False when `timeout_s` passed first."""
        deadline = time.monotonic() + timeout_s
        while await self.vector_backlog():
            if time.monotonic() >= deadline:
                return False
            self._backlog.notify()
            await asyncio.sleep(0.05)
        return True

    # -- writes ---------------------------------------------------------------------------------

    async def store(self, item: Item) -> StoreReceipt:
        item.check()
        return (await self._store([item]))[0]

    async def store_many(self, items: _Items) -> _Receipts:
        validate_many(items)
        return await self._store(items)

    async def _store(self, items: _Items) -> _Receipts:
        await self._open()
        prepared = [prepared_item(self._tenant, item, self._passage_chars) for item in items]
        firsts: dict[ItemId, PreparedItem] = {}
        for prep in prepared:
            firsts.setdefault(prep.id, prep)  # a later copy in the batch is a replay of the first
        distinct = list(firsts.values())
        computed = await self._vectors(distinct) if embeds_quickly(self._embedder) else None
        written = await self._db.run(lambda conn: writes.insert_items(conn, distinct, computed))
        if written.queued:
            self._promised = written.last_queued[:PROMISED_PASSAGES]
            self._backlog.notify()
        receipts = []
        inserted = set(written.inserted)
        for prep in prepared:
            receipts.append(StoreReceipt(id=prep.id, replayed=prep.id not in inserted))
            inserted.discard(prep.id)  # a later copy in the same batch is a replay of the first
        return receipts

    async def _vectors(self, prepared: list[PreparedItem]) -> dict[ItemId, Vectors] | None:
        texts = [passage.text for prep in prepared for passage in prep.passages]
        try:
            matrix = await self._embedder.embed(texts) if texts else None
        except Error as err:
            logger.warning("embedding at store failed, the backlog will retry (keyword search meanwhile): %s", err)
            return None
        found: dict[ItemId, Vectors] = {}
        row = 0
        for prep in prepared:
            if matrix is not None:
                found[prep.id] = matrix[row : row + len(prep.passages)]
            row += len(prep.passages)
        return found

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        target.check()
        await self._open()
        if target.filter is not None:
            where = filter_where(self._tenant, target.filter)
            removed = await self._db.run(lambda conn: writes.delete_where(conn, where))
            return ForgetReport(forgotten=len(removed))
        ids = list(dict.fromkeys(target.ids or []))
        forgotten = await self._db.run(lambda conn: writes.delete_ids(conn, self._tenant, ids))
        return ForgetReport(forgotten=forgotten)

    async def erase(self, req: EraseRequest) -> EraseReport:
        req.check()
        await self._open()
        where = Where()
        where.add("i.tenant = ?", self._tenant)
        add_erase_scope(where, req.reach)
        kinds_where(where, req.kinds)
        removed = await self._db.run(lambda conn: writes.delete_where(conn, where))
        return EraseReport(erased_scopes=len(set(removed)))

    # -- listing reads --------------------------------------------------------------------------

    async def list(self, req: ListRequest) -> ListPage:
        req.check()
        await self._open()
        after, limit = min(list_after(req.cursor), MAX_ROWS), min(req.limit, MAX_ROWS)
        where = filter_where(self._tenant, req.filter)
        hits, cursor = await self._db.run(lambda conn: reads.list_page(conn, where, after, limit))
        return ListPage(items=hits, next_cursor=cursor)

    async def export(self, req: ListRequest) -> ExportPage:
        req.check()
        await self._open()
        after, limit = min(list_after(req.cursor), MAX_ROWS), min(req.limit, MAX_ROWS)
        where = filter_where(self._tenant, req.filter)
        items, cursor = await self._db.run(lambda conn: reads.export_page(conn, where, after, limit))
        return ExportPage(items=items, next_cursor=cursor)

    async def get(self, req: GetRequest) -> _Hits:
        req.check()
        await self._open()
        where = Where()
        where.add("i.tenant = ?", self._tenant)
        add_reach(where, req.reach)
        found = await self._db.run(lambda conn: reads.get_hits(conn, where, req.ids))
        return in_request_order(req.ids, found)

    async def explore(self, req: ExploreRequest) -> ExplorePage:
        req.check()
        await self._open()
        where = filter_where(self._tenant, req.filter)
        return await self._db.run(lambda conn: reads.explore_counts(conn, where, req.facet, req.limit))

    # -- ranked reads ---------------------------------------------------------------------------

    async def fetch(self, req: FetchRequest) -> FetchPage:
        req.check()
        DESCRIPTOR.ensure_mode(req.mode)
        offset, limit = min(fetch_offset(req.cursor), MAX_ROWS), min(req.limit, MAX_ROWS)
        hits = await self._ranked(req.query, req.mode, req.filter, offset + limit + 1, req.refers_to, offset)
        more = len(hits) > limit
        return FetchPage(hits=hits[:limit], next_cursor=fetch_cursor(offset + limit) if more else None)

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        req.check()
        hits = await self._ranked(req.question, FetchMode.HYBRID, req.filter, min(req.limit, MAX_ROWS), req.refers_to)
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
        self, query: str, mode: FetchMode, filter: MetaFilter, want: int, refers_to: TimeHint | None, skip: int = 0
    ) -> _Hits:
        """Hits ranked `skip` to `want` (exclusive); only those are read back."""
        await self._open()
        plain = mode is FetchMode.KEYWORD and refers_to is None
        window = want if plain else ranking_window(want * 4 if refers_to is not None else want)
        vector = None
        if mode is not FetchMode.KEYWORD:
            vector = await self._query_vector(query)
            await self._keep_promise()
        where = filter_where(self._tenant, filter)

        def work(conn: psycopg.Connection) -> tuple[_Hits, Ranking]:
            ranking = rank(conn, self._stats, where, query, mode, vector, window, self._fusion, self._min_similarity)
            if refers_to is None:
                return reads.ranked_hits(conn, ranking.ranked[skip:want]), ranking
            return refers_to.rank(reads.ranked_hits(conn, ranking.ranked))[skip:want], ranking

        hits, _ = await self._db.run(work)
        return hits

    async def _query_vector(self, query: str) -> NDArray[np.float32] | None:
        known = self._query_vectors.get(query)
        if known is not None:
            self._query_vectors.move_to_end(query)
            return known
        try:
            found: Vectors = await self._embedder.embed([query])
        except Error as err:
            logger.warning("cannot embed a query, ranking it by keyword: %s", err)
            return None
        query_vector: NDArray[np.float32] = found[0]
        self._query_vectors[query] = query_vector
        if len(self._query_vectors) > QUERY_VECTORS:
            self._query_vectors.popitem(last=False)
        return query_vector

    async def _keep_promise(self) -> None:
        """Embed the last stored item's passages, unless the backlog has (or holds them now)."""
        promised, self._promised = self._promised, []
        if not promised:
            return

        def embed(texts: list[str]) -> Vectors:
            return asyncio.run(self._embedder.embed(texts))

        try:
            await self._db.run(lambda conn: embed_batch(conn, embed, PROMISED_PASSAGES, among=promised))
        except Error as err:
            logger.warning("cannot embed the last stored item, ranking it by keyword: %s", err)


__all__ = ["DESCRIPTOR", "PostgresEngine"]
