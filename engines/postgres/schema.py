"""The PostgreSQL engine's schema: its tables and indexes, their version, and forward migrations.

`items` keeps each item whole (its wire JSON) beside one column per filterable metadata field, as the local
engine's SQLite file does (the same column names, so the local engine's filter SQL serves both). `passages` cuts
items into searchable pieces: `words` is a passage's tsvector (the local engine's words, Porter-stemmed) under a
GIN index, `tokens` its length for BM25. `passage_vectors` holds one embedding per passage under an HNSW index
(cosine), created with the first embedder's dimensions; `pending_vectors` queues the passages still waiting for
theirs. `common_terms`, `term_changes` and `champions` keep, for each word held by many passages, its count and
the passages where it weighs most (`engines.postgres.champions`). Text columns sort bytewise (`COLLATE "C"`):
namespace subtrees and path prefixes are key ranges.

A database is settled once per process under an advisory lock: the schema created, migrated forward one version
at a time, or refused when a newer release wrote it; then the embedder checked against the one the vectors came
from. Steps are append only: databases in the field went through each as it was shipped.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import errors

from engines.contract import ConfigError

SCHEMA_VERSION = 3
TEXT_CONFIG = "tinymemory"
"""The text search configuration passages and queries are parsed with: words Porter-stemmed, none dropped."""
EMBEDDER_KEY = "embedder"
DIMENSIONS_KEY = "dimensions"
_LOCK = 0x746D_7067  # pg_advisory_xact_lock key ("tmpg"): one process settles a database at a time

TEXT_SEARCH = """
CREATE TEXT SEARCH DICTIONARY tinymemory_porter (TEMPLATE = snowball, LANGUAGE = porter);
CREATE TEXT SEARCH CONFIGURATION tinymemory (COPY = simple);
ALTER TEXT SEARCH CONFIGURATION tinymemory ALTER MAPPING FOR
    asciiword, word, numword, asciihword, hword, numhword, hword_asciipart, hword_part, hword_numpart
    WITH tinymemory_porter
"""
"""The text configuration `TEXT_CONFIG`: Porter stems (FTS5's `porter` tokenizer's algorithm), no stop words."""

_V1 = (
    TEXT_SEARCH
    + """;
CREATE SEQUENCE deletions;
CREATE TABLE items (
    seq          bigserial PRIMARY KEY,
    tenant       text COLLATE "C" NOT NULL,
    id           text COLLATE "C" NOT NULL,
    kind         text COLLATE "C" NOT NULL,
    ns           text COLLATE "C" NOT NULL,
    workspace    text COLLATE "C",
    folder       text COLLATE "C",
    file_path    text COLLATE "C",
    language     text COLLATE "C",
    repo         text COLLATE "C",
    revision     text COLLATE "C",
    url          text COLLATE "C",
    thread_id    text COLLATE "C",
    turns_first  bigint,
    turns_last   bigint,
    agent_id     text COLLATE "C",
    tool_call    text COLLATE "C",
    source_kind  text COLLATE "C" NOT NULL,
    source_id    text COLLATE "C",
    observed_at  bigint,
    confidence   double precision,
    title        text,
    body         text NOT NULL,
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
    item_seq  bigint NOT NULL REFERENCES items (seq) ON DELETE CASCADE,
    tag       text COLLATE "C" NOT NULL
);
CREATE INDEX item_tags_tag ON item_tags (tag, item_seq);
CREATE INDEX item_tags_item ON item_tags (item_seq);
CREATE TABLE passages (
    id          bigserial PRIMARY KEY,
    item_seq    bigint NOT NULL REFERENCES items (seq) ON DELETE CASCADE,
    piece       integer NOT NULL,
    start       integer NOT NULL,
    stop        integer NOT NULL,
    page_first  integer,
    page_last   integer,
    section     text,
    tokens      integer NOT NULL,
    words       tsvector NOT NULL
);
-- Kept in the row (compressed when that helps), not in TOAST: ranking reads a matching passage's tsvector once per
-- query word, and fetching it from TOAST each time was most of a keyword read.
ALTER TABLE passages ALTER COLUMN words SET STORAGE MAIN;
CREATE INDEX passages_item ON passages (item_seq);
CREATE INDEX passages_words ON passages USING gin (words);
CREATE TABLE pending_vectors (
    passage  bigint PRIMARY KEY REFERENCES passages (id) ON DELETE CASCADE
);
CREATE TABLE settings (key text PRIMARY KEY, value text NOT NULL)
"""
)

_V2 = """
CREATE INDEX items_listing ON items (tenant, seq)
"""

_V3 = """
CREATE TABLE common_terms (
    term        text COLLATE "C" PRIMARY KEY,
    passages    bigint NOT NULL,
    counted_of  bigint NOT NULL,
    average     double precision NOT NULL,
    threshold   double precision NOT NULL
);
CREATE TABLE champions (
    term     text COLLATE "C" NOT NULL,
    passage  bigint NOT NULL,
    impact   double precision NOT NULL,
    PRIMARY KEY (term, passage)
);
CREATE INDEX champions_impact ON champions (term, impact DESC);
CREATE INDEX champions_passage ON champions (passage);
CREATE TABLE term_changes (
    term    text COLLATE "C" NOT NULL,
    change  bigint NOT NULL
);
CREATE INDEX term_changes_term ON term_changes (term)
"""


def _run(script: str) -> Callable[[psycopg.Connection], None]:
    def step(conn: psycopg.Connection) -> None:
        for statement in script.split(";\n"):
            if statement.strip():
                conn.execute(statement.encode())

    return step


MIGRATIONS: dict[int, Callable[[psycopg.Connection], None]] = {
    1: _run(_V2),
    2: _run(_V3),
}
"""Each entry moves a database from version n to n + 1."""


def vectors_table(dimensions: int) -> str:
    """The vectors' table and its HNSW index, for an embedder of `dimensions`."""
    return (
        "CREATE TABLE passage_vectors (passage bigint PRIMARY KEY REFERENCES passages (id) ON DELETE CASCADE, "
        f"embedding vector({int(dimensions)}) NOT NULL, stored_at timestamptz NOT NULL DEFAULT clock_timestamp());\n"
        "CREATE INDEX passage_vectors_hnsw ON passage_vectors USING hnsw (embedding vector_cosine_ops);\n"
        # Rows arrive in time order, so a BRIN index answers "stored in the last minute" for the backlog's rate.
        "CREATE INDEX passage_vectors_stored ON passage_vectors USING brin (stored_at)"
    )


