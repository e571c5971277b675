"""The `namespaces` check (docs/spec/contract.md §18.5): reach on every read, sandboxes, and forget across nodes.

Tree: the root, `a` and `b` (siblings), `scout` below `a`, and the sandbox `flow` below `a`. One
fact is stored at each; `a` and `b` hold the same text, so only the namespace tells them apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.conformance.session import Session, named, show
from engines.contract import (
    ExploreRequest,
    Facet,
    FetchRequest,
    ForgetTarget,
    GetRequest,
    ItemId,
    Learning,
    Namespace,
    Reach,
    Segment,
    SegmentKind,
)

TAG = "namespaces"


@dataclass(frozen=True)
class _Tree:
    a: Namespace
    b: Namespace
    scout: Namespace
    flow: Namespace

    def facts(self, s: Session) -> dict[str, Learning]:
        """The five facts by label, in the order they are stored."""

        def fact(label: str, at: Namespace) -> Learning:
            return s.identity.fact(f"{s.identity.marker} {label} shared fact", at, [TAG])

        return {
            "root": fact("root", Namespace.ROOT),
            "a": fact("same", self.a),
            "b": fact("same", self.b),
            "scout": fact("scout", self.scout),
            "flow": fact("flow", self.flow),
        }


def _tree(s: Session) -> _Tree:
    a = s.identity.node("a")
    return _Tree(
        a=a,
        b=s.identity.node("b"),
        scout=a.child(Segment(SegmentKind.AGENT, "scout")),
        flow=a.child(Segment(SegmentKind.SERVICE, "flow")),
    )


async def check_namespaces(s: Session) -> None:
    tree = _tree(s)
    ids = await _store_facts(s, tree)
    await _expect_listings(s, tree, ids)
    await _expect_get_within_reach(s, tree, ids)
    await _expect_fetch_within_reach(s, tree, ids)
    await _expect_namespace_buckets(s, tree)
    await _expect_forgets(s, tree, ids)


async def _store_facts(s: Session, tree: _Tree) -> dict[str, ItemId]:
    facts = tree.facts(s)
    # Recorded before the call: a batch that fails part-way may still leave the sandboxed fact behind.
    s.sandbox_ids.add(facts["flow"].fingerprint())
    receipts = await s.call("store_many(the five namespace facts)", s.engine.store_many(list(facts.values())))
    s.expect("number of receipts for the five namespace facts", len(facts), len(receipts))
    ids = {label: receipt.id for label, receipt in zip(facts, receipts, strict=True)}
    s.sandbox_ids.add(ids["flow"])
    s.ensure(ids["a"] != ids["b"], f"the same fact at {tree.a} and at {tree.b} got one id {ids['a']}")
    return ids


def _listing_table(tree: _Tree) -> list[tuple[str, Reach | None, set[str]]]:
    """(reach as written, reach, labels it must list): docs/spec/contract.md §18.5."""
    return [
        ("of(a)", Reach.of(tree.a), {"root", "a"}),
        ("of(b)", Reach.of(tree.b), {"root", "b"}),
        ("of(scout)", Reach.of(tree.scout), {"root", "a", "scout"}),
        ("of(ROOT)", Reach.of(Namespace.ROOT), {"root"}),
        ("exact(a)", Reach.exact(tree.a), {"a"}),
        ("subtree(a)", Reach.subtree(tree.a), {"a", "scout"}),
        ("subtree(flow)", Reach.subtree(tree.flow), {"flow"}),
        ("of(flow)", Reach.of(tree.flow), {"root", "a", "flow"}),
        ("none", None, {"root", "a", "b", "scout"}),
    ]


async def _expect_listings(s: Session, tree: _Tree, ids: dict[str, ItemId]) -> None:
    for written, reach, labels in _listing_table(tree):
        await _expect_listed(s, written, reach, ids, labels)


async def _expect_listed(
    s: Session, written: str, reach: Reach | None, ids: dict[str, ItemId], labels: set[str]
) -> None:
    names = {item_id: label for label, item_id in ids.items()}
    listed = await s.listed_ids(s.identity.filter(tags=[TAG], reach=reach))
    s.expect(f"facts listed with reach {written}", sorted(labels), named(listed, names))


async def _expect_get_within_reach(s: Session, tree: _Tree, ids: dict[str, ItemId]) -> None:
    request = GetRequest(ids=list(ids.values()), reach=Reach.of(tree.b))
    hits = await s.call(f"get({show(request)})", s.engine.get(request))
    s.expect("ids get returned with reach of(b)", [ids["root"], ids["b"]], [hit.id for hit in hits])


async def _expect_fetch_within_reach(s: Session, tree: _Tree, ids: dict[str, ItemId]) -> None:
    modes = s.fetch_modes()
    if not modes:
        return
    scope = s.identity.filter(tags=[TAG], reach=Reach.of(tree.a))
    request = FetchRequest(query=f"{s.identity.marker} shared fact", mode=modes[0], filter=scope, limit=20)
    page = await s.call(f"fetch({show(request)})", s.engine.fetch(request))
    names = {item_id: label for label, item_id in ids.items()}
    beyond = [hit.id for hit in page.hits if hit.id not in (ids["root"], ids["a"])]
    s.ensure(not beyond, f"fetch with reach of(a) returned facts beyond it: {named(beyond, names)}")


async def _expect_namespace_buckets(s: Session, tree: _Tree) -> None:
    request = ExploreRequest(facet=Facet.NAMESPACE, filter=s.identity.filter(tags=[TAG]), limit=10)
    page = await s.call(f"explore({show(request)})", s.engine.explore(request))
    expected = {("root", 1), (str(tree.a), 1), (str(tree.b), 1), (str(tree.scout), 1)}
    got = {(bucket.value, bucket.count) for bucket in page.buckets}
    s.expect("namespace buckets (value, count)", sorted(expected), sorted(got))


async def _expect_forgets(s: Session, tree: _Tree, ids: dict[str, ItemId]) -> None:
    at_b = ForgetTarget.by_filter(s.identity.filter(tags=[TAG], reach=Reach.exact(tree.b)))
    report = await s.call(f"forget({show(at_b)})", s.engine.forget(at_b))
    s.expect("items forgotten by the filter with reach exact(b)", 1, report.forgotten)
    await _expect_listed(s, "subtree(ROOT)", Reach.subtree(Namespace.ROOT), ids, {"root", "a", "scout"})
    flow = ForgetTarget.by_ids([ids["flow"]])
    report = await s.call(f"forget({show(flow)})", s.engine.forget(flow))
    s.expect("items forgotten by the sandboxed fact's id (forget by id reaches sandboxes)", 1, report.forgotten)
