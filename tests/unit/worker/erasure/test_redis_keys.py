"""The keys erasures write on Redis: documented shapes, kept for good (receipts, tombstones) or expiring (holds)."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.fixtures.redis_servers import RedisTarget
from tests.unit.worker.redis.test_keys import shape_of
from worker.erasure.request import ErasureRequest, ErasureTarget, Tombstone
from worker.state.redis import RedisStateStore


def test_receipts_and_tombstones_live_for_good_and_holds_expire(redis_target: RedisTarget) -> None:
    store = RedisStateStore(redis_target.client, redis_target.prefix)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    request = ErasureRequest(id="e1", target=ErasureTarget(source_id="s"), requested_by="ops", requested_at=at)
    store.open_erasure(request)
    store.put_tombstone(Tombstone.of(request))
    store.leases().join("jobs:s", 60)
    store.remove_source("s")  # what outlives the source's state
    shapes = {}
    for key in redis_target.written_keys():
        shape = shape_of(key, redis_target.prefix)
        shapes[shape.template] = shape
        ttl = redis_target.client.ttl(key)
        assert (ttl > 0) if shape.expires else (ttl == -1), (key, ttl)
    assert {"erasure:{id}", "erasures", "tombstone:{scope}", "holders:{name}"} <= set(shapes)
    store.leases().leave("jobs:s", next(iter(store.leases().holders("jobs:s"))))
    assert "holders:{name}" not in {shape_of(k, redis_target.prefix).template for k in redis_target.written_keys()}
