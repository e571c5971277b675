"""Opening Redis and translating its errors: the right contract error, never a password in a message."""

from __future__ import annotations

from collections.abc import Callable

import fakeredis
import pytest
import redis
from pydantic import SecretStr
from redis import exceptions as rx

from engines.contract import ConfigError, EngineError, UnavailableError
from worker.redis.client import describe, masked, redis_from_url, translated
from worker.redis.leases import Leases
from worker.redis.progress import RunProgress
from worker.state.redis import RedisStateStore

SECRET = "s3cret-Pa55"
# Nothing listens on port 1; the connection is refused at once.
DOWN = f"redis://user:{SECRET}@127.0.0.1:1/3"


def test_the_client_has_timeouts_retries_and_answers_bytes() -> None:
    client = redis_from_url(SecretStr("redis://127.0.0.1:6379/2"))
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"], kwargs["decode_responses"]) == (5.0, 5.0, False)
    assert kwargs["health_check_interval"] == 30 and kwargs["db"] == 2
    assert describe(client) == "127.0.0.1:6379/2"
    assert describe(redis_from_url("unix:///run/redis.sock")) == "unix:/run/redis.sock"


def test_a_bad_url_is_a_config_error_that_hides_the_password() -> None:
    with pytest.raises(ConfigError) as caught:
        redis_from_url(f"redis://:{SECRET}@host:notaport/0")
    assert SECRET not in str(caught.value) and "***" in str(caught.value)
    with pytest.raises(ConfigError, match="is not valid"):
        redis_from_url("http://127.0.0.1:6379")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://:{SECRET}@h:6379/0", "redis://:***@h:6379/0"),
        (f"rediss://u:{SECRET}@h/1", "rediss://u:***@h/1"),
        ("redis://h:6379/0", "redis://h:6379/0"),
    ],
)
def test_masked_hides_only_the_password(url: str, shown: str) -> None:
    assert masked(url) == shown


def test_a_server_that_is_down_is_unavailable_without_the_password() -> None:
    client = redis_from_url(DOWN, retries=1)  # the default rides out a restart: about 15 s of retrying
    calls: list[Callable[[], object]] = [
        lambda: RedisStateStore(client).unit_states("s"),
        lambda: Leases(client).acquire("sync:s", 5),
        lambda: RunProgress(client).read("run"),
    ]
    for call in calls:
        with pytest.raises(UnavailableError) as caught:
            call()
        assert "127.0.0.1:1/3" in str(caught.value) and SECRET not in str(caught.value)
        assert caught.value.is_transient()


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (rx.ConnectionError("refused"), UnavailableError),
        (rx.TimeoutError("timed out"), UnavailableError),
        (rx.BusyLoadingError("loading"), UnavailableError),
        (rx.ReadOnlyError("replica"), UnavailableError),
        (rx.AuthenticationError("invalid password"), ConfigError),
        (rx.NoPermissionError("no perm"), ConfigError),
        (rx.ResponseError("WRONGTYPE wrong kind of value"), EngineError),
    ],
)
def test_redis_errors_become_contract_errors(raised: Exception, expected: type[Exception]) -> None:
    with pytest.raises(expected) as caught, translated("h:6379/0", "reading x"):
        raise raised
    assert caught.value.__cause__ is raised and "h:6379/0" in str(caught.value)


def test_a_decoding_client_is_refused() -> None:
    with pytest.raises(ConfigError, match="must answer bytes"):
        RedisStateStore(fakeredis.FakeRedis(decode_responses=True))
    assert isinstance(redis_from_url("redis://127.0.0.1:6379/0"), redis.Redis)
