"""Checks of removal: empty_forget, forget_by_id, forget_by_filter and erase."""

from __future__ import annotations

from engines.conformance.session import Session, named, show
from engines.contract import (
    EraseRequest,
    ForgetTarget,
    InvalidRequestError,
    ItemId,
    Learning,
    MetaFilter,
    Namespace,
    Reach,
    Segment,
    SegmentKind,
    UnsupportedError,
)

ERASE_TAG = "erase"


async def check_empty_forget(s: Session) -> None:
    before = len(await s.list_all(s.identity.filter()))
    no_ids = ForgetTarget.by_ids([])
    await s.refused("forget(by_ids([]))", (InvalidRequestError,), s.engine.forget(no_ids))
    everything = ForgetTarget.by_filter(MetaFilter())
    await s.refused("forget(by_filter({}))", (InvalidRequestError,), s.engine.forget(everything))
    after = len(await s.list_all(s.identity.filter()))
    s.expect("items listed after two refused forgets", before, after)


async def check_forget_by_id(s: Session) -> None:
    document = s.identity.document("forget-one", s.identity.meta())
    receipt = await s.call("store(forget-one document)", s.engine.store(document))
    before = await s.listed_ids(s.identity.filter())
    target = ForgetTarget.by_ids([receipt.id])
    report = await s.call(f"forget({show(target)})", s.engine.forget(target))
    s.expect(f"items forgotten by id {receipt.id}", 1, report.forgotten)
    after = await s.listed_ids(s.identity.filter())
    s.expect("ids listed after forgetting one", sorted(i for i in before if i != receipt.id), sorted(after))
    again = await s.call(f"forget({show(target)}) again", s.engine.forget(target))
    s.expect(f"items forgotten by the already forgotten id {receipt.id}", 0, again.forgotten)


async def check_forget_by_filter(s: Session) -> None:
    ident = s.identity
    tag = f"{ident.marker}-drop"
    before = await s.listed_ids(ident.filter())
    for label in ("drop-0", "drop-1"):
        document = ident.document(label, ident.meta(tags=[tag]))
        await s.call(f"store({label} document)", s.engine.store(document))
    tagged = MetaFilter(tags_any=[tag], workspace=ident.workspace)
    target = ForgetTarget.by_filter(tagged)
    report = await s.call(f"forget({show(target)})", s.engine.forget(target))
    s.expect("items forgotten by the tag filter", 2, report.forgotten)
    s.expect("ids listed under the tag filter after forgetting it", [], await s.listed_ids(tagged))
    after = await s.listed_ids(ident.filter())
    s.expect("the run's other listed ids after the forget", sorted(before), sorted(after))


def _erasables(s: Session) -> dict[str, Learning]:
    """Facts at `node("erased")`, at a child below it, and at the sibling `node("kept")`, by label."""
    ident = s.identity
    erased = ident.node("erased")
    nodes = {
        "node": erased,
        "child": erased.child(Segment(SegmentKind.AGENT, "child")),
        "sibling": ident.node("kept"),
    }
    text = f"{ident.marker} {{}} erasable fact"
    return {label: ident.fact(text.format(label), at, [ERASE_TAG]) for label, at in nodes.items()}


async def check_erase(s: Session) -> None:
    items = _erasables(s)
    ids: dict[str, ItemId] = {}
    for label, item in items.items():
        ids[label] = (await s.call(f"store(erasable {label} fact)", s.engine.store(item))).id
    whole_tree = s.engine.erase(EraseRequest(reach=Reach.subtree(Namespace.ROOT)))
    what = "erase(subtree(ROOT)) without whole_tree"
    await s.refused(what, (InvalidRequestError, UnsupportedError), whole_tree)
    request = EraseRequest(reach=Reach.subtree(items["node"].meta.namespace))
    if await s.call_optional(f"erase({show(request)})", s.engine.erase(request)) is None:
        return  # erase is optional: callers fall back to forget by filter
    everywhere = Reach.subtree(Namespace.ROOT)
    scope = MetaFilter(tags_any=[ERASE_TAG], workspace=s.identity.workspace, reach=everywhere)
    names = {item_id: label for label, item_id in ids.items()}
    left = named(await s.listed_ids(scope), names)
    s.expect("facts listed after erasing subtree(erased)", ["sibling"], left)
    for label in ("node", "child"):
        receipt = await s.call(f"store(erased {label} fact) again", s.engine.store(items[label]))
        s.ensure(not receipt.replayed, f"storing the erased {label} fact again reported a replay")
    s.expect("number of facts listed after storing the erased ones again", 3, len(await s.listed_ids(scope)))
