"""Listing reads on CortexDB: paging through doubled, newest-first listings; cursors; items in several events."""

from __future__ import annotations

import pytest

from engines.contract import (
    Conversation,
    Document,
    GetRequest,
    InvalidRequestError,
    ItemKind,
    ListRequest,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Reach,
    Role,
    Turn,
)
from engines.cortex.reads import ListCursor
from tests.fixtures.cortex_double import Served


def notes(count: int, namespace: Namespace = Namespace.ROOT) -> list[Document]:
    return [Document.from_text(f"note {n}", meta=MemoryMeta(namespace=namespace, workspace="ws")) for n in range(count)]


async def walk(server: Served, filter: MetaFilter, limit: int) -> tuple[list[str], int]:
    async with server.engine() as engine:
        ids, cursor, pages, seen = [], None, 0, set()
        while True:
            page = await engine.list(ListRequest(filter=filter, limit=limit, cursor=cursor))
            ids += [hit.id for hit in page.items]
            pages += 1
            if page.next_cursor is None:
                return ids, pages
            assert page.next_cursor not in seen
            seen.add(page.next_cursor)
            cursor = page.next_cursor


async def test_paging_through_server_pages_and_scopes_lists_every_item_once(either: Served) -> None:
    agent = Namespace.parse("agent:a")
    items = [*notes(130), *notes(5, agent)]
    async with either.engine() as engine:
        for start in range(0, len(items), 100):
            await engine.store_many(items[start : start + 100])
    wanted = {item.fingerprint() for item in items}
    for limit in (7, 100, 500):
        ids, _ = await walk(either, MetaFilter(workspace="ws"), limit)
        assert sorted(ids) == sorted(wanted) and len(ids) == len(wanted), limit
    root_only, _ = await walk(either, MetaFilter(reach=Reach.exact(Namespace.ROOT)), 50)
    assert len(root_only) == 130
    # 130 root documents are 260 raw entries: more than one server page of 200.
    assert any(r.query.get("cursor") for r in either.double.requests if r.path.endswith("events"))


async def test_a_conversation_is_listed_once_and_whole(either: Served) -> None:
    talk = Conversation(
        turns=[
            Turn(role=Role.USER, text="first"),
            Turn(role=Role.ASSISTANT, text="second"),
            Turn(role=Role.USER, text="third"),
        ],
        meta=MemoryMeta(thread_id="t-1"),
    )
    async with either.engine() as engine:
        await engine.store(talk)
        for limit in (1, 10):
            page = await engine.list(ListRequest(filter=MetaFilter(kinds=[ItemKind.CONVERSATION]), limit=limit))
            assert [h.text for h in page.items] == [talk.render_text()]
        [hit] = await engine.get(GetRequest(ids=[talk.fingerprint()]))
        assert hit.text == talk.render_text()
        [exported] = (await engine.export(ListRequest(filter=MetaFilter(thread_id="t-1"), limit=5))).items
        assert exported.item == talk


async def test_a_split_document_missing_a_piece_is_left_out_and_named_by_export(direct: Served) -> None:
    body = "many words in a line\n" * 30_000
    doc = Document.from_text(body, meta=MemoryMeta(workspace="big"))
    async with direct.engine() as engine:
        receipt = await engine.store(doc)
        pieces = direct.double.events()
        assert len(pieces) >= 2
        with direct.double.lock:
            direct.double.log.remove([pieces[1]], release_keys=True)
        scope = MetaFilter(workspace="big")
        assert (await engine.list(ListRequest(filter=scope, limit=5))).items == []
        assert await engine.get(GetRequest(ids=[receipt.id])) == []
        exported = await engine.export(ListRequest(filter=scope, limit=5))
        assert (exported.items, exported.incomplete) == ([], [receipt.id])
        # Storing it again writes only the missing piece.
        mark = direct.mark()
        assert not (await engine.store(doc)).replayed
        assert direct.routes(mark)["POST v1/experience"] == 1
        assert [h.id for h in (await engine.list(ListRequest(filter=scope, limit=5))).items] == [receipt.id]


async def test_other_writers_events_are_ignored(direct: Served) -> None:
    async with direct.engine() as engine:
        await engine.store(Document.from_text("ours"))
        with direct.double.lock:
            direct.double.core.experience(
                {
                    "scope": "app:tinymemory/app:documents",
                    "modality": "document",
                    "content": {"kind": "message", "role": "user", "text": "somebody else's note"},
                },
                "app:tinymemory/app:documents",
            )
        page = await engine.list(ListRequest(limit=10))
        assert [h.text for h in page.items] == ["ours"]


async def test_cursors_name_their_scope_and_bad_ones_are_refused(direct: Served) -> None:
    async with direct.engine() as engine:
        await engine.store_many([*notes(3), *notes(2, Namespace.parse("agent:b"))])
        first = await engine.list(ListRequest(limit=2))
        assert first.next_cursor is not None
        cursor = ListCursor.decode(first.next_cursor)
        assert cursor.scope == "app:tinymemory/app:documents"
        # A cursor into a scope that is gone resumes at the next scope in read order.
        gone = ListCursor("app:tinymemory/agent:a/app:documents", None, 0, None).encode()
        resumed = await engine.list(ListRequest(limit=10, cursor=gone))
        assert len(resumed.items) == 2 and {h.meta.namespace for h in resumed.items} == {Namespace.parse("agent:b")}
        for bad in ("x123", "l" + "zz", "l" + b'{"scope": 1}'.hex(), "l" + b"[]".hex()):
            with pytest.raises(InvalidRequestError, match="unknown cursor"):
                await engine.list(ListRequest(limit=2, cursor=bad))


async def test_narrowed_reads_send_one_label_field(direct: Served) -> None:
    async with direct.engine() as engine:
        await engine.list(ListRequest(filter=MetaFilter(agent_id="scout", language="en"), limit=5))
        await engine.list(ListRequest(filter=MetaFilter(sources=["rss", "link"]), limit=5))
    sent = [r.query.get("labels") for r in direct.double.requests if r.path == "v1/events"]
    assert len(sent[0][0].split(",")) == 1 and sent[0][0].startswith("tm:a:")
    assert len(sent[-1][0].split(",")) == 2 and all(label.startswith("tm:k:") for label in sent[-1][0].split(","))


async def test_get_looks_ids_up_instead_of_scanning(direct: Served) -> None:
    items = notes(60)
    async with direct.engine() as engine:
        await engine.store_many(items)
        mark = direct.mark()
        ids = [items[5].fingerprint(), "missing", items[2].fingerprint()]
        hits = await engine.get(GetRequest(ids=ids, reach=Reach.exact(Namespace.ROOT)))
        assert [h.id for h in hits] == [ids[0], ids[2]]
    events = [r for r in direct.double.requests[mark:] if r.path == "v1/events"]
    assert events and all(r.query.get("labels") for r in events)
