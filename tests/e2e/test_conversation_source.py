"""A folder of chat threads synced through both runtimes: the embedded one and real Celery workers.

The folder holds every format the conversation source reads (a long JSON lines thread, a thread JSON file, a
ChatGPT export of two conversations, a Claude export) and two hostile files: one whose only role is unknown
(a dead letter naming it, the rest stored) and one with a single unknown-role message among known ones (kept,
without it). Each runtime syncs it, finds nothing to do when nothing changed, stores only the new window of a
grown thread and only the changed thread of an export, and forgets a deleted file's and a dropped thread's items.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engines.contract import Hit, ItemKind, ListRequest, MemoryEngine, MetaFilter
from engines.local import LocalEngine
from sources import REGISTRY, SourceRequest
from tests.integration.cluster import Cluster, cluster_fixture
from worker import control
from worker.embedded import EmbeddedRuntime
from worker.settings import Settings
from worker.state.base import StateStore

T0 = 1714564800
LONG_TURNS = 120  # three windows of at most 50 turns (pipeline.chunk's default)
UNKNOWN_ROLE = "odd.json: no message has a known role (found 'narrator')"
KNOWN = "user, human, assistant, agent, ai, bot, model, system, developer, tool, function"

ThreadKey = tuple[str, int, int]
"""An item as (thread id, first turn, last turn)."""


def _turn(n: int) -> dict[str, Any]:
    role = "user" if n % 2 == 0 else "assistant"
    return {"role": role, "content": f"turn {n} about the zeolite shipment", "at": T0 + n}


def _chatgpt(conversation_id: str, question: str, answer: str) -> dict[str, Any]:
    def node(node_id: str, parent: str | None, role: str | None, text: str, at: int) -> dict[str, Any]:
        message = None if role is None else {"author": {"role": role}, "content": {"parts": [text]}, "create_time": at}
        children = {"root": ["q"], "q": ["a-old", "a"]}.get(node_id, [])
        return {"id": node_id, "message": message, "parent": parent, "children": children}

    nodes = [
        node("root", None, None, "", T0),
        node("q", "root", "user", question, T0 + 1),
        node("a-old", "q", "assistant", "a regenerated-away answer", T0 + 2),
        node("a", "q", "assistant", answer, T0 + 3),
    ]
    mapping = {n["id"]: n for n in nodes}
    return {
        "id": conversation_id,
        "title": question,
        "create_time": T0,
        "update_time": T0 + 3,
        "mapping": mapping,
        "current_node": "a",
    }


def _claude() -> dict[str, Any]:
    return {
        "uuid": "claude-1",
        "name": "rain",
        "created_at": "2024-05-01T12:00:00Z",
        "updated_at": "2024-05-01T12:05:00Z",
        "chat_messages": [
            {
                "sender": "human",
                "content": [{"type": "text", "text": "rain in Oslo?"}],
                "created_at": "2024-05-01T12:01:00Z",
            },
            {
                "sender": "assistant",
                "created_at": "2024-05-01T12:02:00Z",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "web_search", "input": {"query": "Oslo"}},
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "showers"}]},
                    {"type": "text", "text": "showers are expected"},
                ],
            },
        ],
    }


class Threads:
    """The folder of threads, and the changes the tests make to it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "export").mkdir(parents=True)
        (root / "claude").mkdir()
        self.write_long(LONG_TURNS)
        self._json(
            "plan.json",
            {
                "title": "Plan",
                "messages": [
                    {"role": "user", "content": "when does the shipment leave?", "created_at": "2024-05-01T12:00:00Z"},
                    {"role": "assistant", "content": "on Friday", "created_at": "2024-05-01T12:00:05Z"},
                ],
            },
        )
        self._json("odd.json", {"messages": [{"role": "narrator", "content": "once upon a time"}]})
        self._json(
            "mixed.json",
            {
                "messages": [
                    {"role": "user", "content": "kept"},
                    {"role": "narrator", "content": "dropped"},
                    {"role": "model", "content": "also kept"},
                ]
            },
        )
        self.export = [_chatgpt("c-1", "what is a zeolite?", "a mineral"), _chatgpt("c-2", "pore size?", "0.4 nm")]
        self.write_export()
        self._json("claude/conversations.json", [_claude()])
        (root / "README.md").write_text("not a thread: not offered\n")

    def write_long(self, count: int) -> None:
        lines = "".join(json.dumps(_turn(n)) + "\n" for n in range(count))
        (self.root / "long.jsonl").write_text(lines)

    def write_export(self) -> None:
        self._json("export/conversations.json", self.export)

    def _json(self, rel: str, content: object) -> None:
        (self.root / rel).write_text(json.dumps(content, indent=1))


