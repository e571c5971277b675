"""The state store contract, run against every implementation: SQLite, Redis on fakeredis, and real Redis.

Erasure receipts, tombstones and leases included: both stores answer them the same way."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sources import SourceConfigKind, SourceEntry
from tests.fixtures.redis_servers import open_redis
from worker.erasure.request import ErasureRequest, ErasureTarget, Tombstone
from worker.records import DeadLetter, ManifestEntry, SyncReport
from worker.state.base import StateStore, UnitState
from worker.state.redis import RedisStateStore
from worker.state.sqlite import SqliteStateStore

StoreFactory = Callable[[Path], AbstractContextManager[StateStore]]


@contextmanager
def _sqlite(tmp: Path) -> Iterator[StateStore]:
    made = SqliteStateStore(tmp / "state.sqlite3")
    yield made
    made.close()


def _redis(kind: str) -> StoreFactory:
    @contextmanager
    def open_store(tmp: Path) -> Iterator[StateStore]:
        with open_redis(kind) as target:
            yield RedisStateStore(target.client, target.prefix)

    return open_store


FACTORIES: dict[str, StoreFactory] = {"sqlite": _sqlite, "fakeredis": _redis("fakeredis"), "redis": _redis("redis")}
STORE_KINDS = ("sqlite", "fakeredis", pytest.param("redis", marks=pytest.mark.integration))


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    with FACTORIES[request.param](tmp_path) as made:
        yield made


def entry(source_id: str = "notes", **fields: object) -> SourceEntry:
    return SourceEntry.model_validate({"id": source_id, "kind": "folder", "label": "Notes", "path": "/n", **fields})


def unit(size: int = 1, mtime: int = 2, items: list[str] | None = None, **fields: object) -> ManifestEntry:
    """An entry whose version is a folder unit's (`size:mtime`); any opaque string would do."""
    return ManifestEntry.model_validate(
        {"version": f"{size}:{mtime}", "sha256": "ab", "item_ids": ["i1"] if items is None else items, **fields}
    )


def state(size: int, mtime: int, *, deleted: bool = False, has_stale: bool = False) -> UnitState:
    return UnitState(f"{size}:{mtime}", deleted=deleted, has_stale=has_stale)


def test_sources_round_trip_and_list_in_order(store: StateStore) -> None:
    store.put_source(entry("b", include=["**/*.md"], namespace="team:acme"))
    store.put_source(entry("a"))
    assert [e.id for e in store.list_sources()] == ["a", "b"]
    assert store.get_source("b") == entry("b", include=["**/*.md"], namespace="team:acme")
    assert store.get_source("missing") is None
    store.put_source(entry("a", label="Renamed"))
    assert store.get_source("a").label == "Renamed"  # type: ignore[union-attr]


def test_manifest_commit_is_one_step_and_none_removes(store: StateStore) -> None:
    store.commit("s", {"a.md": unit(1, 10), "b.md": unit(2, 20, ["i2", "i3"], stale=["old"])})
    assert store.unit_states("s") == {
        "a.md": state(1, 10, deleted=False, has_stale=False),
        "b.md": state(2, 20, deleted=False, has_stale=True),
    }
    assert store.manifest_entries("s", ["b.md", "zzz"]) == {"b.md": unit(2, 20, ["i2", "i3"], stale=["old"])}
    store.commit("s", {"a.md": None, "b.md": unit(3, 30, ["i4"])})
    assert store.unit_states("s") == {"b.md": state(3, 30, deleted=False, has_stale=False)}
    assert store.unit_states("other") == {}


def test_manifest_entries_in_large_numbers(store: StateStore) -> None:
    store.commit("s", {f"u{n}": unit(n, n) for n in range(1_200)})
    found = store.manifest_entries("s", [f"u{n}" for n in range(0, 1_200, 2)])
    assert len(found) == 600 and (found["u10"].version, found["u10"].sha256) == ("10:10", "ab")


