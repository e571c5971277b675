"""State written by the releases before opaque unit versions (layout 1) keeps working, with no re-ingest.

The fixtures are built here, byte for byte as that release wrote them: its SQLite tables and rows, its Redis
keys and values (recorded from a run of it). Each test then opens the state with this release and checks
that the manifest, dead letters and runs read back, and, end to end, that a sync of the unchanged folder
reads and stores nothing.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from engines.contract import ConfigError, ListRequest
from engines.reference import ReferenceEngine
from pipeline.convert import native_chain
from sources import SourceEntry, SourceReaders
from tests.fixtures.redis_servers import RedisTarget, open_redis
from worker.embedded.dispatch import InProcessDispatcher
from worker.jobs import JobContext, sync_source
from worker.records import Change, ManifestEntry
from worker.redis.keys import Keys
from worker.state.base import STATE_LAYOUT, StateStore, UnitState
from worker.state.redis import RedisStateStore
from worker.state.sqlite import SqliteStateStore

# What layout 1 wrote (sources, manifest with size and mtime columns, dead letters pinned by size and mtime).
LEGACY_SCHEMA = (
    "CREATE TABLE sources (id TEXT PRIMARY KEY, body TEXT NOT NULL)",
    "CREATE TABLE manifest ( source_id TEXT NOT NULL, unit_id TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER"
    " NOT NULL, sha256 TEXT, item_ids TEXT NOT NULL, stale TEXT NOT NULL, deleted INTEGER NOT NULL,"
    " PRIMARY KEY (source_id, unit_id)) WITHOUT ROWID",
    "CREATE TABLE dead_letters ( key TEXT PRIMARY KEY, source_id TEXT NOT NULL, unit_id TEXT NOT NULL, at TEXT NOT"
    " NULL, body TEXT NOT NULL)",
    "CREATE INDEX dead_letters_source ON dead_letters (source_id, unit_id)",
    "CREATE INDEX dead_letters_at ON dead_letters (at)",
    "CREATE TABLE runs (source_id TEXT PRIMARY KEY, body TEXT NOT NULL)",
)
SOURCE_BODY = (
    '{"id":"notes","kind":"folder","label":"notes","enabled":true,"path":"PATH","include":[],"url":null,'
    '"namespace":null,"interval_s":null}'
)
RUN_BODY = (
    '{"source_id":"notes","finished_at":"2026-12-01T14:07:59.504422Z","held_back":0,"listed":3,"upserts":3,'
    '"deletes":0,"skipped":0,"batches":1}'
)


def letter_body(unit_id: str, stage: str, size: int | None, mtime_ns: int | None) -> str:
    return (
        f'{{"source_id":"notes","unit_id":"{unit_id}","stage":"{stage}","error":"InvalidRequestError",'
        f'"message":"{unit_id}: broken","at":"2026-12-01T14:07:59.506815Z","size":{json.dumps(size)},'
        f'"mtime_ns":{json.dumps(mtime_ns)}}}'
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "a.md").write_text("# A\n\nalpha\n")
    (notes / "sub" / "b.txt").write_text("beta\n")
    (notes / "bad.md").write_bytes(b"\xff\xfe bad")
    return notes


class _Converter:
    def __init__(self) -> None:
        self.chain = native_chain()

    async def aconvert(self, raw):  # type: ignore[no-untyped-def]
        return self.chain.convert(raw)


async def ingest(state: StateStore, folder: Path, engine: ReferenceEngine) -> tuple[int, int]:
    """Sync `folder` as source `notes` in process; (units upserted, batches) of the sync."""
    if state.get_source("notes") is None:
        state.put_source(SourceEntry(id="notes", kind="folder", label="notes", path=str(folder)))
    dispatcher = InProcessDispatcher()
    ctx = JobContext(state, engine, _Converter(), dispatcher, SourceReaders())
    dispatcher.bind(ctx)
    report = await sync_source(ctx, "notes")
    await dispatcher.drain()
    return report.upserts, report.batches


def legacy_rows(store: StateStore, folder: Path) -> list[tuple[object, ...]]:
    """This release's manifest of `notes`, as layout-1 rows (size and mtime split out of the version)."""
    rows = []
    for unit_id, entry in store.manifest_entries("notes", store.unit_states("notes")).items():
        size, mtime_ns = entry.version.split(":")
        rows.append(("notes", unit_id, int(size), int(mtime_ns), entry.sha256, json.dumps(entry.item_ids), "[]", 0))
    return rows