FIRST: set[ThreadKey] = {
    ("long", 0, 49),
    ("long", 50, 99),
    ("long", 100, 119),
    ("plan", 0, 1),
    ("mixed", 0, 1),
    ("c-1", 0, 1),
    ("c-2", 0, 1),
    ("claude-1", 0, 3),
}


def _change(threads: Threads) -> None:
    """Ten turns appended to the long thread; the second ChatGPT conversation answered differently."""
    threads.write_long(LONG_TURNS + 10)
    threads.export[1] = _chatgpt("c-2", "pore size?", "about 0.4 nm, give or take")
    threads.write_export()


def _delete(threads: Threads) -> None:
    """A thread file removed; a conversation dropped from the export."""
    (threads.root / "plan.json").unlink()
    del threads.export[0]
    threads.write_export()


CHANGED = (FIRST - {("long", 100, 119)}) | {("long", 100, 129)}
DELETED = CHANGED - {("plan", 0, 1), ("c-1", 0, 1)}


async def _threads(engine: MemoryEngine, source_id: str) -> dict[ThreadKey, Hit]:
    page = await engine.list(ListRequest(limit=500, filter=MetaFilter(source_id=source_id)))
    assert page.next_cursor is None
    found: dict[ThreadKey, Hit] = {}
    for hit in page.items:
        assert hit.kind is ItemKind.CONVERSATION and hit.meta.thread_id and hit.meta.turns
        found[(hit.meta.thread_id, hit.meta.turns.first, hit.meta.turns.last)] = hit
    return found


def _letters(state: StateStore, source_id: str) -> dict[str, str]:
    return {d.unit_id: d.message for d in state.dead_letters(source_id)}


def _check_first(stored: dict[ThreadKey, Hit]) -> None:
    assert set(stored) == FIRST
    assert stored[("long", 100, 119)].text.endswith("assistant: turn 119 about the zeolite shipment")
    assert stored[("mixed", 0, 1)].text == "user: kept\nassistant: also kept"
    assert "a regenerated-away answer" not in stored[("c-1", 0, 1)].text  # only the current branch
    assert "[tools: web_search (toolu_1)]" in stored[("claude-1", 0, 3)].text
    assert stored[("c-2", 0, 1)].meta.file_path is not None
    assert stored[("c-2", 0, 1)].meta.file_path.endswith("/export/conversations.json")


def _check_changed(before: dict[ThreadKey, Hit], after: dict[ThreadKey, Hit]) -> None:
    assert set(after) == CHANGED
    for key in (("long", 0, 49), ("long", 50, 99), ("c-1", 0, 1), ("plan", 0, 1), ("claude-1", 0, 3)):
        assert after[key].id == before[key].id, key  # the same item: replayed or untouched, never re-made
    assert after[("c-2", 0, 1)].id != before[("c-2", 0, 1)].id
    assert after[("long", 100, 129)].text.endswith("turn 129 about the zeolite shipment")


# -- the embedded runtime ------------------------------------------------------------------------------------