def test_deleted_flag_survives(store: StateStore) -> None:
    store.commit("s", {"gone.md": unit(deleted=True, stale=["x"], items=[])})
    assert store.unit_states("s")["gone.md"].deleted
    assert store.manifest_entries("s", ["gone.md"])["gone.md"].item_ids == []


def test_dead_letters_replace_per_unit_and_stage_counting_attempts(store: StateStore) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    store.add_dead_letter(DeadLetter(source_id="s", unit_id="a.pdf", stage="convert", error="E", message="m1", at=t0))
    store.add_dead_letter(
        DeadLetter(source_id="s", unit_id="a.pdf", stage="convert", error="E", message="m2", at=t0 + timedelta(1))
    )
    store.add_dead_letter(DeadLetter(source_id="s", unit_id="a.pdf", stage="read", error="E", message="r", at=t0))
    store.add_dead_letter(DeadLetter(source_id="t", unit_id="b", stage="list", error="E", message="b", at=t0))
    letters = store.dead_letters("s")
    assert [(d.stage, d.message, d.attempts) for d in letters] == [("convert", "m2", 2), ("read", "r", 1)]
    assert len(store.dead_letters()) == 3
    store.clear_dead_letters("s", ["a.pdf"])
    assert store.dead_letters("s") == []
    assert store.purge_dead_letters() == 1


def test_unit_ids_with_pattern_characters_are_cleared_exactly(store: StateStore) -> None:
    for unit_id in ("a_b.md", "a%b.md", "axb.md"):
        store.add_dead_letter(DeadLetter(source_id="s", unit_id=unit_id, stage="read", error="E", message="m"))
    store.clear_dead_letters("s", ["a_b.md"])
    assert sorted(d.unit_id for d in store.dead_letters("s")) == ["a%b.md", "axb.md"]


def test_runs_and_removing_a_source_forgets_its_state(store: StateStore) -> None:
    store.put_source(entry("s"))
    store.commit("s", {"a": unit()})
    store.add_dead_letter(DeadLetter(source_id="s", unit_id="a", stage="read", error="E", message="m"))
    report = SyncReport(source_id="s", listed=3)  # one object: the record may carry a timestamp
    store.record_sync(report)
    assert store.last_sync("s") == report
    store.remove_source("s")
    assert (store.get_source("s"), store.unit_states("s"), store.dead_letters("s"), store.last_sync("s")) == (
        None,
        {},
        [],
        None,
    )


def test_entries_refuse_bad_ids_and_namespaces() -> None:
    with pytest.raises(ValueError, match="id must not contain"):
        entry("a:b")
    with pytest.raises(ValueError, match="id is required"):
        entry(" ")
    with pytest.raises(ValueError, match="is not a namespace segment kind"):
        entry(namespace="robot:x")
    assert SourceConfigKind.WEB_PAGE.item_source.value == "link"


# -- added with the Redis store ------------------------------------------------------------------------


def letter(unit_id: str, source_id: str = "s", stage: str = "read", at: datetime | None = None) -> DeadLetter:
    stamp = at or datetime(2026, 1, 1, tzinfo=UTC)
    return DeadLetter(source_id=source_id, unit_id=unit_id, stage=stage, error="E", message=unit_id, at=stamp)


def test_empty_commit_and_unknown_units_change_nothing(store: StateStore) -> None:
    store.commit("s", {})
    store.commit("s", {"never-there": None})
    assert store.unit_states("s") == {}
    assert store.manifest_entries("s", []) == {}
    assert store.manifest_entries("s", ["a", "a"]) == {}


def test_versions_are_opaque_strings_kept_exactly(store: StateStore) -> None:
    versions = {"etag": '"33a64df5"', "both": 'Wed, 21 Oct 2015 07:28:00 GMT|W/"x"', "sha": "a" * 40, "empty": ""}
    store.commit("s", {u: ManifestEntry(version=v, stale=["x"] if u == "sha" else []) for u, v in versions.items()})
    assert {u: s.version for u, s in store.unit_states("s").items()} == versions
    assert store.unit_states("s")["sha"].has_stale and not store.unit_states("s")["etag"].has_stale


