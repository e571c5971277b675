"""The Redis state's layout version, and bringing keys written by an older release forward.

The version is the `layout` key (`STATE_LAYOUT`). Layout 1 (no `layout` key, the releases before opaque unit
versions) kept a manifest entry's size and mtime in a `signature` object and a compact `sig:{source}` hash of
`size:mtime_ns:flags`, and pinned dead letters by size and mtime. Layout 2 keeps the reader's version, which for
a folder or file unit is exactly `size:mtime_ns`, in the manifest JSON and in `units:{source}`
(`flags version`); a migrated manifest matches the next listing, so nothing is read again.

Layout 3 adds key shapes (erasure receipts, tombstones, shared leases) and rewrites none, so a layout-2 store
only has its `layout` key moved on.

The first process to open a store migrates it under a lease; the others wait for the layout key. Each
source's keys are rewritten in one MULTI/EXEC, so a migration cut short leaves every source either migrated or
not, and the next process to open the store finishes it.
"""

from __future__ import annotations

import json
import re
import time
from typing import Final

import redis
from redis.typing import EncodableT, FieldT

from engines.contract import ConfigError
from worker.records import ManifestEntry
from worker.redis.keys import Keys
from worker.redis.leases import Leases
from worker.state.base import STATE_LAYOUT
from worker.state.sqlite_layout import letter_v2

LEASE_S: Final = 60.0
_LEASE: Final = "state-layout"
_WAIT_POLL_S: Final = 0.05
_DELETED, _STALE = 1, 2  # bits of the flags in `units:{source}`
_GLOB: Final = re.compile(r"([*?\[\]\\])")


def unit_flags(entry: ManifestEntry) -> str:
    """The `units:{source}` field of an entry: its flags, a space, its version."""
    flags = (_DELETED if entry.deleted else 0) | (_STALE if entry.stale else 0)
    return f"{flags} {entry.version}"


def parse_unit_flags(value: bytes) -> tuple[str, bool, bool]:
    """(version, deleted, has_stale) of a `units:{source}` field."""
    bits = value[0] - 48  # one ASCII digit
    return value[2:].decode(), bool(bits & _DELETED), bool(bits & _STALE)


def prepare(client: redis.Redis, keys: Keys) -> None:
    """Make sure the store under `keys` has this release's layout, migrating an older one (see the module)."""
    while True:
        layout = _layout(client, keys)
        if layout == STATE_LAYOUT:
            return
        if layout > STATE_LAYOUT:
            raise ConfigError(
                f"the redis state under {keys.prefix!r} has layout {layout}, newer than this release's "
                f"{STATE_LAYOUT}; upgrade tinymemory-ingest everywhere, or use another TINYMEMORY_REDIS_PREFIX"
            )
        leases = Leases(client, keys.prefix)
        token = leases.acquire(_LEASE, LEASE_S)
        if token is not None:
            try:
                found = _layout(client, keys)
                if found < STATE_LAYOUT:  # not done by the previous holder meanwhile
                    if found < 2:
                        _migrate(client, keys)
                    client.set(keys.layout(), str(STATE_LAYOUT))
            finally:
                leases.release(_LEASE, token)
            return
        time.sleep(_WAIT_POLL_S)


def _layout(client: redis.Redis, keys: Keys) -> int:
    value = client.get(keys.layout())
    return 1 if value is None else int(value)


def _migrate(client: redis.Redis, keys: Keys) -> None:
    manifests = keys.manifest("")
    for key in client.scan_iter(match=_GLOB.sub(r"\\\1", manifests) + "*", count=1000):
        _migrate_source(client, keys, key.decode()[len(manifests) :])
    letters: dict[FieldT, EncodableT] = {
        field: _letter_v2(_bytes(body)) for field, body in client.hgetall(keys.dead_letters()).items()
    }
    if letters:
        client.hset(keys.dead_letters(), mapping=letters)


def _migrate_source(client: redis.Redis, keys: Keys, source_id: str) -> None:
    entries = {unit: _entry_v2(_bytes(body)) for unit, body in client.hgetall(keys.manifest(source_id)).items()}
    pipe = client.pipeline(transaction=True)
    pipe.delete(keys.legacy_signatures(source_id), keys.units(source_id))
    if entries:
        pipe.hset(keys.manifest(source_id), mapping={u: e.model_dump_json() for u, e in entries.items()})
        pipe.hset(keys.units(source_id), mapping={u: unit_flags(e) for u, e in entries.items()})
    pipe.execute()


def _entry_v2(body: bytes) -> ManifestEntry:
    data = json.loads(body)
    signature = data.pop("signature", None)
    if signature is not None:  # layout 2 entries (a migration cut short) have none
        data["version"] = f"{signature['size']}:{signature['mtime_ns']}"
        data["sha256"] = signature.get("sha256")
    return ManifestEntry.model_validate(data)


def _letter_v2(stored: bytes) -> bytes:
    attempts, body = stored.split(b" ", 1)
    return attempts + b" " + letter_v2(body.decode()).encode()


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()
