"""A store call's write: its items prepared on the caller's thread while the writing thread inserts the
ones already prepared, all in one transaction.

Preparing an item (its id and wire JSON, its row, its passages) is Python work that holds the GIL;
inserting it is mostly SQLite's, which runs without it. One after the other, they added up while the
second core stood idle. So a call hands its items to the writing thread in chunks through a `Feed`:
the writer takes the write lock once the first chunk is there and inserts each chunk while the caller
prepares the next. Nothing is committed before the last chunk, and a failure while preparing any item
rolls the whole call back, as when everything was prepared first. Vectors computed before the write
(every item's for a cheap embedder, else the last item's) still never keep the write lock waiting on
a model or an endpoint: a cheap embedder runs with each chunk, any other before the transaction opens.
"""

from __future__ import annotations

import asyncio
import logging
import queue
from collections.abc import Callable, Iterator

from engines.contract import EngineError, Error, Item, ItemId, StoreReceipt
from engines.local import writes
from engines.local.database import Database
from engines.local.embed import Embedder, Vectors, embeds_quickly
from engines.local.rows import Chunk, PreparedItem, prepare

logger = logging.getLogger(__name__)

CHUNK_ITEMS = 20
"""Items a chunk holds: small enough that the writer starts early, large enough to share each statement."""

FEED_TIMEOUT_S = 60.0
"""How long the writer waits for the caller's next chunk before it gives the transaction up: the caller
only computes between chunks, so a wait this long means it is gone and the write lock must not stay held."""


class AbandonedError(EngineError):
    """The caller stopped feeding a write (it failed or was cancelled): the transaction was rolled back."""


class Feed:
    """Chunks handed from the caller's thread to the writing one: `put` each, then `end` or `fail` once."""

    def __init__(self, timeout_s: float = FEED_TIMEOUT_S) -> None:
        self._queue: queue.SimpleQueue[Chunk | BaseException | None] = queue.SimpleQueue()
        self._timeout_s = timeout_s

    def put(self, chunk: Chunk) -> None:
        self._queue.put(chunk)

    def end(self) -> None:
        self._queue.put(None)

    def fail(self, err: BaseException) -> None:
        self._queue.put(err)

    def __iter__(self) -> Iterator[Chunk]:
        """The chunks as they come (on the writing thread); raises `AbandonedError` if the caller failed."""
        while True:
            try:
                got = self._queue.get(timeout=self._timeout_s)
            except queue.Empty:
                raise AbandonedError(f"no chunk of a store call came in {self._timeout_s:.0f} s") from None
            if got is None:
                return
            if isinstance(got, BaseException):
                raise AbandonedError("the store call failed while preparing its items") from got
            yield got


async def store_items(
    db: Database, tenant: str, embedder: Embedder, items: list[Item], passage_chars: int, on_queued: Callable[[], None]
) -> list[StoreReceipt]:
    """Store `items` (already checked) in one transaction; receipts in item order, a later copy of an
    item in the same call being a replay of the first. `on_queued` runs when passages await the backlog.

    Only an embedder as cheap as hashing embeds as items are stored. Any other leaves every passage to the
    backlog, off the store's path, and the call's last item is promised to the next vector read
    (`pending.promise`), which embeds it first if the backlog has not: a backfill pays nothing for it."""
    quick = embeds_quickly(embedder)
    feed = Feed()
    identity = embedder.identity
    writing = db.submit(lambda conn: writes.insert_items(conn, tenant, feed, identity, promise=not quick))
    writing.add_done_callback(_retrieved)
    try:
        ids = await _fed(feed, tenant, items, passage_chars, embedder if quick else None)
    except BaseException as err:
        feed.fail(err)
        raise
    feed.end()
    inserted, queued = await writing
    if queued:
        on_queued()
    receipts = []
    for item_id in ids:
        receipts.append(StoreReceipt(id=item_id, replayed=item_id not in inserted))
        inserted.discard(item_id)  # a later copy in the same batch is a replay of the first
    return receipts


async def _fed(
    feed: Feed, tenant: str, items: list[Item], passage_chars: int, embedder: Embedder | None
) -> list[ItemId]:
    """Prepare the items chunk by chunk onto `feed`, with their vectors when `embedder` is given; the ids
    of all of them, in order."""
    ids: list[ItemId] = []
    seen: set[ItemId] = set()
    chunk: list[PreparedItem] = []
    for index, item in enumerate(items):
        prep = prepared_item(tenant, item, passage_chars)
        ids.append(prep.id)
        if prep.id not in seen:
            seen.add(prep.id)
            chunk.append(prep)
        if chunk and (len(chunk) == CHUNK_ITEMS or index == len(items) - 1):
            feed.put(Chunk(chunk, {} if embedder is None else await _vectors(embedder, chunk)))
            chunk = []
    return ids


def prepared_item(tenant: str, item: Item, passage_chars: int) -> PreparedItem:
    item_id, wire = item.identified()
    return prepare(tenant, item_id, item, wire, passage_chars)


async def _vectors(embedder: Embedder, prepared: list[PreparedItem]) -> dict[ItemId, Vectors]:
    """The passage vectors of `prepared`, by item; none when the embedder fails (the backlog retries)."""
    texts = [passage.text for prep in prepared for passage in prep.passages]
    if not texts:
        return {}
    try:
        matrix = await embedder.embed(texts)
    except Error as err:
        logger.warning("embedding at store failed, the backlog will retry (keyword search meanwhile): %s", err)
        return {}
    vectors: dict[ItemId, Vectors] = {}
    row = 0
    for prep in prepared:
        vectors[prep.id] = matrix[row : row + len(prep.passages)]
        row += len(prep.passages)
    return vectors


def _retrieved(future: asyncio.Future[tuple[set[ItemId], bool]]) -> None:
    # A write abandoned by a failed caller has an error nobody awaits; reading it keeps asyncio quiet.
    if not future.cancelled():
        future.exception()