def create_schema(conn: psycopg.Connection, version: int = SCHEMA_VERSION) -> None:
    """The tables of a new database as release `version` created them (tests build old databases with it)."""
    _run(_V1)(conn)
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
    conn.execute("INSERT INTO schema_version (version) VALUES (1)")
    _migrate(conn, 1, version)


def ensure_schema(conn: psycopg.Connection, where: str, identity: str, dimensions: int) -> None:
    """Settle the database for an engine whose embedder is `identity` of `dimensions`, in one transaction:
    pgvector present, schema created or migrated forward (a newer one refused), embedder the vectors' own."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        _ensure_pgvector(conn, where)
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        found = row[0] if row else None
        if found is None:
            create_schema(conn)
        elif found > SCHEMA_VERSION:
            raise ConfigError(
                f"the postgresql database at {where} was written by a newer tinymemory (schema {found}, this "
                f"build reads up to {SCHEMA_VERSION}); upgrade tinymemory or point engines.postgres.endpoint "
                "at another database"
            )
        else:
            _migrate(conn, found, SCHEMA_VERSION)
        _settle_embedder(conn, where, identity, dimensions)


def _migrate(conn: psycopg.Connection, found: int, target: int) -> None:
    for version in range(found, target):
        MIGRATIONS[version](conn)
        conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version + 1,))


def _ensure_pgvector(conn: psycopg.Connection, where: str) -> None:
    available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    if available is None:
        raise ConfigError(
            f"the postgresql server at {where} lacks the pgvector extension, which the postgres engine needs; "
            "install it on the server (the pgvector/pgvector Docker image has it, or apt install "
            "postgresql-16-pgvector, or build it from https://github.com/pgvector/pgvector), then start again"
        )
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except errors.InsufficientPrivilege as err:
        raise ConfigError(
            f"the postgresql database at {where} has no pgvector extension and this user may not create it; "
            'ask its owner to run "CREATE EXTENSION vector" in that database'
        ) from err


def recorded(conn: psycopg.Connection) -> tuple[str | None, int | None]:
    """The embedder the database's vectors came from, and their dimensions (None, None before any)."""
    rows: dict[str, str] = {
        key: value
        for key, value in conn.execute(
            "SELECT key, value FROM settings WHERE key IN (%s, %s)", (EMBEDDER_KEY, DIMENSIONS_KEY)
        )
    }
    dims = rows.get(DIMENSIONS_KEY)
    return rows.get(EMBEDDER_KEY), int(dims) if dims is not None else None


def _settle_embedder(conn: psycopg.Connection, where: str, identity: str, dimensions: int) -> None:
    found, found_dims = recorded(conn)
    if found is None:
        _run(vectors_table(dimensions))(conn)
        conn.execute(
            "INSERT INTO settings (key, value) VALUES (%s, %s), (%s, %s)",
            (EMBEDDER_KEY, identity, DIMENSIONS_KEY, str(dimensions)),
        )
        return
    if found_dims != dimensions:
        raise ConfigError(
            f"the postgresql database at {where} holds vectors of {found_dims} dimensions (embedder {found}); "
            f"this engine's embedder {identity} has {dimensions}: configure the same embedder "
            "(engines.postgres.embedder) or use another database, never both in one"
        )
    if found != identity:
        raise ConfigError(
            f"the postgresql database at {where} holds vectors of embedder {found}, not {identity}: configure "
            "the same embedder in every process (engines.postgres.embedder) or use another database"
        )


__all__ = [
    "SCHEMA_VERSION",
    "TEXT_CONFIG",
    "TEXT_SEARCH",
    "create_schema",
    "ensure_schema",
    "recorded",
    "vectors_table",
]
