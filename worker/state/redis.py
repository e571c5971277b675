"""The state store on Redis, for the distributed pipeline; key shapes are in `worker.redis.keys`, the layout
version and the migration of older keys in `worker.state.redis_layout`, erasure receipts and tombstones in
`worker.state.redis_receipts`, leases in `worker.redis.leases`.

Multi-key writes are one MULTI/EXEC (manifest commits) or one Lua script (dead letters, removing
a source), so a call never half-applies, as on SQLite. The scripts touch keys of several sources,
so this store wants one Redis (or a primary with replicas), not a cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

import redis

from engines.contract import ItemId
from sources import SourceEntry
from worker.erasure.request import ErasureReceipt, ErasureRequest, Tombstone
from worker.records import DeadLetter, ManifestEntry, SyncReport
from worker.redis.client import check_bytes_client, describe, translated
from worker.redis.keys import DEAD_LETTER_CAP, DEFAULT_PREFIX, UNIT_SEPARATOR, Keys
from worker.redis.leases import Leases
from worker.state.base import UnitState
from worker.state.redis_layout import parse_unit_flags, prepare, unit_flags
from worker.state.redis_receipts import RedisErasures

_CHUNK = 1_000  # fields per HSET/HMGET/HDEL: bounded commands, all in the one MULTI or pipeline

# A letter is stored as "<attempts> <json without attempts>" so the script counts without a JSON parser.
# KEYS: dlq, dlq:at, dlq:units:{source}. ARGV: letter key, unit␟stage, json, at µs, attempts if new, cap,
# the prefix of dlq:units keys.
_ADD_LETTER = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
local attempts = tonumber(ARGV[5])
if old then attempts = tonumber(string.match(old, '^(%d+) ')) + 1 end
redis.call('HSET', KEYS[1], ARGV[1], attempts .. ' ' .. ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('ZADD', KEYS[3], 0, ARGV[2])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[6])
if over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #popped, 2 do
    redis.call('HDEL', KEYS[1], popped[i])
    local source, member = string.match(popped[i], '^([^\\31]*)\\31(.*)$')
    redis.call('ZREM', ARGV[7] .. source, member)
  end
end
return attempts
"""

# Forget one source's letters (all, or those of the units named). KEYS: dlq, dlq:at, dlq:units:{source}.
# ARGV: source id, then unit ids; none named means every unit. Returns how many letters went.
_DROP_LETTERS = """
local function drop(member)
  local key = ARGV[1] .. '\\31' .. member
  redis.call('ZREM', KEYS[3], member)
  redis.call('HDEL', KEYS[1], key)
  redis.call('ZREM', KEYS[2], key)
end
local dropped = 0
if #ARGV == 1 then
  for _, member in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do drop(member); dropped = dropped + 1 end
  return dropped
end
for i = 2, #ARGV do
  local unit = ARGV[i]
  -- Every 'unit␟stage' sorts in [unit␟, unit␠); a second ␟ belongs to a longer unit id.
  for _, member in ipairs(redis.call('ZRANGEBYLEX', KEYS[3], '[' .. unit .. '\\31', '(' .. unit .. '\\32')) do
    if not string.find(member, '\\31', #unit + 2, true) then drop(member); dropped = dropped + 1 end
  end
end
return dropped
"""

# KEYS: dlq, dlq:at. ARGV: the prefix of dlq:units keys. Returns how many letters went.
_PURGE_ALL_LETTERS = """
local keys = redis.call('ZRANGE', KEYS[2], 0, -1)
for _, key in ipairs(keys) do
  redis.call('DEL', ARGV[1] .. string.match(key, '^([^\\31]*)\\31'))
end
redis.call('DEL', KEYS[1], KEYS[2])
return #keys
"""

# KEYS: the three dead-letter keys of _DROP_LETTERS, then sources, manifest, units, runs. ARGV: source id.
# The letters go last, through _DROP_LETTERS with no unit named (its `return` ends the script).
_REMOVE_SOURCE = (
    """
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('DEL', KEYS[5], KEYS[6], KEYS[7])
"""
    + _DROP_LETTERS
)


