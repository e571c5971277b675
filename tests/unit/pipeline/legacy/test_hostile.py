"""A broken or hostile v1 workspace never stops, loops or escapes an import: damaged values are read as
nothing, rows no engine would take are skipped with a reason, and paging always ends."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from engines.contract import Conversation, Document
from engines.reference import ReferenceEngine
from pipeline.legacy import (
    MAX_CONTENT_FILE_BYTES,
    LegacyWorkspace,
    ReadStats,
    Skip,
    migrate,
)
from tests.fixtures.legacy_workspace import V1Workspace

# The required columns only, without types or constraints: a writer could put any value anywhere.
LOOSE_DDL = """
CREATE TABLE memory_docs (document_id, namespace, title, content, tags_json, metadata_json, updated_at);
CREATE TABLE episodic_log (id, session_id, timestamp, role, content);
CREATE TABLE user_profile (facet_id, facet_type, key, value, confidence, last_seen_at);
"""


def loose(tmp_path: Path) -> tuple[Path, sqlite3.Connection]:
    db = tmp_path / "ws" / "memory" / "memory.db"
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.executescript(LOOSE_DDL)
    return tmp_path / "ws", conn


def imported(root: Path, page_size: int = 2) -> tuple[list[str], ReadStats]:
    stats = ReadStats()
    with LegacyWorkspace.open(root) as ws:
        items = [i.item.meta.source.id or "" for i in ws.items(page_size, stats=stats)]
    return items, stats


def test_null_keys_are_not_rows_and_never_restart_the_scan(tmp_path: Path) -> None:
    root, conn = loose(tmp_path)
    rows = [(None, "notes", "", "nameless", "[]", "{}", 1.0), ("d1", "notes", "", "one", "[]", "{}", 1.0)]
    conn.executemany("INSERT INTO memory_docs VALUES (?, ?, ?, ?, ?, ?, ?)", rows * 2)
    conn.execute("INSERT INTO episodic_log VALUES (1, NULL, 1.0, 'user', 'lost')")
    conn.execute("INSERT INTO user_profile VALUES (NULL, 'pref', 'k', 'v', 0.5, 1.0)")
    conn.close()
    ids, _ = imported(root, page_size=1)
    # NULL keys are no rows; a key repeated (nothing here keeps keys unique) is read once: pages go past it.
    assert ids == ["memory_docs:d1"]


def test_values_of_any_type_in_any_column(tmp_path: Path) -> None:
    root, conn = loose(tmp_path)
    conn.execute(
        "INSERT INTO memory_docs VALUES (?, ?, ?, ?, ?, ?, ?)",
        ("d1", b"notes", 42, b"bytes \xff body", "[1, 2]", '"a string"', "yesterday"),
    )
    conn.execute("INSERT INTO memory_docs VALUES ('d2', 'notes', NULL, 12345, NULL, NULL, 1e308)")
    conn.execute("INSERT INTO episodic_log VALUES (1, 's1', 'noon', NULL, 'a turn')")
    conn.execute("INSERT INTO episodic_log VALUES (2, 's1', 1e300, 3, x'6869')")
    conn.execute("INSERT INTO user_profile VALUES ('f1', NULL, NULL, 'v', 'sure', NULL)")
    conn.close()
    with LegacyWorkspace.open(root) as ws:
        items = {i.item.meta.source.id: i.item for i in ws.items()}
    doc = items["memory_docs:d1"]
    assert isinstance(doc, Document)
    assert (doc.title, doc.body.text, doc.meta.observed_at, doc.meta.tags) == (
        "42",
        "bytes \ufffd body",
        None,
        ["ns:notes"],
    )
    assert items["memory_docs:d2"].render_text() == "12345"
    conversation = items["episodic_log:s1"]
    assert isinstance(conversation, Conversation)
    # Ordered as SQLite orders mixed values (numbers before text); neither is a usable time.
    assert [(t.text, t.at) for t in conversation.turns] == [("hi", None), ("a turn", None)]
    assert items["user_profile:f1"].render_text() == ": v"


def test_text_that_is_not_utf8_is_read_with_replacements(tmp_path: Path) -> None:
    ws = V1Workspace(tmp_path / "ws").create(chunks=False)
    ws.doc("d1", "notes", "placeholder")
    with sqlite3.connect(ws.memory_db) as conn:
        conn.execute("UPDATE memory_docs SET content = CAST(x'6f6b20ff20626164' AS TEXT)")
        conn.execute("UPDATE memory_docs SET namespace = CAST(x'6e6f746573ff' AS TEXT)")
    conn.close()
    with LegacyWorkspace.open(ws.root) as opened:
        [item] = [i.item for i in opened.items()]
        assert opened.counts().documents == 1
    assert item.render_text() == "ok \ufffd bad"
    assert item.meta.tags == ["ns:notes\ufffd"]


def damage(db: Path, table: str, column: str, renames: dict[str, bytes]) -> None:
    """Replace each named value of `column` by text of the given bytes (not UTF-8: v1 never wrote that)."""
    with sqlite3.connect(db) as conn:
        for old, new in renames.items():
            sql = f"UPDATE {table} SET {column} = CAST(x'{new.hex()}' AS TEXT) WHERE {column} = ?"
            conn.execute(sql, (old,))
    conn.close()


@pytest.mark.parametrize("page_size", [1, 2, 256])
def test_keys_that_are_not_utf8_page_exactly_and_find_their_groups(tmp_path: Path, page_size: int) -> None:
    ws = V1Workspace(tmp_path / "ws").create()
    for n in range(5):
        ws.doc(f"d{n}", "notes", f"row {n}")
        ws.turn(f"s{n}", float(n), "user", f"turn {n}")
        ws.turn(f"s{n}", float(n) + 0.5, "assistant", f"answer {n}")
        ws.chunk(f"c{n}", "document", f"src{n}", f"chunk {n}")
    renames = {"d1": b"a\xff", "d2": b"a\xfe", "d3": b"a\xc3", "d4": b"b"}
    damage(ws.memory_db, "memory_docs", "document_id", renames)
    damage(ws.memory_db, "episodic_log", "session_id", {"s1": b"s\xff", "s2": b"s\x80", "s3": b"s\xef\xbf"})
    damage(ws.chunks_db, "mem_tree_chunks", "source_id", {"src1": b"src\xff", "src2": b"src\x81"})
    with LegacyWorkspace.open(ws.root) as opened:
        items = [i.item for i in opened.items(page_size)]
    texts = sorted(item.render_text() for item in items)
    assert texts == sorted(
        [f"row {n}" for n in range(5)]
        + [f"user: turn {n}\nassistant: answer {n}" for n in range(5)]
        + [f"chunk {n}" for n in range(5)]
    )


def test_blob_keys_page_exactly(tmp_path: Path) -> None:
    root, conn = loose(tmp_path)
    for key in (b"\x01", "text", b"\x02", "more"):
        conn.execute("INSERT INTO memory_docs VALUES (?, 'notes', '', ?, '[]', '{}', 1.0)", (key, f"body {key!r}"))
    conn.close()
    ids, _ = imported(root, page_size=1)
    assert ids == ["memory_docs:more", "memory_docs:text", "memory_docs:\x01", "memory_docs:\x02"]


def test_text_no_engine_would_store_is_skipped_not_sent(tmp_path: Path) -> None:
    ws = V1Workspace(tmp_path / "ws").create()
    ws.doc("d1", "notes", "\u00a0\u2003")  # not blank to v1, blank to the contract
    ws.doc("d2", "global", "\u3000")
    ws.turn("s1", 1.0, "user", "\u00a0")
    ws.chunk("k1", "document", "a", "\u2028")
    ws.doc("d3", "notes", "fine")
    ids, stats = imported(ws.root)
    assert ids == ["memory_docs:d3"]
    assert stats.skipped["documents", Skip.UNSTORABLE] == 1
    assert stats.skipped["learnings", Skip.UNSTORABLE] == 1
    assert stats.skipped["conversations", Skip.UNSTORABLE] == 1
    assert stats.skipped["chunks", Skip.UNSTORABLE] == 1


async def test_lone_surrogates_in_json_are_repaired_and_stored(tmp_path: Path) -> None:
    ws = V1Workspace(tmp_path / "ws").create(chunks=False)
    ws.doc("d1", "notes", "body", tags_json='["\\ud800"]', metadata_json='{"url": "https://x.test/\\udfff"}')
    ws.doc("l1", "learning_style", '{"key": "k\\ud800", "value": {"\\udc00": 1}, "evidence": "\\ud801"}')
    ws.turn("s1", 1.0, "user", "hi", tool_calls_json='[{"name": "\\ud802"}]')
    engine = ReferenceEngine()
    with LegacyWorkspace.open(ws.root) as opened:
        items = [i.item for i in opened.items()]
        report = await migrate(engine, opened)
    assert report.stored == 3
    assert items[0].meta.tags == ["\ufffd", "ns:notes"] and items[0].meta.url == "https://x.test/\ufffd"
    assert items[2].render_text() == 'k\ufffd: {"\ufffd":1}'


@pytest.mark.parametrize(
    "content_path",
    [
        "/etc/hostname",
        "../secret.txt",
        "a/../../secret.txt",
        "a\\b.txt",
        " ",
        "",
        "link.txt",
        "dir",
        "fifo",
        "latin1.txt",
        "big.txt",
        "nul\x00.txt",
    ],
)
def test_a_content_path_that_escapes_or_cannot_be_read_falls_back_to_the_row(tmp_path: Path, content_path: str) -> None:
    ws = V1Workspace(tmp_path / "ws").create()
    (ws.root / "memory_tree" / "secret.txt").write_text("outside the content folder")
    (ws.content_dir / "link.txt").symlink_to(ws.root / "memory_tree" / "secret.txt")
    (ws.content_dir / "dir").mkdir()
    os.mkfifo(ws.content_dir / "fifo")
    ws.content_file("latin1.txt", "caf\xe9".encode("latin-1"))
    with (ws.content_dir / "big.txt").open("wb") as big:
        big.truncate(MAX_CONTENT_FILE_BYTES + 1)
    ws.chunk("k1", "document", "a", "the row's preview", content_path=content_path)
    with LegacyWorkspace.open(ws.root) as opened:
        [item] = [i.item for i in opened.items()]
    assert item.render_text() == "the row's preview"


def test_a_content_path_inside_the_folder_may_go_through_a_link_that_stays_inside(tmp_path: Path) -> None:
    ws = V1Workspace(tmp_path / "ws").create()
    ws.content_file("real/full.txt", "the full text")
    (ws.content_dir / "alias").symlink_to(ws.content_dir / "real")
    ws.chunk("k1", "document", "a", "preview", content_path="alias/full.txt")
    with LegacyWorkspace.open(ws.root) as opened:
        [item] = [i.item for i in opened.items()]
    assert item.render_text() == "the full text"
