"""Every Redis key this project writes, defined once.

All keys start with one namespace prefix: `tm:` in production, `tm:test-<uuid>:` in a test that
must not see another's keys. Each key either expires or has a stated reason to live:

| Key (after the prefix) | Type                                     | Lifetime                                   |
| ---------------------- | ---------------------------------------- | ------------------------------------------ |
| `layout`               | string: the state's layout version       | no TTL (8)                                 |
| `sources`              | hash: source id → `SourceEntry` JSON     | no TTL (1)                                 |
| `manifest:{source}`    | hash: unit → `ManifestEntry` JSON        | no TTL (2)                                 |
| `units:{source}`       | hash: unit → `flags version`             | no TTL (2), in the manifest's MULTI        |
| `sig:{source}`         | hash: layout 1's `units:`                | removed by the migration (8)               |
| `runs:{source}`        | string: last `SyncReport` JSON           | no TTL (2)                                 |
| `dlq`                  | hash: letter key → `attempts json`       | capped at `DEAD_LETTER_CAP` letters (3)    |
| `dlq:at`               | sorted set: letter key → `at` in µs      | capped with `dlq` (3)                      |
| `dlq:units:{source}`   | sorted set, score 0: `unit␟stage`        | capped with `dlq` (3)                      |
| `lease:{name}`         | string: owner token                      | the lease's TTL (SET NX PX) (4)            |
| `holders:{name}`       | sorted set: token → deadline (epoch ms)  | the latest holder's deadline (4)           |
| `mark:{name}`          | string: `1`                              | the TTL its setter gives (4)               |
| `progress:{run}`       | hash: totals and counters                | `PROGRESS_TTL_S`, refreshed on each write  |
| `tombstone:{scope}`    | hash: erasure id → `Tombstone` JSON      | no TTL (5)                                 |
| `erasure:{id}`         | string: `ErasureReceipt` JSON            | no TTL (9)                                 |
| `erasures`             | hash: request key → erasure id           | no TTL (9)                                 |
| `workers`              | sorted set: worker → deadline (epoch s)  | `WORKER_HEARTBEAT_TTL_S` after a beat (6)  |
| `deliveries`           | sorted set: task id → sent at (epoch s)  | no TTL (10)                                |
| `delivery:{task}`      | string: `Delivery` JSON                  | a batch's expiry + 1 h; an erasure's none (10) |
| `celery:…`             | Celery's broker keys                     | Celery's own (7)                           |

1. The source registry: an entry leaves with `remove_source`.
2. The checkpoint of what is stored for each unit, and the source's last run: they live as long as
   the source and leave with `remove_source`. `units:` is the compact half a sync compares, so a
   listing of thousands of units is diffed after one HGETALL without parsing JSON.
3. One letter per (source, unit, stage); past the cap the oldest (by `at`) are dropped. The
   per-source index lets an ingest batch clear its units' letters with one range read each.
4. Ownership ends by itself when its holder dies; only the holder's token releases or extends it.
   A mark is a note for a lease's holder ("sync again when done"), taken once, gone when it lapses.
   `holders:` is a shared lease (the running jobs of a source): holders past their deadline are
   dropped as others come and go, and the key expires with the last one.
5. An erased source or account stays erased: queued and in-flight jobs check its tombstone, so it
   has no end. One small key per erased scope, a field per erasure of it.
6. Members past their deadline are dropped on each beat; the key expires when no worker beats.
7. kombu's `global_keyprefix`, so the queues carry ours too: acked messages leave, unacked ones
   return after `visibility_timeout`.
8. Says how the other keys are laid out, so a store written by an older release is migrated once
   (`worker.state.redis_layout`); it lives as long as the state it describes. Layout 1 had
   `sig:{source}` (`size:mtime_ns:flags`) where layout 2 has `units:{source}`; the migration removes it.
9. An erasure receipt is the audit record of what was erased, by whom and when: it outlives the
   source's other keys and is kept for good (no item text in it). `erasures` points each request
   (its target and kinds) at its receipt, so the same request again is answered with the first.

10. A message sent and not yet settled by its task (`worker.cluster.deliveries`), so one the broker lost is
   sent again: its task settles it, a sweep drops it once its message would have expired. An erasure's
   has no TTL, as an erasure never lapses; the index holds only ids, and sweeps remove those whose record
   is gone.

`␟` is the unit separator `\\x1f`; a letter key is `source␟unit␟stage` (`DeadLetter.key`).
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.contract import ConfigError

DEFAULT_PREFIX = "tm:"
# The architecture's rule: every key of this project starts with it, whatever namespace is added.
ROOT_PREFIX = "tm:"
DEAD_LETTER_CAP = 10_000
PROGRESS_TTL_S = 24 * 3600
WORKER_HEARTBEAT_TTL_S = 60
UNIT_SEPARATOR = "\x1f"


@dataclass(frozen=True, slots=True)
class KeyShape:
    """One documented key shape: its template (after the prefix) and whether it must carry a TTL."""

    template: str
    expires: bool


# The table above as data, so tests can check every written key against it.
SHAPES: tuple[KeyShape, ...] = (
    KeyShape("layout", expires=False),
    KeyShape("sources", expires=False),
    KeyShape("manifest:{source}", expires=False),
    KeyShape("units:{source}", expires=False),
    KeyShape("sig:{source}", expires=False),
    KeyShape("runs:{source}", expires=False),
    KeyShape("dlq", expires=False),
    KeyShape("dlq:at", expires=False),
    KeyShape("dlq:units:{source}", expires=False),
    KeyShape("lease:{name}", expires=True),
    KeyShape("holders:{name}", expires=True),
    KeyShape("mark:{name}", expires=True),
    KeyShape("progress:{run}", expires=True),
    KeyShape("tombstone:{scope}", expires=False),
    KeyShape("erasure:{id}", expires=False),
    KeyShape("erasures", expires=False),
    KeyShape("workers", expires=True),
    KeyShape("deliveries", expires=False),
    KeyShape("delivery:{task}", expires=False),  # a batch's does; an erasure's must not (10)
    KeyShape("celery:{kombu}", expires=False),
)


@dataclass(frozen=True, slots=True)
class Keys:
    """The key shapes under one prefix. The prefix must start with `tm:` and end with `:`."""

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not self.prefix.startswith(ROOT_PREFIX) or not self.prefix.endswith(":"):
            raise ConfigError(f"redis key prefix {self.prefix!r} must start with 'tm:' and end with ':'")

    def layout(self) -> str:
        return f"{self.prefix}layout"

    def sources(self) -> str:
        return f"{self.prefix}sources"

    def manifest(self, source_id: str) -> str:
        return f"{self.prefix}manifest:{source_id}"

    def units(self, source_id: str) -> str:
        return f"{self.prefix}units:{source_id}"

    def legacy_signatures(self, source_id: str) -> str:
        """Layout 1's `sig:{source}`: only the migration touches it, to remove it."""
        return f"{self.prefix}sig:{source_id}"

    def last_run(self, source_id: str) -> str:
        return f"{self.prefix}runs:{source_id}"

    def dead_letters(self) -> str:
        return f"{self.prefix}dlq"

    def dead_letter_times(self) -> str:
        return f"{self.prefix}dlq:at"

    def dead_letter_units_prefix(self) -> str:
        """What `dead_letter_units` puts before the source id (scripts build that key from it)."""
        return f"{self.prefix}dlq:units:"

    def dead_letter_units(self, source_id: str) -> str:
        return f"{self.dead_letter_units_prefix()}{source_id}"

    def lease(self, name: str) -> str:
        return f"{self.prefix}lease:{name}"

    def holders(self, name: str) -> str:
        return f"{self.prefix}holders:{name}"

    def mark(self, name: str) -> str:
        return f"{self.prefix}mark:{name}"

    def progress(self, run_id: str) -> str:
        return f"{self.prefix}progress:{run_id}"

    def tombstone(self, scope: str) -> str:
        return f"{self.prefix}tombstone:{scope}"

    def erasure_prefix(self) -> str:
        """What `erasure` puts before the id (scripts build that key from it)."""
        return f"{self.prefix}erasure:"

    def erasure(self, erasure_id: str) -> str:
        return f"{self.erasure_prefix()}{erasure_id}"

    def erasures(self) -> str:
        return f"{self.prefix}erasures"

    def workers(self) -> str:
        return f"{self.prefix}workers"

    def deliveries(self) -> str:
        return f"{self.prefix}deliveries"

    def delivery(self, task_id: str) -> str:
        return f"{self.prefix}delivery:{task_id}"

    def celery(self) -> str:
        """Celery's `broker_transport_options={"global_keyprefix": ...}`, so its keys carry ours too."""
        return f"{self.prefix}celery:"