def test_unit_ids_keep_every_character(store: StateStore) -> None:
    ids = ["dir/ü ñ.md", "a:b:c", "with space", "*?[glob]", "%_like", "日本語/メモ.txt", "trailing\\"]
    store.commit("s", {u: unit(n, n) for n, u in enumerate(ids)})
    assert sorted(store.unit_states("s")) == sorted(ids)
    assert store.manifest_entries("s", ids)["a:b:c"] == unit(1, 1)


def test_large_manifest_commits_and_reads_back_exactly(store: StateStore) -> None:
    entries = {
        f"notes/{n:05}.md": unit(n, n * 1_000, [f"i{n}"], stale=["old"] if n % 7 == 0 else []) for n in range(7_400)
    }
    store.commit("s", entries)
    states = store.unit_states("s")
    assert len(states) == 7_400
    assert states["notes/00014.md"] == state(14, 14_000, deleted=False, has_stale=True)
    assert states["notes/07398.md"] == state(7_398, 7_398_000, deleted=False, has_stale=False)
    assert store.manifest_entries("s", entries) == entries


def test_concurrent_commits_are_each_all_or_nothing(store: StateStore) -> None:
    units = [f"u{n}" for n in range(1_500)]  # more than one command's worth on Redis
    mixed: list[set[int]] = []
    stop = threading.Event()

    def write(size: int) -> None:
        for _ in range(6):
            store.commit("s", {u: unit(size, size, [f"i{size}"]) for u in units})

    def read() -> None:
        while not stop.is_set():
            sizes = {state.version for state in store.unit_states("s").values()}
            if len(sizes) > 1:
                mixed.append(sizes)

    threads = [threading.Thread(target=write, args=(size,)) for size in (1, 2)]
    reader = threading.Thread(target=read)
    for thread in (*threads, reader):
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    reader.join()
    assert mixed == []
    final = store.manifest_entries("s", units)
    (version,) = {entry.version for entry in final.values()}
    assert store.unit_states("s") == dict.fromkeys(units, UnitState(version, deleted=False, has_stale=False))


def test_dead_letters_newest_first_across_sources_with_a_limit(store: StateStore) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(6):
        store.add_dead_letter(letter(f"u{n}", source_id="st"[n % 2], at=t0 + timedelta(minutes=n)))
    assert [d.unit_id for d in store.dead_letters()] == ["u5", "u4", "u3", "u2", "u1", "u0"]
    assert [d.unit_id for d in store.dead_letters(limit=2)] == ["u5", "u4"]
    assert [d.unit_id for d in store.dead_letters("s", limit=2)] == ["u4", "u2"]
    assert store.dead_letters("nobody") == []


def test_dead_letter_keeps_its_attempts_when_new_and_counts_on(store: StateStore) -> None:
    first = letter("a").model_copy(update={"attempts": 3})
    store.add_dead_letter(first)
    assert store.dead_letters("s") == [first]
    store.add_dead_letter(letter("a"))
    assert [d.attempts for d in store.dead_letters("s")] == [4]


def test_clearing_a_unit_leaves_longer_ids_and_other_sources(store: StateStore) -> None:
    for unit_id, source_id in (("a", "s"), ("a.md", "s"), ("a/b", "s"), ("a", "t")):
        store.add_dead_letter(letter(unit_id, source_id=source_id))
    store.add_dead_letter(letter("a", stage="convert"))
    store.clear_dead_letters("s", ["a", "missing"])
    store.clear_dead_letters("s", [])
    assert sorted(d.unit_id for d in store.dead_letters("s")) == ["a.md", "a/b"]
    assert [d.source_id for d in store.dead_letters("t")] == ["t"]


