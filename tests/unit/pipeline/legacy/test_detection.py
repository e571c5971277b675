"""Opening and detection (docs/spec/legacy-import.md §4): each refusal's message, a chunks-only workspace, the
optional chunk store, and what `counts()` reports."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pipeline.legacy import (
    LegacyCounts,
    LegacyImportError,
    LegacyIoError,
    LegacyNotFound,
    LegacyWorkspace,
    NotLegacy,
)
from tests.fixtures.legacy_workspace import CHUNKS_DDL, MEMORY_DDL_NEW, V1Workspace, sample_workspace


def refusal(path: Path) -> str:
    with pytest.raises(NotLegacy) as caught:
        LegacyWorkspace.open(path)
    assert isinstance(caught.value, LegacyImportError)
    return str(caught.value)


def main_db(tmp_path: Path, ddl: str) -> Path:
    db = tmp_path / "ws" / "memory" / "memory.db"
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:
        conn.executescript(ddl)
    conn.close()
    return tmp_path / "ws"


def test_a_missing_path_or_a_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(LegacyNotFound):
        LegacyWorkspace.open(tmp_path / "nowhere")
    (tmp_path / "file").write_text("x")
    with pytest.raises(LegacyNotFound):
        LegacyWorkspace.open(tmp_path / "file")


def test_an_empty_folder_has_no_memory_db(tmp_path: Path) -> None:
    assert refusal(tmp_path) == "not a v1 workspace: memory/memory.db is missing"


def test_a_memory_db_that_is_not_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "memory" / "memory.db"
    db.parent.mkdir()
    db.write_bytes(b"this is a text file, not a database" * 100)
    assert refusal(tmp_path) == "not a v1 workspace: memory/memory.db is not a SQLite database"


@pytest.mark.parametrize(
    ("drop", "message"),
    [
        ("DROP TABLE memory_docs", "table memory_docs is missing"),
        ("ALTER TABLE memory_docs DROP COLUMN updated_at", "column memory_docs.updated_at is missing"),
        ("DROP TABLE episodic_log", "table episodic_log is missing"),
        ("ALTER TABLE episodic_log DROP COLUMN role", "column episodic_log.role is missing"),
        ("DROP TABLE user_profile", "table user_profile is missing"),
        ("ALTER TABLE user_profile DROP COLUMN last_seen_at", "column user_profile.last_seen_at is missing"),
        # Checked in the table's order: memory_docs' columns before episodic_log is looked for.
        ("ALTER TABLE memory_docs DROP COLUMN title; DROP TABLE episodic_log", "column memory_docs.title is missing"),
    ],
)
def test_each_required_table_and_column(tmp_path: Path, drop: str, message: str) -> None:
    root = main_db(tmp_path, MEMORY_DDL_NEW + drop + ";")
    assert refusal(root) == f"not a v1 workspace: {message}"


def test_a_memory_db_that_cannot_be_read_is_an_io_error(tmp_path: Path) -> None:
    # A folder where the file should be: the OS's reason is given, not SQLite's "unable to open".
    (tmp_path / "memory" / "memory.db").mkdir(parents=True)
    with pytest.raises(LegacyIoError, match=r"memory/memory\.db cannot be read: Is a directory"):
        LegacyWorkspace.open(tmp_path)


def test_a_chunks_only_workspace_has_the_chunks_section_only(tmp_path: Path) -> None:
    ws = V1Workspace(tmp_path / "ws").create(main=False)
    ws.chunk("k1", "document", "notes:a", "a note")
    ws.chunk("k2", "chat", "c", "hi")
    with LegacyWorkspace.open(ws.root) as opened:
        ids = [imported.item.meta.source.id for imported in opened.items()]
        assert opened.counts() == LegacyCounts(chunks=2)
    assert ids == ["mem_tree_chunks:chat:c", "mem_tree_chunks:document:notes:a"]


def test_an_unusable_chunk_store_alone_is_no_workspace(tmp_path: Path) -> None:
    (tmp_path / "memory_tree").mkdir()
    (tmp_path / "memory_tree" / "chunks.db").write_bytes(b"garbage" * 1000)
    assert refusal(tmp_path) == "not a v1 workspace: memory/memory.db is missing"
    with sqlite3.connect(tmp_path / "memory_tree" / "other.db") as conn:
        conn.executescript(CHUNKS_DDL.replace("seq_in_source INTEGER NOT NULL,", ""))
    conn.close()
    (tmp_path / "memory_tree" / "other.db").replace(tmp_path / "memory_tree" / "chunks.db")
    assert refusal(tmp_path) == "not a v1 workspace: memory/memory.db is missing"


@pytest.mark.parametrize("damage", ["garbage", "no table", "no column"])
def test_an_unusable_chunk_store_beside_a_main_store_is_skipped_silently(tmp_path: Path, damage: str) -> None:
    ws = V1Workspace(tmp_path / "ws").create(chunks=False)
    ws.doc("d1", "notes", "a note")
    ws.chunks_db.parent.mkdir()
    if damage == "garbage":
        ws.chunks_db.write_bytes(b"\x00garbage" * 1000)
    else:
        ddl = "CREATE TABLE other (x);" if damage == "no table" else CHUNKS_DDL.replace("tags_json TEXT", "tags TEXT")
        with sqlite3.connect(ws.chunks_db) as conn:
            conn.executescript(ddl)
        conn.close()
    with LegacyWorkspace.open(ws.root) as opened:
        assert [i.item.meta.source.id for i in opened.items()] == ["memory_docs:d1"]
        assert opened.counts() == LegacyCounts(documents=1)


def test_without_the_content_path_column_rows_keep_their_own_text(tmp_path: Path) -> None:
    ws = V1Workspace(tmp_path / "ws").create(content_path=False)
    ws.chunk("k1", "document", "a", "the row's text")
    ws.content_file("k1", "a file nobody names")
    with LegacyWorkspace.open(ws.root) as opened:
        [imported] = list(opened.items())
    assert imported.item.render_text() == "the row's text"


def test_the_path_is_canonical(tmp_path: Path) -> None:
    ws = sample_workspace(tmp_path / "real")
    (tmp_path / "link").symlink_to(ws.root)
    with LegacyWorkspace.open(tmp_path / "link") as opened:
        assert opened.path == ws.root.resolve()
        assert all(i.item.meta.workspace == str(ws.root.resolve()) for i in opened.items())


def test_counts_by_aggregate_queries(tmp_path: Path) -> None:
    with LegacyWorkspace.open(sample_workspace(tmp_path / "ws").root) as opened:
        counts = opened.counts()
    # Blank rows count (they are not excluded); event rows and dropped or forgotten facets do not.
    assert counts == LegacyCounts(documents=5, chunks=4, conversations=2, learnings=8, profile=3)
    assert counts.total == 22


def test_a_page_size_below_one_is_refused(tmp_path: Path) -> None:
    with LegacyWorkspace.open(sample_workspace(tmp_path / "ws").root) as opened, pytest.raises(ValueError):
        opened.items(page_size=0)
