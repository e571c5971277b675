"""Live progress of a run (a backfill, a large sync) on Redis: `progress:{run}`, a hash of counters.

The command that starts a run creates the record, its sync sets the plan once it has listed,
workers add to the counters as batches finish, and a progress bar reads them. The key expires
`PROGRESS_TTL_S` after its last write, so a finished or abandoned run leaves nothing behind.
Counts are for display: a batch redelivered after a crash may be counted twice.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

import redis
from redis.typing import EncodableT, FieldT

from worker.redis.client import check_bytes_client, describe, translated
from worker.redis.keys import DEFAULT_PREFIX, PROGRESS_TTL_S, Keys

_FIELDS = ("planned", "units", "items", "failed")

# Only while the run exists, so a late worker cannot revive an expired run without its plan.
# KEYS: the run. ARGV: ttl s, then units, items, failed, the time. Returns 1 if counted.
_ADVANCE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'units', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'items', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'failed', ARGV[4])
redis.call('HSET', KEYS[1], 'updated', ARGV[5])
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""

# KEYS: the run. ARGV: ttl s, planned units. Returns 1 if the run exists.
_PLAN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'planned', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""


@dataclass(frozen=True, slots=True)
class Progress:
    """A run's plan and what is done so far: `done` units (stored, unchanged or deleted), `items`
    written, `failed` units (dead-lettered). `planned` is None until the run's sync has listed."""

    run_id: str
    planned: int | None
    done: int
    items: int
    failed: int
    source_id: str | None = None
    # When it started and last moved (epoch seconds): for rates, not for telling two readings apart.
    started: float = field(default=0.0, compare=False)
    updated: float = field(default=0.0, compare=False)

    @property
    def finished(self) -> bool:
        """Every planned unit is done or failed (a plan of zero units is finished at once)."""
        return self.planned is not None and self.done + self.failed >= self.planned


class RunProgress:
    """Run counters under one key prefix; safe to share between threads, processes and hosts.

    A run must be `start`ed before workers `plan` or `advance` it: both ignore an unknown or expired run.
    """

    def __init__(self, client: redis.Redis, prefix: str = DEFAULT_PREFIX, *, ttl_s: int = PROGRESS_TTL_S) -> None:
        check_bytes_client(client)
        self.keys = Keys(prefix)
        self.ttl_s = ttl_s
        self._client = client
        self._where = describe(client)
        self._advance = client.register_script(_ADVANCE)
        self._plan = client.register_script(_PLAN)

    def start(self, run_id: str | None = None, *, units: int | None = None, source_id: str | None = None) -> str:
        """Start a run (a new id unless one is given) of `source_id`'s sync, with its total of units when
        already known.

        Starting a run that exists keeps its counters, so a retried start loses nothing.
        """
        run_id = run_id or uuid.uuid4().hex
        key = self.keys.progress(run_id)
        at = time.time()
        fields: dict[FieldT, EncodableT] = {"started": at, "updated": at}
        if units is not None:
            fields["planned"] = units
        if source_id is not None:
            fields["source"] = source_id
        with translated(self._where, f"starting run {run_id!r}"):
            pipe = self._client.pipeline(transaction=True)
            pipe.hset(key, mapping=fields)
            pipe.expire(key, self.ttl_s)
            pipe.execute()
        return run_id

    def plan(self, run_id: str, units: int) -> bool:
        """Set how many units the run will process (idempotent); False when the run is unknown or expired."""
        with translated(self._where, f"planning run {run_id!r}"):
            return bool(self._plan(keys=[self.keys.progress(run_id)], args=[self.ttl_s, units]))

    def advance(self, run_id: str, *, units: int = 0, items: int = 0, failed: int = 0) -> bool:
        """Add to the run's counters and push its expiry back; False when the run is unknown or expired."""
        with translated(self._where, f"advancing run {run_id!r}"):
            counted = self._advance(
                keys=[self.keys.progress(run_id)], args=[self.ttl_s, units, items, failed, time.time()]
            )
        return bool(counted)

    def read(self, run_id: str) -> Progress | None:
        """The run's counters, or None once it expired (or never existed)."""
        with translated(self._where, f"reading run {run_id!r}"):
            values = self._client.hmget(self.keys.progress(run_id), list(_READ))
        return _progress(run_id, values)

    def drop(self, run_id: str) -> None:
        """Forget a run that will not happen."""
        with translated(self._where, f"dropping run {run_id!r}"):
            self._client.delete(self.keys.progress(run_id))

    def runs(self, limit: int = 50) -> list[Progress]:
        """The runs not yet expired, newest first (at most `limit`)."""
        prefix = self.keys.progress("")
        with translated(self._where, "listing runs"):
            # Every run key expires, so there are never many: all are read, then the newest kept.
            keys = list(self._client.scan_iter(match=f"{prefix}*", count=500))
            pipe = self._client.pipeline(transaction=False)
            for key in keys:
                pipe.hmget(key, list(_READ))
            rows = pipe.execute()
        found = [_progress(_text(key)[len(prefix) :], values) for key, values in zip(keys, rows, strict=True)]
        return sorted((p for p in found if p is not None), key=lambda p: p.started, reverse=True)[:limit]


_READ = ("started", *_FIELDS, "source", "updated")


def _progress(run_id: str, values: list[bytes | str | None]) -> Progress | None:
    started, planned, units, items, failed, source, updated = values
    if started is None:
        return None
    return Progress(
        run_id,
        None if planned is None else int(planned),
        _count(units),
        _count(items),
        _count(failed),
        source_id=None if source is None else _text(source),
        started=float(started),
        updated=float(updated) if updated is not None else float(started),
    )


def _count(value: bytes | str | None) -> int:
    return 0 if value is None else int(value)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