def test_purging_one_source_counts_and_spares_the_rest(store: StateStore) -> None:
    for n in range(3):
        store.add_dead_letter(letter(f"u{n}"))
    store.add_dead_letter(letter("u0", source_id="t"))
    assert store.purge_dead_letters("s") == 3
    assert store.purge_dead_letters("s") == 0
    assert [d.source_id for d in store.dead_letters()] == ["t"]
    assert store.purge_dead_letters() == 1
    assert store.dead_letters() == []


def test_removing_a_source_spares_the_others(store: StateStore) -> None:
    for source_id in ("s", "t"):
        store.put_source(entry(source_id))
        store.commit(source_id, {"a": unit()})
        store.add_dead_letter(letter("a", source_id=source_id))
        store.record_sync(SyncReport(source_id=source_id, listed=len(source_id)))
    store.remove_source("s")
    store.remove_source("never-there")
    assert [e.id for e in store.list_sources()] == ["t"]
    assert store.unit_states("t") == {"a": state(1, 2, deleted=False, has_stale=False)}
    assert [d.source_id for d in store.dead_letters()] == ["t"]
    assert store.last_sync("s") is None
    assert store.last_sync("t").listed == 1  # type: ignore[union-attr]


# -- erasures, tombstones and leases ----------------------------------------------------------------------


def request(erasure_id: str, minutes: int = 0, **target: object) -> ErasureRequest:
    fields = target or {"source_id": "notes"}
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    return ErasureRequest(
        id=erasure_id, target=ErasureTarget.model_validate(fields), requested_by="admin", requested_at=at
    )


def test_the_same_erasure_request_is_answered_with_the_first_receipt(store: StateStore) -> None:
    first = store.open_erasure(request("e1"))
    assert (first.id, first.status, first.requested_by) == ("e1", "queued", "admin")
    assert store.open_erasure(request("e2")) == first  # queued
    store.put_erasure(first.model_copy(update={"status": "running", "steps": ["tombstoned"]}))
    assert store.open_erasure(request("e3")).id == "e1"  # running
    store.put_erasure(first.model_copy(update={"status": "completed", "forgotten": 7}))
    assert store.open_erasure(request("e4")).forgotten == 7  # completed
    assert store.open_erasure(request("k1", kinds=["learning"], source_id="notes")).id == "k1"  # other kinds
    assert store.open_erasure(request("n1", namespace="user:a")).id == "n1"  # another target
    store.put_erasure(store.get_erasure("e1").model_copy(update={"status": "failed"}))  # type: ignore[union-attr]
    assert store.open_erasure(request("e5")).id == "e5"  # a failed one is asked again afresh
    assert store.get_erasure("e1").status == "failed"  # type: ignore[union-attr]  # and kept
    assert store.get_erasure("e2") is None and store.get_erasure("missing") is None


def test_concurrent_identical_requests_share_one_receipt(store: StateStore) -> None:
    answers: list[str] = []

    def ask(n: int) -> None:
        answers.append(store.open_erasure(request(f"r{n}", namespace="user:x")).id)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(answers)) == 1 and len(answers) == 8


def test_unfinished_erasures_are_listed_oldest_first(store: StateStore) -> None:
    later = store.open_erasure(request("b", minutes=5, namespace="user:b"))
    earlier = store.open_erasure(request("a", minutes=1, namespace="user:a"))
    done = store.open_erasure(request("c", minutes=0, namespace="user:c"))
    store.put_erasure(done.model_copy(update={"status": "completed"}))
    store.put_erasure(later.model_copy(update={"status": "running"}))
    assert [r.id for r in store.unfinished_erasures()] == [earlier.id, later.id]


