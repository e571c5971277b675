"""Key shapes: one prefix, every written key documented, expiring where it must, dead letters capped."""

from __future__ import annotations

import inspect
import re
from datetime import UTC, datetime, timedelta

import pytest

import worker.redis.keys
from engines.contract import ConfigError
from sources import SourceEntry
from tests.fixtures.redis_servers import RedisTarget
from worker.records import DeadLetter, ManifestEntry, SyncReport
from worker.redis.keys import SHAPES, Keys, KeyShape
from worker.redis.leases import Leases
from worker.redis.progress import RunProgress
from worker.state.redis import RedisStateStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def shape_of(key: str, prefix: str) -> KeyShape:
    """The one documented shape `key` has under `prefix` (fails the test otherwise)."""
    assert key.startswith(prefix), key
    rest = key.removeprefix(prefix)
    found = [s for s in SHAPES if re.fullmatch(re.sub(r"\\\{\w+\\\}", ".+", re.escape(s.template)), rest)]
    assert len(found) == 1, (key, found)
    return found[0]


def letter(unit_id: str, source_id: str = "s", minutes: int = 0) -> DeadLetter:
    at = T0 + timedelta(minutes=minutes)
    return DeadLetter(source_id=source_id, unit_id=unit_id, stage="read", error="E", message="m", at=at)


def write_everything(target: RedisTarget) -> RedisStateStore:
    """Use every writer once, so every key shape they make exists."""
    store = RedisStateStore(target.client, target.prefix)
    store.put_source(SourceEntry(id="s", kind="folder", label="S", path="/s"))
    store.commit("s", {"a.md": ManifestEntry(version="1:2")})
    store.add_dead_letter(letter("a.md"))
    store.record_sync(SyncReport(source_id="s"))
    leases = Leases(target.client, target.prefix)
    assert leases.acquire("sync:s", 60) is not None
    leases.mark("sync-again:s", 60)
    progress = RunProgress(target.client, target.prefix)
    progress.advance(progress.start(units=3), units=1)
    return store


@pytest.mark.parametrize("prefix", ["", "tm", "app:", "tm:x", "TM:"])
def test_a_prefix_outside_tm_is_refused(prefix: str) -> None:
    with pytest.raises(ConfigError, match="must start with 'tm:'"):
        Keys(prefix)


def test_every_shape_is_built_under_the_prefix_and_documented() -> None:
    keys = Keys("tm:test-x:")
    built = [
        method(*["id"] * (len(inspect.signature(method).parameters)))
        for name, method in inspect.getmembers(keys, inspect.ismethod)
        if not name.startswith("_")
    ]
    assert built and all(key.startswith("tm:test-x:") for key in built)
    for key in built:
        if not key.endswith(":"):  # prefixes of shapes, not keys
            shape_of(key, "tm:test-x:")
    doc = worker.redis.keys.__doc__ or ""
    for shape in SHAPES:
        assert f"`{shape.template.split('{')[0].rstrip(':')}" in doc, shape.template


def test_every_written_key_is_documented_and_expires_when_it_must(redis_target: RedisTarget) -> None:
    write_everything(redis_target)
    written = redis_target.written_keys()
    if redis_target.fresh:  # nothing else writes to a fresh fake server: every key is ours
        assert sorted(str(k, "utf-8") for k in redis_target.client.scan_iter()) == written
    shapes = {shape_of(key, redis_target.prefix).template for key in written}
    assert shapes >= {"layout", "sources", "manifest:{source}", "units:{source}", "dlq:units:{source}", "lease:{name}"}
    for key in written:
        ttl = redis_target.client.ttl(key)
        assert (ttl > 0) if shape_of(key, redis_target.prefix).expires else (ttl == -1), (key, ttl)


def test_removing_and_purging_leaves_no_key_behind(redis_target: RedisTarget) -> None:
    store = write_everything(redis_target)
    store.add_dead_letter(letter("b.md", source_id="t"))
    store.remove_source("s")
    store.purge_dead_letters()
    left = {shape_of(key, redis_target.prefix).template for key in redis_target.written_keys()}
    assert left == {"layout", "lease:{name}", "mark:{name}", "progress:{run}"}


def test_dead_letters_are_capped_keeping_the_newest(redis_target: RedisTarget) -> None:
    store = RedisStateStore(redis_target.client, redis_target.prefix, dead_letter_cap=5)
    for n in range(8):
        store.add_dead_letter(letter(f"u{n}", source_id="st"[n % 2], minutes=n))
    store.add_dead_letter(letter("u7", source_id="t", minutes=9))  # a replacement does not grow the set
    assert [d.unit_id for d in store.dead_letters()] == ["u7", "u6", "u5", "u4", "u3"]
    assert [d.unit_id for d in store.dead_letters("s")] == ["u6", "u4"]
    keys, client = store.keys, redis_target.client
    assert (client.hlen(keys.dead_letters()), client.zcard(keys.dead_letter_times())) == (5, 5)
    assert client.zcard(keys.dead_letter_units("s")) + client.zcard(keys.dead_letter_units("t")) == 5
    store.add_dead_letter(letter("old", minutes=-60))  # older than all kept: dropped at once
    assert "old" not in {d.unit_id for d in store.dead_letters()}
    assert store.purge_dead_letters() == 5