def write_legacy_sqlite(path: Path, folder: Path, rows: list[tuple[object, ...]]) -> None:
    conn = sqlite3.connect(path)
    for statement in LEGACY_SCHEMA:
        conn.execute(statement)
    conn.execute("INSERT INTO sources VALUES (?, ?)", ("notes", SOURCE_BODY.replace("PATH", str(folder))))
    conn.executemany("INSERT INTO manifest VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    bad = (folder / "bad.md").stat()
    letters = [
        ("bad.md", "convert", bad.st_size, bad.st_mtime_ns),
        ("gone.md", "store", None, 123),  # a transient failure: not pinned
    ]
    for unit_id, stage, size, mtime in letters:
        conn.execute(
            "INSERT INTO dead_letters VALUES (?, ?, ?, ?, ?)",
            (
                f"notes\x1f{unit_id}\x1f{stage}",
                "notes",
                unit_id,
                "2026-12-01T14:07:59+00:00",
                letter_body(unit_id, stage, size, mtime),
            ),
        )
    conn.execute("INSERT INTO runs VALUES (?, ?)", ("notes", RUN_BODY))
    conn.commit()
    conn.close()


@pytest.fixture
def legacy_file(tmp_path: Path, folder: Path) -> Iterator[tuple[Path, ReferenceEngine]]:
    """A layout-1 state file for `folder`, whose items are in the engine as that release stored them."""
    engine = ReferenceEngine()
    fresh = SqliteStateStore(tmp_path / "fresh.sqlite3")
    asyncio.run(ingest(fresh, folder, engine))
    rows = legacy_rows(fresh, folder)
    fresh.close()
    write_legacy_sqlite(tmp_path / "state.sqlite3", folder, rows)
    yield tmp_path / "state.sqlite3", engine


def test_a_layout_1_file_reads_back_in_layout_2(legacy_file: tuple[Path, ReferenceEngine], folder: Path) -> None:
    path, _ = legacy_file
    store = SqliteStateStore(path)
    st = (folder / "a.md").stat()
    assert store.unit_states("notes")["a.md"] == UnitState(f"{st.st_size}:{st.st_mtime_ns}", False, False)
    entry = store.manifest_entries("notes", ["a.md"])["a.md"]
    assert entry.version == f"{st.st_size}:{st.st_mtime_ns}" and entry.sha256 and entry.item_ids
    letters = {d.unit_id: d for d in store.dead_letters("notes")}
    bad = (folder / "bad.md").stat()
    assert letters["bad.md"].version == f"{bad.st_size}:{bad.st_mtime_ns}"
    assert letters["gone.md"].version is None
    assert store.last_sync("notes").listed == 3  # type: ignore[union-attr]
    assert store.get_source("notes").path == str(folder)  # type: ignore[union-attr]
    store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (STATE_LAYOUT,)
    assert "size" not in {row[1] for row in conn.execute("PRAGMA table_info(manifest)")}


async def test_a_migrated_file_syncs_the_unchanged_folder_with_no_work(
    legacy_file: tuple[Path, ReferenceEngine], folder: Path
) -> None:
    path, engine = legacy_file
    before = (await engine.list(ListRequest(limit=100))).items
    store = SqliteStateStore(path)
    assert await ingest(store, folder, engine) == (0, 0)  # no unit read again: the broken one is held back too
    assert (await engine.list(ListRequest(limit=100))).items == before
    store.close()
    SqliteStateStore(path).close()  # opening it again changes nothing


def test_a_file_of_a_newer_layout_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {STATE_LAYOUT + 1}")
    conn.close()
    with pytest.raises(ConfigError, match="newer than this release"):
        SqliteStateStore(path)


# -- Redis ---------------------------------------------------------------------------------------------

REDIS_KINDS = ("fakeredis", pytest.param("redis", marks=pytest.mark.integration))


@pytest.fixture(params=REDIS_KINDS)
def target(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    with open_redis(request.param) as made:
        yield made


def write_legacy_redis(client: redis.Redis, keys: Keys, folder: Path, rows: list[tuple[object, ...]]) -> None:
    """Layout-1 keys as that release wrote them: no `layout`, `signature` objects, `sig:` as size:mtime:flags."""
    client.hset(keys.sources(), "notes", SOURCE_BODY.replace("PATH", str(folder)))
    for _, unit_id, size, mtime_ns, sha256, item_ids, _, _ in rows:
        body = {
            "signature": {"size": size, "mtime_ns": mtime_ns, "sha256": sha256},
            "item_ids": json.loads(str(item_ids)),
            "stale": [],
            "deleted": False,
        }
        client.hset(keys.manifest("notes"), str(unit_id), json.dumps(body, separators=(",", ":")))
        client.hset(keys.legacy_signatures("notes"), str(unit_id), f"{size}:{mtime_ns}:0")
    client.hset(
        keys.manifest("notes"),
        "gone.md",
        '{"signature":{"size":1,"mtime_ns":2,"sha256":null},"item_ids":[],"stale":["x"],"deleted":true}',
    )
    client.hset(keys.legacy_signatures("notes"), "gone.md", "1:2:3")
    bad = (folder / "bad.md").stat()
    for unit_id, stage, size, mtime in (
        ("bad.md", "convert", bad.st_size, bad.st_mtime_ns),
        ("big.log", "list", None, None),
    ):
        field = f"notes\x1f{unit_id}\x1f{stage}"
        client.hset(keys.dead_letters(), field, "1 " + letter_body(unit_id, stage, size, mtime))
        client.zadd(keys.dead_letter_times(), {field: 1796134084725813.0})
        client.zadd(keys.dead_letter_units("notes"), {f"{unit_id}\x1f{stage}": 0})
    client.set(keys.last_run("notes"), RUN_BODY)


@pytest.fixture
def legacy_redis(target: RedisTarget, tmp_path: Path, folder: Path) -> Iterator[tuple[RedisTarget, ReferenceEngine]]:
    engine = ReferenceEngine()
    fresh = SqliteStateStore(tmp_path / "fresh.sqlite3")
    asyncio.run(ingest(fresh, folder, engine))
    rows = legacy_rows(fresh, folder)
    fresh.close()
    write_legacy_redis(target.client, Keys(target.prefix), folder, rows)
    yield target, engine


async def test_layout_1_redis_keys_migrate_and_sync_with_no_work(
    legacy_redis: tuple[RedisTarget, ReferenceEngine], folder: Path
) -> None:
    target, engine = legacy_redis
    keys = Keys(target.prefix)
    before = (await engine.list(ListRequest(limit=100))).items
    store = RedisStateStore(target.client, target.prefix)
    assert target.client.get(keys.layout()) == str(STATE_LAYOUT).encode()
    assert not target.client.exists(keys.legacy_signatures("notes"))
    assert store.unit_states("notes")["gone.md"] == UnitState("1:2", deleted=True, has_stale=True)
    assert store.manifest_entries("notes", ["gone.md"])["gone.md"] == ManifestEntry(
        version="1:2", stale=["x"], deleted=True
    )
    letters = {d.unit_id: d for d in store.dead_letters("notes")}
    bad = (folder / "bad.md").stat()
    assert (letters["bad.md"].version, letters["bad.md"].attempts) == (f"{bad.st_size}:{bad.st_mtime_ns}", 1)
    assert letters["big.log"].version is None
    # The unchanged units are not read again; the interrupted deletion of gone.md is finished.
    upserts, _ = await ingest(store, folder, engine)
    assert upserts == 0
    assert (await engine.list(ListRequest(limit=100))).items == before
    assert "gone.md" not in store.unit_states("notes")
    RedisStateStore(target.client, target.prefix)  # opening again: already layout 2, nothing to do


def test_redis_state_of_a_newer_layout_is_refused(target: RedisTarget) -> None:
    target.client.set(Keys(target.prefix).layout(), str(STATE_LAYOUT + 1))
    with pytest.raises(ConfigError, match="newer than this release"):
        RedisStateStore(target.client, target.prefix)


def test_a_change_queued_by_layout_1_code_is_read_with_its_version() -> None:
    legacy = {"unit_id": "a.md", "action": "upsert", "size": 11, "mtime_ns": 1796134078312515497}
    assert Change.model_validate(legacy) == Change(
        unit_id="a.md", action="upsert", version="11:1796134078312515497", size=11
    )
    gone = Change.model_validate({"unit_id": "b.md", "action": "delete", "size": 0, "mtime_ns": 0})
    assert (gone.action, gone.version) == ("delete", None)


# -- layout 2 to 3: erasures, tombstones and leases are added; nothing of layout 2 is rewritten ------------


def test_a_layout_2_file_gains_the_erasure_tables_and_keeps_everything(tmp_path: Path, folder: Path) -> None:
    path = tmp_path / "state.sqlite3"
    conn = sqlite3.connect(path)
    for statement in (
        "CREATE TABLE sources (id TEXT PRIMARY KEY, body TEXT NOT NULL)",
        "CREATE TABLE manifest ( source_id TEXT NOT NULL, unit_id TEXT NOT NULL, version TEXT NOT NULL,"
        " sha256 TEXT, item_ids TEXT NOT NULL, stale TEXT NOT NULL, deleted INTEGER NOT NULL,"
        " PRIMARY KEY (source_id, unit_id)) WITHOUT ROWID",
        "CREATE TABLE dead_letters ( key TEXT PRIMARY KEY, source_id TEXT NOT NULL, unit_id TEXT NOT NULL,"
        " at TEXT NOT NULL, body TEXT NOT NULL)",
        "CREATE TABLE runs (source_id TEXT PRIMARY KEY, body TEXT NOT NULL)",
    ):
        conn.execute(statement)
    conn.execute("INSERT INTO sources VALUES (?, ?)", ("notes", SOURCE_BODY.replace("PATH", str(folder))))
    conn.execute("INSERT INTO manifest VALUES ('notes', 'a.md', '12:34', 'ab', '[\"i1\"]', '[]', 0)")
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()

    store = SqliteStateStore(path)
    assert store.unit_states("notes") == {"a.md": UnitState("12:34", False, False)}
    assert store.get_source("notes") is not None and store.unfinished_erasures() == []
    assert store.tombstones(["source:notes"]) == [] and store.leases().join("jobs:notes", 5)
    store.close()
    conn = sqlite3.connect(path)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"erasures", "tombstones", "leases"} <= tables
    assert conn.execute("PRAGMA user_version").fetchone() == (3,) == (STATE_LAYOUT,)
    conn.close()


def test_layout_2_redis_keys_move_to_layout_3_untouched(target: RedisTarget) -> None:
    keys = Keys(target.prefix)
    client = target.client
    # Spaced and out of order: a rewrite (the layout 1 migration) would write it back compact.
    body = b'{"item_ids": ["i1"], "version": "12:34", "sha256": "ab", "stale": [], "deleted": false}'
    client.set(keys.layout(), "2")
    client.hset(keys.manifest("notes"), "a.md", body)
    client.hset(keys.units("notes"), "a.md", b"0 12:34")
    store = RedisStateStore(client, target.prefix)
    assert client.get(keys.layout()) == b"3"
    assert client.hget(keys.manifest("notes"), "a.md") == body  # not rewritten
    assert store.unit_states("notes") == {"a.md": UnitState("12:34", False, False)}