def test_tombstones_are_read_by_scope_one_per_erasure(store: StateStore) -> None:
    store.put_tombstone(Tombstone(scope="namespace:user:a", erasure_id="e1", kinds=["learning"]))
    store.put_tombstone(Tombstone(scope="namespace:user:a", erasure_id="e2"))
    store.put_tombstone(Tombstone(scope="source:notes", erasure_id="e3"))
    store.put_tombstone(Tombstone(scope="source:notes", erasure_id="e3"))  # the same again: one
    found = store.tombstones(["namespace:user:a", "namespace:user:a/agent:x", "source:notes", "source:other"])
    assert sorted((t.scope, t.erasure_id, t.whole) for t in found) == [
        ("namespace:user:a", "e1", False),
        ("namespace:user:a", "e2", True),
        ("source:notes", "e3", True),
    ]
    assert store.tombstones([]) == [] and store.tombstones(["namespace:user"]) == []
    store.remove_source("notes")  # a tombstone outlives the source's state
    assert [t.erasure_id for t in store.tombstones(["source:notes"])] == ["e3"]


def test_exclusive_leases_have_one_owner_and_lapse(store: StateStore) -> None:
    leases = store.leases()
    token = leases.acquire("erasure:e1", 30)
    assert token is not None and leases.held("erasure:e1")
    assert leases.acquire("erasure:e1", 30) is None
    assert not leases.release("erasure:e1", "not-the-owner") and not leases.extend("erasure:e1", "x", 30)
    assert leases.extend("erasure:e1", token, 30) and leases.release("erasure:e1", token)
    assert not leases.held("erasure:e1") and not leases.release("erasure:e1", token)
    short = leases.acquire("erasure:e2", 0.05)
    assert short is not None
    time.sleep(0.15)
    assert not leases.held("erasure:e2") and not leases.extend("erasure:e2", short, 30)
    assert leases.acquire("erasure:e2", 30) not in (None, short)  # a lapsed lease is taken afresh


def test_shared_leases_have_many_holders_each_lapsing_on_its_own(store: StateStore) -> None:
    leases = store.leases()
    first, second = leases.join("jobs:s", 30), leases.join("jobs:s", 0.05)
    assert leases.holders("jobs:s") == {first, second} and leases.holders("jobs:t") == set()
    assert not leases.held("jobs:s")  # shared holds are not an exclusive lease
    time.sleep(0.15)
    assert leases.holders("jobs:s") == {first}
    assert not leases.renew("jobs:s", second, 30)  # it had lapsed: held again from now
    assert leases.renew("jobs:s", first, 30)
    assert leases.holders("jobs:s") == {first, second}
    leases.leave("jobs:s", first)
    leases.leave("jobs:s", "never-held")
    assert leases.holders("jobs:s") == {second}


def test_leases_are_shared_by_every_store_on_the_same_state(store: StateStore, tmp_path: Path) -> None:
    if isinstance(store, SqliteStateStore):
        other: StateStore = SqliteStateStore(store.path)
    else:
        assert isinstance(store, RedisStateStore)
        other = RedisStateStore(store._client, store.keys.prefix)
    token = store.leases().join("jobs:s", 30)
    assert other.leases().holders("jobs:s") == {token}
    assert other.leases().acquire("erasure:e", 30) is not None and not store.leases().acquire("erasure:e", 30)


def test_item_ids_are_every_id_the_manifest_names_once(store: StateStore) -> None:
    store.commit("s", {"a.md": unit(items=["i1", "i2"], stale=["old"]), "b.md": unit(items=["i2", "i3"])})
    store.commit("t", {"a.md": unit(items=["t1"])})
    assert sorted(store.item_ids("s")) == ["i1", "i2", "i3", "old"]
    assert store.item_ids("none") == []


def test_recent_erasures_are_listed_newest_first_and_capped(store: StateStore) -> None:
    first = store.open_erasure(request("a", minutes=1, namespace="user:a"))
    second = store.open_erasure(request("b", minutes=5, namespace="user:b"))
    third = store.open_erasure(request("c", minutes=9, source_id="notes"))
    store.put_erasure(first.model_copy(update={"status": "completed"}))
    assert [r.id for r in store.recent_erasures()] == [third.id, second.id, first.id]
    assert [r.id for r in store.recent_erasures(limit=2)] == [third.id, second.id]
    assert store.recent_erasures()[-1].status == "completed"
