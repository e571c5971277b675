"""Each section of a v1 workspace is read in one pass over its table, whatever the page size: one statement
a section (v1 has no index on the group keys, so each further one would scan and sort the whole table), a
group only once whole, and a value that is not UTF-8 met in the middle of a group reads the group again,
leniently, from its start."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engines.contract import Conversation, Document
from pipeline.legacy import LegacyWorkspace
from pipeline.legacy.schema import open_workspace
from tests.fixtures.legacy_workspace import V1Workspace, generated_workspace


def traced(root: Path) -> tuple[LegacyWorkspace, list[str]]:
    """The workspace, opened, and the list its connections add each statement they run to."""
    opened = open_workspace(root)
    statements: list[str] = []
    for store in (opened.main, opened.chunks):
        assert store is not None
        store.conn.set_trace_callback(statements.append)
    return LegacyWorkspace(opened), statements


@pytest.mark.parametrize("page_size", [1, 7, 256])
def test_each_section_is_one_statement_whatever_the_page_size(tmp_path: Path, page_size: int) -> None:
    ws = generated_workspace(tmp_path / "ws", 300)
    workspace, statements = traced(ws.root)
    with workspace:
        items = list(workspace.items(page_size))
    assert len(items) > 150
    tables = [
        next(t for t in ("memory_docs", "mem_tree_chunks", "episodic_log", "user_profile") if t in s)
        for s in statements
    ]
    assert tables == ["memory_docs", "mem_tree_chunks", "episodic_log", "memory_docs", "user_profile"]


def test_a_resumed_section_is_one_statement_too(tmp_path: Path) -> None:
    ws = generated_workspace(tmp_path / "ws", 300)
    with LegacyWorkspace.open(ws.root) as opened:
        everything = list(opened.items())
    middle = next(i for i in everything if i.keys[2] is not None and i.keys[3] is None)  # in the conversations
    workspace, statements = traced(ws.root)
    with workspace:
        rest = [i.item.identified() for i in workspace.items_from(middle.checkpoint, page_size=2)]
    assert rest == [i.item.identified() for i in everything[everything.index(middle) + 1 :]]
    assert len(statements) == 5  # each section from its key (those before the conversations find nothing)


def damage_row(db: Path, table: str, column: str, where: str, raw: bytes) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE {table} SET {column} = CAST(x'{raw.hex()}' AS TEXT) WHERE {where}")
    conn.close()


@pytest.mark.parametrize("page_size", [1, 2, 256])
def test_text_that_is_not_utf8_in_the_middle_of_a_group_reads_the_group_again(tmp_path: Path, page_size: int) -> None:
    ws = V1Workspace(tmp_path / "ws").create()
    for n in range(3):
        for seq in range(3):
            ws.chunk(f"c{n}{seq}", "document", f"src{n}", f"chunk {n}.{seq}", seq=seq)
            ws.turn(f"s{n}", n + seq / 10, "user", f"turn {n}.{seq}")
    damage_row(ws.chunks_db, "mem_tree_chunks", "content", "id = 'c11'", b"bad \xff chunk")
    damage_row(ws.memory_db, "episodic_log", "content", "content = 'turn 1.2'", b"bad \xfe turn")
    with LegacyWorkspace.open(ws.root) as opened:
        items = [i.item for i in opened.items(page_size)]
    documents = [item.render_text() for item in items if isinstance(item, Document)]
    conversations = [item.render_text() for item in items if isinstance(item, Conversation)]
    assert documents == [
        "chunk 0.0\n\nchunk 0.1\n\nchunk 0.2",
        "chunk 1.0\n\nbad \ufffd chunk\n\nchunk 1.2",
        "chunk 2.0\n\nchunk 2.1\n\nchunk 2.2",
    ]
    assert conversations == [
        "user: turn 0.0\nuser: turn 0.1\nuser: turn 0.2",
        "user: turn 1.0\nuser: turn 1.1\nuser: bad \ufffd turn",
        "user: turn 2.0\nuser: turn 2.1\nuser: turn 2.2",
    ]


def test_a_reader_closed_in_the_middle_of_a_section_lets_the_workspace_close(tmp_path: Path) -> None:
    ws = generated_workspace(tmp_path / "ws", 100)
    opened = LegacyWorkspace.open(ws.root)
    items = opened.items(page_size=3)
    next(items)
    items.close()
    assert len(list(opened.items())) > 50  # the connection is free for a new pass
    opened.close()
