"""Leases on Redis: one owner at a time, only the owner releases or extends, a dead owner's lease lapses."""

from __future__ import annotations

import math
import threading
import time

import pytest

from tests.fixtures.redis_servers import RedisTarget
from worker.redis.leases import Leases


@pytest.fixture
def leases(redis_target: RedisTarget) -> Leases:
    return Leases(redis_target.client, redis_target.prefix)


def test_one_owner_at_a_time(leases: Leases) -> None:
    token = leases.acquire("sync:s", 30)
    assert token is not None and leases.held("sync:s")
    assert leases.acquire("sync:s", 30) is None
    assert leases.acquire("sync:t", 30) is not None
    assert leases.release("sync:s", token)
    assert not leases.held("sync:s")
    assert leases.acquire("sync:s", 30) not in (None, token)


def test_only_the_owner_releases_or_extends(leases: Leases, redis_target: RedisTarget) -> None:
    token = leases.acquire("sync:s", 1)
    assert token is not None
    assert not leases.release("sync:s", "someone-else")
    assert not leases.extend("sync:s", "someone-else", 60)
    assert leases.held("sync:s") and redis_target.client.pttl(leases.keys.lease("sync:s")) <= 1_000
    assert leases.extend("sync:s", token, 60)
    assert redis_target.client.pttl(leases.keys.lease("sync:s")) > 59_000
    assert leases.release("sync:s", token)
    assert not leases.release("sync:s", token)
    assert not leases.extend("sync:s", token, 60)


def test_a_lapsed_lease_goes_to_the_next_owner(leases: Leases) -> None:
    stale = leases.acquire("sync:s", 0.05)
    assert stale is not None
    time.sleep(0.15)
    fresh = leases.acquire("sync:s", 30)
    assert fresh is not None
    assert not leases.release("sync:s", stale)  # the late first owner cannot free the new one's lease
    assert leases.held("sync:s")


def test_a_retried_acquire_does_not_lock_its_sender_out(leases: Leases, monkeypatch: pytest.MonkeyPatch) -> None:
    # A retry after a lost reply sends the same token again; it must find the lease its own.
    monkeypatch.setattr("worker.redis.leases.secrets.token_hex", lambda _: "same-token")
    assert leases.acquire("sync:s", 30) == "same-token"
    assert leases.acquire("sync:s", 30) == "same-token"


def test_racing_acquirers_get_one_lease(leases: Leases) -> None:
    tokens: list[str | None] = []
    start = threading.Barrier(8)

    def race() -> None:
        start.wait()
        tokens.append(leases.acquire("sync:s", 30))

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(token is not None for token in tokens) == 1


def test_marks_are_taken_once_and_expire(leases: Leases, redis_target: RedisTarget) -> None:
    assert not leases.take_mark("sync-again:s")
    leases.mark("sync-again:s", 30)
    leases.mark("sync-again:s", 30)
    assert 0 < redis_target.client.ttl(leases.keys.mark("sync-again:s")) <= 30
    assert leases.take_mark("sync-again:s")
    assert not leases.take_mark("sync-again:s")
    leases.mark("sync-again:t", 0.05)
    time.sleep(0.15)
    assert not leases.take_mark("sync-again:t")


@pytest.mark.parametrize("ttl_s", [0, -1, math.inf, math.nan])
def test_a_lease_needs_a_finite_positive_ttl(leases: Leases, ttl_s: float) -> None:
    with pytest.raises(ValueError, match="finite positive ttl"):
        leases.acquire("sync:s", ttl_s)