class RedisStateStore:
    """`StateStore` on Redis; safe to share between threads, processes and hosts.

    `client` must answer bytes (`worker.redis.client.redis_from_url` builds one). Opening a store checks its
    layout (one read), migrating keys an older release wrote. Every Redis failure surfaces as a contract
    error: `UnavailableError` when a retry may help. Unlike SQLite, dead letters are capped: past
    `dead_letter_cap` the oldest (by `at`) are dropped.
    """

    def __init__(
        self, client: redis.Redis, prefix: str = DEFAULT_PREFIX, *, dead_letter_cap: int = DEAD_LETTER_CAP
    ) -> None:
        check_bytes_client(client)
        self.keys = Keys(prefix)
        self._client = client
        self._where = describe(client)
        self._cap = dead_letter_cap
        self._add_letter = client.register_script(_ADD_LETTER)
        self._drop_letters = client.register_script(_DROP_LETTERS)
        self._purge_all = client.register_script(_PURGE_ALL_LETTERS)
        self._remove_source = client.register_script(_REMOVE_SOURCE)
        self._erasures = RedisErasures(client, self.keys, self._where)
        self._leases = Leases(client, prefix)
        with self._errors("checking the state's layout"):
            prepare(client, self.keys)

    def close(self) -> None:
        """Close the client this store was given (do not close a client shared with others)."""
        self._client.close()

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        with translated(self._where, doing):
            yield

    # -- source registry --------------------------------------------------------------------------

    def put_source(self, entry: SourceEntry) -> None:
        with self._errors(f"saving source {entry.id!r}"):
            self._client.hset(self.keys.sources(), entry.id, entry.model_dump_json())

    def get_source(self, source_id: str) -> SourceEntry | None:
        with self._errors(f"reading source {source_id!r}"):
            body = self._client.hget(self.keys.sources(), source_id)
        return None if body is None else SourceEntry.model_validate_json(body)

    def list_sources(self) -> list[SourceEntry]:
        with self._errors("listing sources"):
            bodies = self._client.hvals(self.keys.sources())
        return sorted((SourceEntry.model_validate_json(b) for b in bodies), key=lambda e: e.id)

    def remove_source(self, source_id: str) -> None:
        keys = self.keys
        with self._errors(f"removing source {source_id!r}"):
            self._remove_source(
                keys=[
                    *self._letter_keys(source_id),
                    keys.sources(),
                    keys.manifest(source_id),
                    keys.units(source_id),
                    keys.last_run(source_id),
                ],
                args=[source_id],
            )

    # -- manifests ----------------------------------------------------------------------------------

    def unit_states(self, source_id: str) -> dict[str, UnitState]:
        with self._errors(f"reading the manifest of {source_id!r}"):
            rows = self._client.hgetall(self.keys.units(source_id))
        return {_text(unit): UnitState(*parse_unit_flags(_bytes(value))) for unit, value in rows.items()}

    def manifest_entries(self, source_id: str, unit_ids: Iterable[str]) -> dict[str, ManifestEntry]:
        wanted = list(dict.fromkeys(unit_ids))
        key = self.keys.manifest(source_id)
        with self._errors(f"reading the manifest of {source_id!r}"):
            pipe = self._client.pipeline(transaction=False)
            for start in range(0, len(wanted), _CHUNK):
                pipe.hmget(key, wanted[start : start + _CHUNK])
            bodies = [body for chunk in pipe.execute() for body in chunk]
        return {unit: ManifestEntry.model_validate_json(b) for unit, b in zip(wanted, bodies, strict=True) if b}

    def commit(self, source_id: str, entries: Mapping[str, ManifestEntry | None]) -> None:
        if not entries:
            return
        removed = [unit for unit, entry in entries.items() if entry is None]
        written = [(unit, entry) for unit, entry in entries.items() if entry is not None]
        manifest, units = self.keys.manifest(source_id), self.keys.units(source_id)
        with self._errors(f"committing {len(entries)} manifest entries of {source_id!r}"):
            pipe = self._client.pipeline(transaction=True)
            for start in range(0, len(removed), _CHUNK):
                pipe.hdel(manifest, *removed[start : start + _CHUNK])
                pipe.hdel(units, *removed[start : start + _CHUNK])
            for start in range(0, len(written), _CHUNK):
                chunk = written[start : start + _CHUNK]
                pipe.hset(manifest, mapping={unit: entry.model_dump_json() for unit, entry in chunk})
                pipe.hset(units, mapping={unit: unit_flags(entry) for unit, entry in chunk})
            pipe.execute()

    def item_ids(self, source_id: str) -> list[ItemId]:
        with self._errors(f"reading the manifest of {source_id!r}"):
            bodies = self._client.hvals(self.keys.manifest(source_id))
        # Only the ids are wanted: plain JSON, not a model per entry (an erasure reads every unit's).
        entries = [json.loads(body) for body in bodies]
        return list(dict.fromkeys(i for e in entries for i in (*e.get("item_ids", []), *e.get("stale", []))))

    # -- dead letters -------------------------------------------------------------------------------

    def add_dead_letter(self, letter: DeadLetter) -> None:
        keys = self.keys
        member = f"{letter.unit_id}{UNIT_SEPARATOR}{letter.stage}"
        with self._errors(f"recording a dead letter for {letter.unit_id!r} of {letter.source_id!r}"):
            self._add_letter(
                keys=self._letter_keys(letter.source_id),
                args=[
                    letter.key,
                    member,
                    letter.model_dump_json(exclude={"attempts"}),
                    _micros(letter),
                    letter.attempts,
                    self._cap,
                    keys.dead_letter_units_prefix(),
                ],
            )

    def dead_letters(self, source_id: str | None = None, limit: int = 1000) -> list[DeadLetter]:
        if limit <= 0:
            return []
        with self._errors("reading dead letters"):
            letter_keys = self._newest_letter_keys(source_id, limit)
            bodies = self._client.hmget(self.keys.dead_letters(), letter_keys) if letter_keys else []
        # A letter dropped by the cap between the two reads is simply not listed.
        return [_letter(body) for body in bodies if body is not None]

    def clear_dead_letters(self, source_id: str, unit_ids: Iterable[str]) -> None:
        units = list(dict.fromkeys(unit_ids))
        with self._errors(f"clearing dead letters of {source_id!r}"):
            for start in range(0, len(units), _CHUNK):
                self._drop_letters(keys=self._letter_keys(source_id), args=[source_id, *units[start : start + _CHUNK]])

    def purge_dead_letters(self, source_id: str | None = None) -> int:
        keys = self.keys
        with self._errors("purging dead letters"):
            if source_id is None:
                dropped = self._purge_all(
                    keys=[keys.dead_letters(), keys.dead_letter_times()], args=[keys.dead_letter_units_prefix()]
                )
            else:
                dropped = self._drop_letters(keys=self._letter_keys(source_id), args=[source_id])
        return int(dropped)

    def _letter_keys(self, source_id: str) -> list[str]:
        keys = self.keys
        return [keys.dead_letters(), keys.dead_letter_times(), keys.dead_letter_units(source_id)]

    def _newest_letter_keys(self, source_id: str | None, limit: int) -> list[str]:
        times = self.keys.dead_letter_times()
        if source_id is None:
            return [_text(key) for key in self._client.zrevrange(times, 0, limit - 1)]
        members = self._client.zrange(self.keys.dead_letter_units(source_id), 0, -1)
        letter_keys = [f"{source_id}{UNIT_SEPARATOR}{_text(member)}" for member in members]
        if not letter_keys:
            return []
        scores = self._client.zmscore(times, letter_keys)
        # Newest first, ties in reverse key order: what ZREVRANGE gives when no source is named.
        ranked = sorted(zip(scores, letter_keys, strict=True), key=lambda pair: (pair[0] or 0.0, pair[1]), reverse=True)
        return [key for _, key in ranked[:limit]]

    # -- runs ---------------------------------------------------------------------------------------

    def record_sync(self, report: SyncReport) -> None:
        with self._errors(f"recording the sync of {report.source_id!r}"):
            self._client.set(self.keys.last_run(report.source_id), report.model_dump_json())

    def last_sync(self, source_id: str) -> SyncReport | None:
        with self._errors(f"reading the last sync of {source_id!r}"):
            body = self._client.get(self.keys.last_run(source_id))
        return None if body is None else SyncReport.model_validate_json(body)

    # -- erasures and leases ------------------------------------------------------------------------

    def open_erasure(self, request: ErasureRequest) -> ErasureReceipt:
        return self._erasures.open_erasure(request)

    def get_erasure(self, erasure_id: str) -> ErasureReceipt | None:
        return self._erasures.get_erasure(erasure_id)

    def put_erasure(self, receipt: ErasureReceipt) -> None:
        self._erasures.put_erasure(receipt)

    def unfinished_erasures(self) -> list[ErasureReceipt]:
        return self._erasures.unfinished_erasures()

    def recent_erasures(self, limit: int = 100) -> list[ErasureReceipt]:
        return self._erasures.recent_erasures(limit)

    def put_tombstone(self, tombstone: Tombstone) -> None:
        self._erasures.put_tombstone(tombstone)

    def tombstones(self, scopes: Iterable[str]) -> list[Tombstone]:
        return self._erasures.tombstones(scopes)

    def leases(self) -> Leases:
        return self._leases


def _micros(letter: DeadLetter) -> int:
    # Whole microseconds: exact in a sorted-set score (a double) until the year 2255.
    return round(letter.at.timestamp() * 1_000_000)


def _letter(stored: bytes | str) -> DeadLetter:
    attempts, body = _bytes(stored).split(b" ", 1)
    return DeadLetter.model_validate_json(body).model_copy(update={"attempts": int(attempts)})


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, str):
        return value
    raise TypeError(f"redis answered {type(value).__name__} where a string was expected")
