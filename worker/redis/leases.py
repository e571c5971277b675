"""Leases: named, expiring ownership on Redis (`lease:{name}`), e.g. one queued-or-running sync per source;
and shared leases (`holders:{name}`), held by any number at once, e.g. the running jobs of a source, which
an erasure waits for. This is the `worker.state.LeaseStore` of the Redis state.

Marks (`mark:{name}`) go with them: an expiring note a caller that found the lease held leaves for
its holder ("run again when done"), taken once.

A lease is a key holding its owner's random token, set with NX and a TTL, so a dead holder's lease
ends by itself. Release and extend compare the token in a script: a holder whose lease lapsed and
went to someone else cannot free or stretch the new owner's. A shared lease is a sorted set of tokens
scored by their deadlines on the Redis server's clock (one clock for every host); holders past theirs
are dropped whenever the set is touched, and the key expires with its last holder.
"""

from __future__ import annotations

import math
import secrets

import redis

from worker.redis.client import check_bytes_client, describe, translated
from worker.redis.keys import DEFAULT_PREFIX, Keys

# Set the lease, or refresh it when the token already holds it: a retried SET whose first reply
# was lost must not lock its own sender out. KEYS: the lease. ARGV: token, ttl ms. Returns 1 if held.
_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

# KEYS: the lease. ARGV: token. Returns 1 if it was the owner's and is now gone.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: the lease. ARGV: token, ttl ms. Returns 1 if the owner's lease now ends ttl ms from now.
_EXTEND = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

# Hold a shared lease until now + ttl. KEYS: the holders set. ARGV: token, ttl ms. Returns 1 if the token held
# it already (a renewal), 0 if it is new (a join, or a renewal that came after the hold lapsed).
_HOLD = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local was = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
if was then return 1 end
return 0
"""

# The tokens holding a shared lease now. KEYS: the holders set.
_HOLDERS = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
"""


class Leases:
    """Named leases under one key prefix; safe to share between threads and processes.

    A holder must `extend` before the TTL passes if its work runs longer, and `release` with the
    token `acquire` gave it. A lease is advisory: work that must not run twice checks it first.
    """

    def __init__(self, client: redis.Redis, prefix: str = DEFAULT_PREFIX) -> None:
        check_bytes_client(client)
        self.keys = Keys(prefix)
        self._client = client
        self._where = describe(client)
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)
        self._extend = client.register_script(_EXTEND)
        self._hold = client.register_script(_HOLD)
        self._holders = client.register_script(_HOLDERS)

    def acquire(self, name: str, ttl_s: float) -> str | None:
        """The new owner's token, or None while someone else holds `name`."""
        token = secrets.token_hex(16)
        with translated(self._where, f"acquiring lease {name!r}"):
            held = self._acquire(keys=[self.keys.lease(name)], args=[token, _millis(ttl_s)])
        return token if held else None

    def release(self, name: str, token: str) -> bool:
        """Free `name` if `token` still owns it; False when it had lapsed or moved to another owner."""
        with translated(self._where, f"releasing lease {name!r}"):
            return bool(self._release(keys=[self.keys.lease(name)], args=[token]))

    def extend(self, name: str, token: str, ttl_s: float) -> bool:
        """Make `token`'s lease end `ttl_s` from now; False when it no longer owns `name` (stop the work)."""
        with translated(self._where, f"extending lease {name!r}"):
            return bool(self._extend(keys=[self.keys.lease(name)], args=[token, _millis(ttl_s)]))

    def mark(self, name: str, ttl_s: float) -> None:
        """Leave a note under `name` for whoever holds a lease (e.g. "sync again when done"); it lapses after ttl_s."""
        with translated(self._where, f"marking {name!r}"):
            self._client.set(self.keys.mark(name), b"1", px=_millis(ttl_s))

    def take_mark(self, name: str) -> bool:
        """Whether a note was left under `name`, removing it in the same step: one taker acts on each note."""
        with translated(self._where, f"taking mark {name!r}"):
            return self._client.getdel(self.keys.mark(name)) is not None

    def held(self, name: str) -> bool:
        """Whether anyone holds `name` exclusively now."""
        with translated(self._where, f"reading lease {name!r}"):
            return bool(self._client.exists(self.keys.lease(name)))

    def join(self, name: str, ttl_s: float) -> str:
        """Hold the shared lease `name` for `ttl_s` beside its other holders; the token to renew and leave with."""
        token = secrets.token_hex(16)
        with translated(self._where, f"joining lease {name!r}"):
            self._hold(keys=[self.keys.holders(name)], args=[token, _millis(ttl_s)])
        return token

    def renew(self, name: str, token: str, ttl_s: float) -> bool:
        """Make `token`'s hold of `name` end `ttl_s` from now; False when it had lapsed (held again from now)."""
        with translated(self._where, f"renewing lease {name!r}"):
            return bool(self._hold(keys=[self.keys.holders(name)], args=[token, _millis(ttl_s)]))

    def leave(self, name: str, token: str) -> None:
        """Stop holding the shared lease `name`."""
        with translated(self._where, f"leaving lease {name!r}"):
            self._client.zrem(self.keys.holders(name), token)

    def holders(self, name: str) -> set[str]:
        """The tokens holding the shared lease `name` now."""
        with translated(self._where, f"reading lease {name!r}"):
            tokens = self._holders(keys=[self.keys.holders(name)])
        return {t.decode() if isinstance(t, bytes) else str(t) for t in tokens}


def _millis(ttl_s: float) -> int:
    if not ttl_s > 0 or math.isinf(ttl_s):
        raise ValueError(f"a lease needs a finite positive ttl, got {ttl_s!r} seconds")
    return max(1, math.ceil(ttl_s * 1000))
