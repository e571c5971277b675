"""What every reliability test shares: its figures printed past pytest's capture (`figures`), a reading of
everything an engine stored, a wait that lets the event loop run, and what a drained cluster whose processes were
killed has left stuck."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import cast

import pytest

from engines.contract import Hit, ListRequest, MemoryEngine
from tests.integration.cluster import Cluster
from tests.reliability.figures import print_figures
from worker.cluster.runtime import sync_lease
from worker.jobs import JOB_LEASE_S, job_lease
from worker.redis.keys import Keys
from worker.redis.leases import Leases

Figures = Callable[..., None]


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """`print_figures` for the requesting test."""
    return functools.partial(print_figures, request)


async def every_item(engine: MemoryEngine, page: int = 500) -> list[Hit]:
    """Every item the engine holds, read `page` at a time through its cursor."""
    hits: list[Hit] = []
    cursor = None
    while True:
        listed = await engine.list(ListRequest(limit=page, cursor=cursor))
        hits.extend(listed.items)
        if listed.next_cursor is None:
            return hits
        cursor = listed.next_cursor


async def until(condition: Callable[[], bool], within_s: float, what: str) -> None:
    """Wait, letting the event loop run, until `condition()` holds; fails naming `what` after `within_s`."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {within_s} s")
        await asyncio.sleep(0.002)


def redis_ms(cluster: Cluster) -> int:
    """The Redis server's clock in milliseconds: the clock the job lease's holds are scored on."""
    seconds, micros = cluster.client().time()
    return int(seconds) * 1000 + int(micros) // 1000


def job_holds(cluster: Cluster, source_id: str) -> list[float]:
    """The deadlines (Redis's clock, ms) of the holds on `source_id`'s job lease that have not lapsed."""
    key = Keys(cluster.prefix).holders(job_lease(source_id))
    holds = cast(
        list[tuple[bytes, float]], cluster.client().zrangebyscore(key, redis_ms(cluster), "+inf", withscores=True)
    )
    return [deadline for _, deadline in holds]


def stuck_after_kills(cluster: Cluster, source_id: str, last_kill_ms: int) -> int:
    """What a drained cluster left stuck of `source_id`'s work, one for each: messages still queued or unacknowledged,
    its sync lease held, and each hold on its job lease that outlives the processes killed.

    A killed process cannot leave the job lease: its hold lapses by itself within `JOB_LEASE_S` of its last renewal,
    so before `last_kill_ms` (Redis's clock, read after the last kill) + `JOB_LEASE_S`. A later deadline is a live
    job's hold, and no job runs once the cluster is drained.
    """
    limit = last_kill_ms + JOB_LEASE_S * 1000
    sync_held = Leases(cluster.client(), prefix=cluster.prefix).held(sync_lease(source_id))
    return (
        int(not cluster.idle()) + int(sync_held) + sum(deadline > limit for deadline in job_holds(cluster, source_id))
    )
