"""Erasure receipts and tombstones on Redis: the erasure half of `RedisStateStore` (`worker.state.redis`).

A receipt is `erasure:{id}`; `erasures` maps each request's key (its target and kinds) to the id of its
receipt, so the same request again finds the first one. A tombstone is a field of `tombstone:{scope}`, one per
erasure of that scope. All of them are kept for good (`worker.redis.keys`, notes 5 and 9).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import redis

from worker.erasure.request import ErasureReceipt, ErasureRequest, Tombstone
from worker.redis.client import translated
from worker.redis.keys import Keys

# The receipt of the same request unless it failed, else the new one, saved. KEYS: erasures. ARGV: the
# request key, the new id, the prefix of erasure keys, the new receipt's JSON. Returns the receipt's JSON.
# (A receipt's JSON is compact and its strings escape quotes, so the status can be matched as text.)
_OPEN = """
local id = redis.call('HGET', KEYS[1], ARGV[1])
if id then
  local body = redis.call('GET', ARGV[3] .. id)
  if body and not string.find(body, '"status":"failed"', 1, true) then return body end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', ARGV[3] .. ARGV[2], ARGV[4])
return ARGV[4]
"""


class RedisErasures:
    """Receipts and tombstones under `keys`, on a client answering bytes."""

    def __init__(self, client: redis.Redis, keys: Keys, where: str) -> None:
        self._client = client
        self.keys = keys
        self._where = where
        self._open = client.register_script(_OPEN)

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        with translated(self._where, doing):
            yield

    def open_erasure(self, request: ErasureRequest) -> ErasureReceipt:
        receipt = ErasureReceipt.of(request)
        keys = self.keys
        with self._errors(f"recording erasure {request.id!r}"):
            body = self._open(
                keys=[keys.erasures()],
                args=[request.target.key, request.id, keys.erasure_prefix(), receipt.model_dump_json()],
            )
        return ErasureReceipt.model_validate_json(body)

    def get_erasure(self, erasure_id: str) -> ErasureReceipt | None:
        with self._errors(f"reading erasure {erasure_id!r}"):
            body = self._client.get(self.keys.erasure(erasure_id))
        return None if body is None else ErasureReceipt.model_validate_json(body)

    def put_erasure(self, receipt: ErasureReceipt) -> None:
        with self._errors(f"saving erasure {receipt.id!r}"):
            self._client.set(self.keys.erasure(receipt.id), receipt.model_dump_json())

    def unfinished_erasures(self) -> list[ErasureReceipt]:
        receipts = self._indexed()
        return sorted((r for r in receipts if not r.finished), key=lambda r: (r.requested_at, r.id))

    def recent_erasures(self, limit: int) -> list[ErasureReceipt]:
        # The index names the latest receipt of each request, so a failed one replaced by its retry is not
        # listed (it is still kept under its own key).
        return sorted(self._indexed(), key=lambda r: (r.requested_at, r.id), reverse=True)[:limit]

    def _indexed(self) -> list[ErasureReceipt]:
        with self._errors("listing erasures"):
            ids = self._client.hvals(self.keys.erasures())
            bodies = self._client.mget([self.keys.erasure(_text(i)) for i in ids]) if ids else []
        return [ErasureReceipt.model_validate_json(b) for b in bodies if b is not None]

    def put_tombstone(self, tombstone: Tombstone) -> None:
        with self._errors(f"writing the tombstone of {tombstone.scope!r}"):
            self._client.hset(self.keys.tombstone(tombstone.scope), tombstone.erasure_id, tombstone.model_dump_json())

    def tombstones(self, scopes: Iterable[str]) -> list[Tombstone]:
        wanted = list(dict.fromkeys(scopes))
        if not wanted:
            return []
        with self._errors("reading tombstones"):
            pipe = self._client.pipeline(transaction=False)
            for scope in wanted:
                pipe.hgetall(self.keys.tombstone(scope))
            found = pipe.execute()
        return [Tombstone.model_validate_json(body) for fields in found for _, body in sorted(fields.items())]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
