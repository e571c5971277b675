-- The manifest: one row per unit of a source, committed after the engine acknowledged its items.
CREATE TABLE manifest (
    source_id TEXT NOT NULL,
    unit_id   TEXT NOT NULL,
    size      INTEGER NOT NULL,
    mtime_ns  INTEGER NOT NULL,
    sha256    TEXT,
    item_ids  TEXT NOT NULL,
    PRIMARY KEY (source_id, unit_id)
);