@pytest.mark.e2e
async def test_conversations_in_the_embedded_runtime(tmp_path: Path) -> None:
    threads = Threads(tmp_path / "chats")
    settings = Settings(data_dir=tmp_path / "data", convert_workers=1)
    with EmbeddedRuntime(settings) as runtime:
        entry = control.add_source(runtime.state, SourceRequest(kind="conversation", target=str(threads.root)))
        first, batches = await runtime.sync(entry.id)
        assert (first.listed, first.upserts, first.skipped) == (7, 7, 0)
        assert (sum(b.stored for b in batches), sum(b.failed for b in batches)) == (len(FIRST), 1)
        stored = await _threads(runtime.engine, entry.id)
        _check_first(stored)
        assert _letters(runtime.state, entry.id) == {"odd.json": UNKNOWN_ROLE + "; known roles are " + KNOWN}

        again, batches = await runtime.sync(entry.id)  # nothing changed: nothing read, nothing stored
        assert (again.upserts, again.deletes, again.held_back, batches) == (0, 0, 1, [])

        _change(threads)
        changed, batches = await runtime.sync(entry.id)
        assert (changed.upserts, changed.deletes) == (2, 0)  # the long thread, and c-2 alone of its export
        # The long thread's two full windows are replays; only its last window and c-2 are new.
        assert [(b.stored, b.replayed, b.forgotten) for b in batches] == [(2, 2, 2)]
        after = await _threads(runtime.engine, entry.id)
        _check_changed(stored, after)

        _delete(threads)
        deleted, batches = await runtime.sync(entry.id)
        assert (deleted.upserts, deleted.deletes) == (0, 2)
        assert sum(b.forgotten for b in batches) == 2
        assert set(await _threads(runtime.engine, entry.id)) == DELETED
        assert set(_letters(runtime.state, entry.id)) == {"odd.json"}


# -- real Celery workers -------------------------------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


def _stored(cluster: Cluster, source_id: str) -> dict[ThreadKey, Hit]:
    async def read() -> dict[ThreadKey, Hit]:
        engine = LocalEngine(cluster.data_dir / "memory.sqlite3")
        try:
            return await _threads(engine, source_id)
        finally:
            engine.close()

    return asyncio.run(read())


def _batches(cluster: Cluster) -> list[dict[str, Any]]:
    """The batch reports the worker logged (`batch done: {report}` in its JSON log lines), in order."""
    lines = (cluster.root / "worker-0.log").read_text(errors="replace").splitlines()
    messages = [json.loads(line)["message"] for line in lines if line.startswith("{")]
    return [json.loads(m.removeprefix("batch done: ")) for m in messages if m.startswith("batch done: ")]


def _settled(cluster: Cluster, source_id: str, units: int, expected: set[ThreadKey]) -> bool:
    state = cluster.state()
    if len(state.unit_states(source_id)) != units or set(_letters(state, source_id)) != {"odd.json"}:
        return False
    return cluster.idle() and set(_stored(cluster, source_id)) == expected


@pytest.mark.e2e
@pytest.mark.integration
@pytest.mark.slow
def test_conversations_in_celery_workers(cluster: Cluster, tmp_path: Path) -> None:
    threads = Threads(tmp_path / "chats")
    request = SourceRequest(kind="conversation", target=str(threads.root), id="chats")
    cluster.state().put_source(REGISTRY.configure(request))
    cluster.start_worker()
    assert cluster.sync("chats")
    # Seven units: the dead-lettered odd.json has none committed.
    cluster.wait(lambda: _settled(cluster, "chats", 6, FIRST), 90, "the first sync")
    stored = _stored(cluster, "chats")
    _check_first(stored)
    assert _letters(cluster.state(), "chats")["odd.json"].startswith(UNKNOWN_ROLE)

    done = len(_batches(cluster))

    _change(threads)
    assert cluster.sync("chats")
    cluster.wait(lambda: _settled(cluster, "chats", 6, CHANGED), 60, "the grown thread and the changed export")
    _check_changed(stored, _stored(cluster, "chats"))
    changed = _batches(cluster)[done:]
    totals = [sum(int(b[count]) for b in changed) for count in ("units", "stored", "replayed", "forgotten")]
    assert totals == [2, 2, 2, 2]  # the long thread's two full windows replayed; its last window and c-2 new

    _delete(threads)
    assert cluster.sync("chats")
    cluster.wait(lambda: _settled(cluster, "chats", 4, DELETED), 60, "the deletions")
