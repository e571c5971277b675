"""`run_isolation`: two handles acting for two users share nothing (docs/spec/contract.md §18.7).

Every step runs under the check name `isolation`; the failure detail names the step.
"""

from __future__ import annotations

import logging

from engines.conformance.errors import ConformanceError
from engines.conformance.fixtures import Identity, round_trip_items
from engines.conformance.session import Session, show
from engines.contract import (
    ExploreRequest,
    Facet,
    FetchRequest,
    ForgetTarget,
    GetRequest,
    ItemId,
    MemoryEngine,
    Namespace,
    Reach,
    RecallRequest,
)

logger = logging.getLogger(__name__)

ISOLATION = "isolation"
CLEANUP = "cleanup"


async def run_isolation(a: MemoryEngine, b: MemoryEngine) -> None:
    """Check that nothing `a` stores is visible to, or changeable by, `b`, and the reverse for `b`'s own.

    `a` and `b` are two handles on one backing store acting for two users. Raises `ConformanceError`
    with check `isolation` (or `cleanup`); both handles forget the run's items either way.
    """
    ident = Identity.new()
    sa, sb = Session(a, ident, ISOLATION), Session(b, ident, ISOLATION)
    try:
        await _steps(sa, sb)
    except Exception:
        try:
            await _cleanup(sa, sb)
        except Exception:
            logger.warning("isolation cleanup failed after a failed step", exc_info=True)
        raise
    await _cleanup(sa, sb)


async def _steps(sa: Session, sb: Session) -> None:
    a_ids = await _step_a_stores(sa, sb)
    await _step_b_lists_nothing(sa, sb, a_ids)
    await _step_b_gets_nothing(sa, sb, a_ids)
    await _step_b_fetches_nothing(sa, sb, a_ids)
    await _step_b_recalls_nothing(sa, sb, a_ids)
    await _step_b_explores_nothing(sa, sb)
    await _step_b_forgets_nothing(sa, sb, a_ids)
    await _step_b_stores_its_own(sa, sb, a_ids)
    await _step_b_user_node(sa, sb)


def _at(step: str, *sessions: Session) -> None:
    for session in sessions:
        session.step = step


async def _expect_a_holds(sa: Session, a_ids: list[ItemId]) -> None:
    listed = await sa.listed_ids(sa.identity.filter())
    sa.expect("ids a lists", sorted(a_ids), sorted(listed))


async def _step_a_stores(sa: Session, sb: Session) -> list[ItemId]:
    _at("step 1 (a stores the round-trip items)", sa, sb)
    a_ids: list[ItemId] = []
    for item in round_trip_items(sa.identity):
        receipt = await sa.call(f"a.store(round-trip {item.item_kind})", sa.engine.store(item))
        a_ids.append(receipt.id)
    await _expect_a_holds(sa, a_ids)
    return a_ids


async def _step_b_lists_nothing(sa: Session, sb: Session, a_ids: list[ItemId]) -> None:
    _at("step 2 (b lists a's items)", sa, sb)
    for reach in (None, Reach.subtree(Namespace.ROOT)):
        seen = set(await sb.listed_ids(sb.identity.filter(reach=reach))) & set(a_ids)
        sb.ensure(not seen, f"b listed a's items with reach {show(reach)}: {sorted(seen)}")


async def _step_b_gets_nothing(sa: Session, sb: Session, a_ids: list[ItemId]) -> None:
    _at("step 3 (b gets a's ids)", sa, sb)
    for reach in (None, Reach.subtree(Namespace.ROOT)):
        request = GetRequest(ids=a_ids, reach=reach)
        hits = await sb.call(f"b.get({show(request)})", sb.engine.get(request))
        sb.expect(f"ids b.get returned with reach {show(reach)}", [], [hit.id for hit in hits])


async def _step_b_fetches_nothing(sa: Session, sb: Session, a_ids: list[ItemId]) -> None:
    _at("step 4 (b fetches the marker)", sa, sb)
    for mode in sb.fetch_modes():
        request = FetchRequest(query=sb.identity.marker, mode=mode, filter=sb.identity.filter(), limit=20)
        page = await sb.call(f"b.fetch({show(request)})", sb.engine.fetch(request))
        seen = {hit.id for hit in page.hits} & set(a_ids)
        sb.ensure(not seen, f"b's {mode} fetch returned a's items: {sorted(seen)}")


async def _step_b_recalls_nothing(sa: Session, sb: Session, a_ids: list[ItemId]) -> None:
    _at("step 5 (b recalls the marker)", sa, sb)
    request = RecallRequest(question=sb.identity.marker, filter=sb.identity.filter(), limit=5)
    answer = await sb.call(f"b.recall({show(request)})", sb.engine.recall(request))
    seen = {citation.id for citation in answer.citations} & set(a_ids)
    sb.ensure(not seen, f"b's recall cited a's items: {sorted(seen)}")


async def _step_b_explores_nothing(sa: Session, sb: Session) -> None:
    _at("step 6 (b explores namespaces)", sa, sb)
    request = ExploreRequest(facet=Facet.NAMESPACE, filter=sb.identity.filter(), limit=10)
    page = await sb.call(f"b.explore({show(request)})", sb.engine.explore(request))
    sb.expect("total of b's explore", 0, page.total)


async def _step_b_forgets_nothing(sa: Session, sb: Session, a_ids: list[ItemId]) -> None:
    _at("step 7 (b forgets a's items)", sa, sb)
    for target in (ForgetTarget.by_ids(a_ids), ForgetTarget.by_filter(sb.identity.filter())):
        report = await sb.call(f"b.forget({show(target)})", sb.engine.forget(target))
        sb.expect(f"items b.forget({show(target)}) removed", 0, report.forgotten)
    await _expect_a_holds(sa, a_ids)


async def _step_b_stores_its_own(sa: Session, sb: Session, a_ids: list[ItemId]) -> None:
    _at("step 8 (b stores a's first item as its own)", sa, sb)
    document = round_trip_items(sb.identity)[0]
    receipt = await sb.call("b.store(round-trip document)", sb.engine.store(document))
    sb.ensure(not receipt.replayed, "b storing an item only a holds reported a replay")
    sb.expect("ids b lists", [receipt.id], await sb.listed_ids(sb.identity.filter()))
    await _expect_a_holds(sa, a_ids)


async def _step_b_user_node(sa: Session, sb: Session) -> None:
    _at("step 9 (b stores at a user node)", sa, sb)
    node = Namespace.parse(f"user:{sb.identity.marker}-a")
    document = sb.identity.document("user-node", sb.identity.meta(namespace=node))
    receipt = await sb.call("b.store(user-node document)", sb.engine.store(document))
    exact = sb.identity.filter(reach=Reach.exact(node))
    sb.expect(f"ids b lists with reach exact({node})", [receipt.id], await sb.listed_ids(exact))
    for reach in (None, Reach.subtree(Namespace.ROOT), Reach.exact(node)):
        listed = await sa.listed_ids(sa.identity.filter(reach=reach))
        sa.ensure(receipt.id not in listed, f"a listed b's item {receipt.id} with reach {show(reach)}")


async def _cleanup(sa: Session, sb: Session) -> None:
    failure: ConformanceError | None = None
    for session in (sa, sb):
        session.check, session.step = CLEANUP, ""
        target = ForgetTarget.by_filter(session.identity.filter())
        try:
            await session.call(f"forget({show(target)})", session.engine.forget(target))
        except ConformanceError as err:
            failure = failure or err
    if failure is not None:
        raise failure
