"""Checks of writing and reading items back whole: health, round_trip, export, replay, store_many."""

from __future__ import annotations

from collections.abc import Sequence

from engines.conformance.fixtures import round_trip_items
from engines.conformance.session import Session, show
from engines.contract import Exported, ExportPage, InvalidRequestError, Item, ListRequest, StoreReceipt

MAX_EXPORT_PAGES = 10_000


async def check_health(s: Session) -> None:
    health = await s.call("health()", s.engine.health())
    s.ensure(health.is_serving(), f"health() reported {show(health)}; expected ok or degraded")


async def check_round_trip(s: Session) -> None:
    for item in round_trip_items(s.identity):
        await _round_trip(s, item)


async def _round_trip(s: Session, item: Item) -> None:
    kind = item.item_kind
    receipt = await s.call(f"store(round-trip {kind})", s.engine.store(item))
    s.ensure(not receipt.replayed, f"store(round-trip {kind}) of a new item reported replayed=true")
    hits = await s.list_all(s.identity.filter(kinds=[kind]))
    s.expect(f"number of {kind} hits listed", 1, len(hits))
    hit = hits[0]
    s.expect(f"listed {kind} id (the receipt's)", receipt.id, hit.id)
    s.expect(f"listed {kind} kind", kind, hit.kind)
    s.expect(f"listed {kind} meta", item.meta, hit.meta)
    s.expect(f"listed {kind} confidence", item.confidence_value(), hit.confidence)
    s.expect(f"listed {kind} text (render_text())", item.render_text(), hit.text)


async def check_export(s: Session) -> None:
    items = round_trip_items(s.identity)
    for item in items:
        await s.call(f"store(round-trip {item.item_kind}) again", s.engine.store(item))
    first_request = ListRequest(filter=s.identity.filter(), limit=2)
    first = await s.call_optional(f"export({show(first_request)})", s.engine.export(first_request))
    if first is None:
        return  # export is optional: an engine may decline it with UnsupportedError
    entries = await _export_rest(s, first)
    s.expect("number of items exported", len(items), len(entries))
    ids = [entry.id for entry in entries]
    s.ensure(len(set(ids)) == len(ids), f"export named an id twice: {ids}")
    for item in items:
        await _exported_whole(s, item, entries)


async def _export_rest(s: Session, page: ExportPage) -> list[Exported]:
    """Every entry of the walk that began with `page`, following its cursors."""
    entries: list[Exported] = []
    seen: set[str] = set()
    for _ in range(MAX_EXPORT_PAGES):
        s.expect("export page `incomplete`", [], page.incomplete)
        entries.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return entries
        s.ensure(cursor not in seen, f"export handed out cursor {cursor!r} twice in one walk")
        seen.add(cursor)
        request = ListRequest(filter=s.identity.filter(), limit=2, cursor=cursor)
        page = await s.call(f"export({show(request)})", s.engine.export(request))
    s.fail(f"export did not end within {MAX_EXPORT_PAGES} pages")


async def _exported_whole(s: Session, item: Item, entries: Sequence[Exported]) -> None:
    """The item is exported once, under its fingerprint, exactly as stored, and stores back as a replay."""
    kind = item.item_kind
    item_id = item.fingerprint()
    found = [entry for entry in entries if entry.id == item_id]
    s.expect(f"exported entries under the round-trip {kind}'s fingerprint {item_id}", 1, len(found))
    entry = found[0]
    s.expect(f"exported {kind}", item, entry.item)
    receipt = await s.call(f"store(exported {kind})", s.engine.store(entry.item))
    s.ensure(receipt.replayed, f"storing the exported {kind} where it was reported replayed=false")
    s.expect(f"receipt id of the exported {kind} stored back", entry.id, receipt.id)


async def check_replay(s: Session) -> None:
    document = s.identity.document("replay", s.identity.meta())
    first = await s.call("store(replay document)", s.engine.store(document))
    s.ensure(not first.replayed, "store of a new document reported replayed=true")
    second = await s.call("store(replay document) again", s.engine.store(document))
    s.ensure(second.replayed, "storing the same document again reported replayed=false")
    s.expect("receipt id of the replay", first.id, second.id)
    listed = await s.listed_ids(s.identity.filter())
    s.expect(f"times {first.id} is listed after a replay", 1, listed.count(first.id))


async def check_store_many(s: Session) -> None:
    ident = s.identity
    items = [ident.document(f"bulk-{i}", ident.meta()) for i in range(3)]
    receipts = await s.call("store_many(3 new documents)", s.engine.store_many(list(items)))
    _expect_receipts(s, "store_many of 3 new documents", items, receipts, replayed=False)
    listed = set(await s.listed_ids(ident.filter()))
    unlisted = [receipt.id for receipt in receipts if receipt.id not in listed]
    s.ensure(not unlisted, f"ids stored by store_many are not listed on return: {unlisted}")
    again = await s.call("store_many(the same 3 documents)", s.engine.store_many(list(items)))
    _expect_receipts(s, "store_many of the same batch again", items, again, replayed=True)
    await _duplicate_in_batch(s)
    await s.refused("store_many([])", (InvalidRequestError,), s.engine.store_many([]))


def _expect_receipts(
    s: Session, what: str, items: Sequence[Item], receipts: Sequence[StoreReceipt], replayed: bool
) -> None:
    s.expect(f"number of receipts from {what}", len(items), len(receipts))
    for index, (item, receipt) in enumerate(zip(items, receipts, strict=True)):
        s.expect(f"{what}: receipt {index} id (item {index}'s fingerprint)", item.fingerprint(), receipt.id)
        s.expect(f"{what}: receipt {index} replayed", replayed, receipt.replayed)


async def _duplicate_in_batch(s: Session) -> None:
    """A batch naming one item twice stores it once; the second receipt is a replay of the first."""
    document = s.identity.document("bulk-twice", s.identity.meta())
    receipts = await s.call("store_many([d, d])", s.engine.store_many([document, document]))
    s.expect("number of receipts from store_many([d, d])", 2, len(receipts))
    s.expect("store_many([d, d]) replayed flags", [False, True], [r.replayed for r in receipts])
    s.expect("store_many([d, d]) second receipt id", receipts[0].id, receipts[1].id)
    listed = await s.listed_ids(s.identity.filter())
    s.expect(f"times {receipts[0].id} is listed after store_many([d, d])", 1, listed.count(receipts[0].id))
