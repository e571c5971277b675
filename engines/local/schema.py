"""The local engine's SQLite schema, its version table and forward migrations.

One file holds every tenant's items. `items` keeps each item whole (its wire JSON) beside one
column per filterable metadata field, so filters, reach and facets run in SQL. `passages` cuts
each item into searchable pieces; `passage_text` is their FTS5 index (BM25, Porter-stemmed,
contentless), `passage_vectors` their float32 embeddings and `pending_vectors` the passages still
waiting for one. The tables as a new file has them are `_V1` followed by every migration.
"""

from __future__ import annotations

import sqlite3

from engines.contract import ConfigError
from engines.local.migrations import FTS_AUTOMERGE, FTS_TOKENIZER, MIGRATIONS, statements

__all__ = ["FTS_AUTOMERGE", "FTS_TOKENIZER", "SCHEMA_VERSION", "create_schema", "ensure_schema"]

SCHEMA_VERSION = 4

_V1 = """
CREATE TABLE items (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,  -- store order; never reused
    tenant       TEXT NOT NULL,
    id           TEXT NOT NULL,
    kind         TEXT NOT NULL,
    ns           TEXT NOT NULL,              -- namespace key: '' for the root, '/kind:id/...' below
    workspace    TEXT,
    folder       TEXT,
    file_path    TEXT,
    language     TEXT,
    repo         TEXT,
    revision     TEXT,                       -- meta.commit (a reserved word in SQL)
    url          TEXT,
    thread_id    TEXT,
    turns_first  INTEGER,
    turns_last   INTEGER,
    agent_id     TEXT,
    tool_call    TEXT,                       -- meta.tool_call.name
    source_kind  TEXT NOT NULL,
    source_id    TEXT,
    observed_at  INTEGER,                    -- microseconds since the epoch
    confidence   REAL,
    title        TEXT,
    body         TEXT NOT NULL,              -- the item's wire JSON, exactly as stored
    UNIQUE (tenant, id)
);
CREATE INDEX items_ns ON items (tenant, ns);
CREATE INDEX items_workspace ON items (tenant, workspace);
CREATE INDEX items_folder ON items (tenant, folder);
CREATE INDEX items_file_path ON items (tenant, file_path);
CREATE INDEX items_source ON items (tenant, source_id);
CREATE INDEX items_thread ON items (tenant, thread_id);
CREATE INDEX items_observed ON items (tenant, observed_at);

CREATE TABLE item_tags (
    item_seq INTEGER NOT NULL REFERENCES items (seq) ON DELETE CASCADE,
    tag      TEXT NOT NULL
);
CREATE INDEX item_tags_tag ON item_tags (tag, item_seq);
CREATE INDEX item_tags_item ON item_tags (item_seq);

CREATE TABLE passages (
    rowid       INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: vector copies load rows above a mark
    item_seq    INTEGER NOT NULL REFERENCES items (seq) ON DELETE CASCADE,
    piece       INTEGER NOT NULL,            -- the passage's index within its item
    start       INTEGER NOT NULL,            -- the passage's span in its item's source text
    stop        INTEGER NOT NULL,            --   (rows.passage_source), heading excluded
    page_first  INTEGER,
    page_last   INTEGER,
    section     TEXT,
    vector      BLOB NOT NULL
);
CREATE INDEX passages_item ON passages (item_seq);

-- Contentless: the text is rebuilt from the item when shown or unindexed, never stored twice.
CREATE VIRTUAL TABLE passage_text USING fts5 (text, content = '', tokenize = 'unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE passage_vocab USING fts5vocab (passage_text, 'row');

CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def create_schema(conn: sqlite3.Connection, version: int = SCHEMA_VERSION) -> None:
    """The tables of a new file as release `version` created them (tests build old files with it)."""
    for statement in statements(_V1):
        conn.execute(statement)
    conn.execute("INSERT INTO schema_version (version) VALUES (1)")
    _migrate(conn, 1, version)


def ensure_schema(conn: sqlite3.Connection, path: str) -> None:
    """Create the schema in a new file, migrate an older one forward, refuse a newer one."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        found = row[0] if row else None
        if found is None:
            create_schema(conn)
        elif found > SCHEMA_VERSION:
            raise ConfigError(
                f"memory file {path} was written by a newer tinymemory (schema {found}, this build reads "
                f"up to {SCHEMA_VERSION}); upgrade tinymemory or point the data directory elsewhere"
            )
        else:
            _migrate(conn, found, SCHEMA_VERSION)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _migrate(conn: sqlite3.Connection, found: int, target: int) -> None:
    for version in range(found, target):
        MIGRATIONS[version](conn)
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version + 1,))
