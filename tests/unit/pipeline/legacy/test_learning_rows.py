"""The learnings' scan of `memory_docs` leaves out rows in SQL (`learning_rows_sql`): it must never leave out
a row the mapping would class as a learning or a global fact, whatever the namespace columns hold."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.legacy import LegacyWorkspace
from pipeline.legacy.mapping import NsClass, learning_rows_sql, logical_namespace_of, namespace_class
from tests.unit.pipeline.legacy.test_hostile import loose

LEARNING_CLASSES = (NsClass.LEARNING, NsClass.GLOBAL)

# Values a damaged or hostile writer could leave in either column: prefixes with and without their
# separator, case, blanks, NULs before and after the prefix, blobs (UTF-8 or not) and numbers.
ODD_VALUES: list[Any] = [
    None,
    "",
    "  \t",
    "global",
    "GLOBAL",
    " global",
    "global ",
    "globalx",
    "learning",
    "learning:style",
    "learning_style",
    "Learning_style",
    "learning\x00:style",
    "learning_\x00x",
    "learning:\x00",
    "\x00learning",
    "learningstyle",
    "event:x",
    "event_x",
    "document_notes",
    "notes",
    "élan",
    b"learning_style",
    b"global",
    b"\xfflearning",
    b"learning\xff",
    0,
    1.5,
]


def admitted_pairs(pairs: list[tuple[Any, Any]]) -> list[bool]:
    """Whether the condition admits a row with each pair of column values (bound as stored)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, namespace, logical_namespace)")
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)", [(n, *pair) for n, pair in enumerate(pairs)])
        where = learning_rows_sql("namespace", "logical_namespace")
        found = {n for (n,) in conn.execute(f"SELECT n FROM t WHERE {where}")}
    finally:
        conn.close()
    return [n in found for n in range(len(pairs))]


def is_learning(namespace: Any, logical: Any) -> bool:
    return namespace_class(logical_namespace_of(namespace, logical)) in LEARNING_CLASSES


def missed(pairs: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """The learning rows among `pairs` that the condition leaves out."""
    return [pair for pair, ok in zip(pairs, admitted_pairs(pairs), strict=True) if is_learning(*pair) and not ok]


def test_every_learning_row_is_admitted() -> None:
    pairs = [(namespace, logical) for namespace in ODD_VALUES for logical in ODD_VALUES]
    assert sum(is_learning(*pair) for pair in pairs) > 100  # the table reaches the learning classes often
    assert missed(pairs) == []


def test_plain_documents_are_left_out() -> None:
    pairs = [("document_notes", None), ("notes", "team:acme"), ("learning_style", None), ("notes", "global")]
    assert admitted_pairs(pairs) == [False, False, True, True]


_PIECES = st.sampled_from(["global", "learning", ":", "_", " ", "\x00", "x", "G", "event", "é"])
_TEXT = st.lists(_PIECES, max_size=5).map("".join)
_VALUE = st.one_of(
    st.none(), _TEXT, _TEXT.map(str.encode), st.binary(max_size=12), st.integers(-(2**63), 2**63 - 1), st.floats()
)


@settings(max_examples=300, deadline=None)
@given(_VALUE, _VALUE)
def test_generated_learning_rows_are_admitted(namespace: Any, logical: Any) -> None:
    assert missed([(namespace, logical)]) == []


def test_the_learnings_section_holds_every_learning_row(tmp_path: Path) -> None:
    root, conn = loose(tmp_path)
    conn.execute("ALTER TABLE memory_docs ADD COLUMN logical_namespace")
    rows = [
        (f"d{n:03}", namespace, "", f"row {n}", "[]", "{}", 1.0, logical)
        for n, (namespace, logical) in enumerate((ns, lg) for ns in ODD_VALUES for lg in ODD_VALUES[:8])
    ]
    conn.executemany("INSERT INTO memory_docs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.close()
    expected = [f"memory_docs:{row[0]}" for row in rows if is_learning(row[1], row[7])]
    with LegacyWorkspace.open(root) as ws:
        learnings = [i.item.meta.source.id for i in ws.items(page_size=3) if i.item.type == "learning"]
    assert expected  # the table holds learning rows of every shape, and the scan finds each of them
    assert learnings == expected
