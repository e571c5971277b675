"""Forward migrations of the local engine's file: files written by earlier releases open, migrated whole.

Old files are built here the way those releases wrote them (their tables, vectors inside `passages`,
an unstemmed keyword index), from the schema history the engine keeps (`create_schema(conn, version)`).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from engines.contract import ConfigError, Document, FetchMode, FetchRequest, ForgetTarget
from engines.local import HashingEmbedder, LocalEngine
from engines.local.rows import ITEM_COLUMNS, ITEM_MARKS, prepare
from engines.local.schema import FTS_AUTOMERGE, SCHEMA_VERSION, create_schema

TEXTS = ("Written by the first release of the engine.", "Deployment notes: the pipeline deploys at noon.")


def _old_file(path: Path, version: int, texts: tuple[str, ...] = TEXTS) -> list[str]:
    """A file as release `version` (1 or 2) left it, holding `texts` indexed with the hashing embedder."""
    embedder = HashingEmbedder()
    ids = []
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("BEGIN")
        create_schema(conn, version)
        rowid = 0
        for seq, text in enumerate(texts, start=1):
            doc = Document.from_text(text, title=f"Note {seq}")
            item_id, wire = doc.identified()
            prep = prepare("", item_id, doc, wire, 3000)
            conn.execute(f"INSERT INTO items (seq, {ITEM_COLUMNS}) VALUES (?, {ITEM_MARKS})", (seq, *prep.values))
            vectors = embedder.embed_sync([passage.text for passage in prep.passages])
            for passage, vector in zip(prep.passages, vectors, strict=True):
                rowid += 1
                conn.execute(
                    "INSERT INTO passages (rowid, item_seq, piece, start, stop, vector) VALUES (?, ?, ?, ?, ?, ?)",
                    (rowid, seq, passage.piece, passage.start, passage.stop, vector.tobytes()),
                )
                conn.execute("INSERT INTO passage_text (rowid, text) VALUES (?, ?)", (rowid, passage.text))
            ids.append(item_id)
        conn.execute("INSERT INTO settings (key, value) VALUES ('embedder', ?)", (embedder.identity,))
        conn.execute("COMMIT")
    return ids


def _versions(path: Path) -> list[int]:
    with closing(sqlite3.connect(path)) as conn:
        return [row[0] for row in conn.execute("SELECT version FROM schema_version ORDER BY version")]


def _query(path: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.parametrize("version", [1, 2])
async def test_an_old_file_is_migrated_forward_keeping_items_and_vectors(tmp_path: Path, version: int) -> None:
    path = tmp_path / "old.sqlite3"
    written, deployed = _old_file(path, version)
    # What the old release could not do: its index was not stemmed.
    assert _query(path, "SELECT rowid FROM passage_text WHERE passage_text MATCH 'releases'") == []
    engine = LocalEngine(path, embedder=HashingEmbedder())
    try:
        stemmed = await engine.fetch(FetchRequest(query="releases", mode=FetchMode.KEYWORD, limit=5))
        assert [hit.id for hit in stemmed.hits] == [written]
        assert stemmed.hits[0].text == "# Note 1\n\nWritten by the first release of the engine."
        # The vectors moved with their passages: nothing to re-embed, vector search answers at once.
        assert await engine.vector_backlog() == 0
        vector = await engine.fetch(FetchRequest(query="deploying pipelines", mode=FetchMode.VECTOR, limit=1))
        assert [hit.id for hit in vector.hits] == [deployed]
        # The rebuilt index unindexes what it holds: a forgotten item leaves no posting behind.
        assert (await engine.forget(ForgetTarget.by_ids([deployed]))).forgotten == 1
    finally:
        engine.close()
    assert _versions(path) == list(range(1, SCHEMA_VERSION + 1))
    assert _query(path, "SELECT rowid FROM passage_text WHERE passage_text MATCH 'noon'") == []
    assert _query(path, "SELECT v FROM passage_text_config WHERE k = 'automerge'") == [(FTS_AUTOMERGE,)]
    assert "porter" in str(_query(path, "SELECT sql FROM sqlite_master WHERE name = 'passage_text'"))
    columns = [row[1] for row in _query(path, "PRAGMA table_info(passages)")]
    assert "vector" not in columns
    assert _query(path, "SELECT count(*) FROM passage_vectors") == [(1,)]


async def test_an_old_file_opened_with_the_default_embedder_is_re_embedded(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    written, _ = _old_file(path, 2)
    engine = LocalEngine(path)
    try:
        assert await engine.wait_for_vectors(timeout_s=30)
        page = await engine.fetch(FetchRequest(query="the engine's first version", mode=FetchMode.VECTOR, limit=1))
        assert [hit.id for hit in page.hits] == [written]
    finally:
        engine.close()
    assert _query(path, "SELECT value FROM settings WHERE key = 'embedder'") == [("minilm:all-MiniLM-L6-v2-int8/384",)]


async def test_a_migration_that_fails_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "broken.sqlite3"
    _old_file(path, 2)
    with closing(sqlite3.connect(path)) as conn:
        conn.execute('UPDATE items SET body = \'{"not": "an item"}\' WHERE seq = 2')
        conn.commit()
    engine = LocalEngine(path)
    try:
        with pytest.raises(ConfigError, match="cannot migrate memory file"):
            await engine.fetch(FetchRequest(query="release", mode=FetchMode.KEYWORD, limit=1))
    finally:
        engine.close()
    assert _versions(path) == [1, 2]
    assert "vector" in [row[1] for row in _query(path, "PRAGMA table_info(passages)")]


def test_a_new_file_starts_at_the_current_version_with_a_stemmed_index(tmp_path: Path) -> None:
    engine = LocalEngine(tmp_path / "new.sqlite3", embedder=HashingEmbedder())
    engine._db.open_now()
    engine.close()
    assert _versions(tmp_path / "new.sqlite3") == list(range(1, SCHEMA_VERSION + 1))
    tokenizer = _query(tmp_path / "new.sqlite3", "SELECT sql FROM sqlite_master WHERE name = 'passage_text'")
    assert "porter unicode61 remove_diacritics 2" in str(tokenizer)
