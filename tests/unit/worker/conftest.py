"""Fixtures shared by the worker tests: `redis_target`, once on fakeredis and once on the real Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.redis_servers import REDIS_KINDS, RedisTarget, open_redis


@pytest.fixture(params=REDIS_KINDS)
def redis_target(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    with open_redis(request.param) as target:
        yield target
