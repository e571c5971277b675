"""The queues of the distributed pipeline and what differs between them, as data.

| Queue         | Carries                               | Expires unstarted | Why                              |
| ------------- | ------------------------------------- | ----------------- | -------------------------------- |
| `tm.sync`     | `sync_source`: list, diff, split      | 1 hour            | beat and watchers send it again  |
| `tm.ingest`   | `ingest_batch` of a one-batch sync    | 1 day             | the manifest finds it again      |
| `tm.backfill` | `ingest_batch` of a bulk sync         | 1 day             | same; edits go ahead of it       |
| `tm.erase`    | `run_erasure`                         | never             | an erasure must not lapse        |

A worker consuming `tm.ingest` and `tm.backfill` polls them in turn, so a one-file edit waits for
at most the batch each worker is busy with, never for a whole backfill. `tm.erase` is consumed only by
erase workers (`tinymemory worker --queues tm.erase`), which no backfill keeps busy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from worker.redis.keys import Keys

if TYPE_CHECKING:
    import redis

SYNC_QUEUE = "tm.sync"
INGEST_QUEUE = "tm.ingest"
BACKFILL_QUEUE = "tm.backfill"
ERASE_QUEUE = "tm.erase"

ALL_QUEUES = (SYNC_QUEUE, INGEST_QUEUE, BACKFILL_QUEUE, ERASE_QUEUE)
DEFAULT_WORKER_QUEUES = (SYNC_QUEUE, INGEST_QUEUE, BACKFILL_QUEUE)

SYNC_TASK = "tm.sync_source"
INGEST_TASK = "tm.ingest_batch"
ERASE_TASK = "tm.run_erasure"
BEAT_TASK = "tm.beat_tick"


@dataclass(frozen=True)
class QueueRule:
    name: str
    expires_s: float | None


RULES = {
    SYNC_QUEUE: QueueRule(SYNC_QUEUE, expires_s=3600.0),
    INGEST_QUEUE: QueueRule(INGEST_QUEUE, expires_s=86_400.0),
    BACKFILL_QUEUE: QueueRule(BACKFILL_QUEUE, expires_s=86_400.0),
    ERASE_QUEUE: QueueRule(ERASE_QUEUE, expires_s=None),
}


def parse_queues(text: str) -> tuple[str, ...]:
    """A comma-separated queue list as a tuple of known queue names; an unknown name is a ValueError."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in RULES]
    if unknown or not names:
        raise ValueError(f"unknown queue {', '.join(unknown) or '(none given)'}; queues are {', '.join(ALL_QUEUES)}")
    return names


def queue_depths(client: redis.Redis, prefix: str) -> dict[str, int]:
    """Messages waiting in each queue (Celery keeps a queue as a list under the project's prefix)."""
    base = Keys(prefix).celery()
    return {queue: int(client.llen(base + queue)) for queue in ALL_QUEUES}
