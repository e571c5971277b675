"""The one way this project opens Redis, and the one place Redis errors become contract errors.

Clients here answer bytes (`decode_responses=False`): the Redis modules decode what they read
themselves, so a unit id is never decoded twice or in two ways.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import redis
from pydantic import SecretStr
from redis import exceptions as rx
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

from engines.contract import ConfigError, EngineError, UnavailableError

SOCKET_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 5.0
HEALTH_CHECK_INTERVAL_S = 30
RETRIES = 12

# Order matters: the credential errors are ConnectionError subclasses but retrying cannot fix them.
_REFUSED = (rx.AuthenticationError, rx.AuthorizationError, rx.NoPermissionError, rx.ExternalAuthProviderError)
_TRANSIENT = (
    rx.ConnectionError,
    rx.TimeoutError,
    builtins.TimeoutError,
    rx.ReadOnlyError,  # a replica during failover
    rx.TryAgainError,
    rx.ClusterDownError,
    rx.OutOfMemoryError,  # writes resume once memory is freed or raised
)


def redis_from_url(url: str | SecretStr, *, retries: int = RETRIES) -> redis.Redis:
    """A sync client for `url` (redis://, rediss://, unix://) with timeouts and a few quick retries.

    Connecting happens on first use, so this raises only `ConfigError` for a malformed URL; the
    message shows the URL with its password masked.
    """
    raw = url.get_secret_value() if isinstance(url, SecretStr) else url
    try:
        return redis.Redis.from_url(
            raw,
            decode_responses=False,
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            health_check_interval=HEALTH_CHECK_INTERVAL_S,
            # Backoff 50 ms doubling to 2 s, twelve times (about 15 s in all): rides out a restart or a
            # failover, during which a job simply waits; a longer outage surfaces as UnavailableError.
            retry=Retry(ExponentialWithJitterBackoff(cap=2.0, base=0.05), retries),
            retry_on_error=[rx.ConnectionError, rx.TimeoutError],
            client_name="tinymemory",
        )
    except ValueError:
        raise ConfigError(
            f"redis url {masked(raw)!r} is not valid; use redis://[:password@]host:port/db or unix:///path"
        ) from None


def masked(url: str) -> str:
    """`url` with any password replaced by `***`, for messages and logs (even when the rest is malformed)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hostport}"))


def describe(client: redis.Redis) -> str:
    """Where `client` points (host:port/db or a socket path), with no credential."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"


def check_bytes_client(client: redis.Redis) -> None:
    """Refuse a client that decodes responses: the Redis modules here read bytes."""
    if client.connection_pool.connection_kwargs.get("decode_responses"):
        raise ConfigError("the redis client must answer bytes; build it with redis_from_url or decode_responses=False")


@contextmanager
def translated(where: str, doing: str) -> Iterator[None]:
    """Turn redis-py errors raised inside into contract errors that name `where` and `doing`.

    Only what may pass by itself becomes `UnavailableError` (retried by callers); refused
    credentials are `ConfigError`; anything else Redis answered is `EngineError`.
    """
    try:
        yield
    except _REFUSED as err:
        raise ConfigError(
            f"redis at {where} refused the credentials while {doing}; check the user and password in the redis url"
        ) from err
    except _TRANSIENT as err:
        raise UnavailableError(
            f"redis at {where} is unavailable while {doing} ({type(err).__name__}); check that it runs, then retry"
        ) from err
    except rx.RedisError as err:
        # A server reply (WRONGTYPE, a script error) names no credential, and it says what broke.
        raise EngineError(f"redis at {where} failed while {doing}: {type(err).__name__}: {err}") from err
