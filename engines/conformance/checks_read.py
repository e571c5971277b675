"""Checks of the reads: explore, get, fetch_filters, unsupported_modes and recall."""

from __future__ import annotations

from collections import Counter

from engines.conformance.probes import Probe, probes
from engines.conformance.session import Session, show
from engines.contract import (
    ExploreRequest,
    Facet,
    FetchMode,
    FetchRequest,
    GetRequest,
    Hit,
    InvalidRequestError,
    ItemId,
    MetaFilter,
    RecallRequest,
    UnsupportedError,
)

PROBE_LIMIT = 50


async def check_explore(s: Session) -> None:
    scope = s.identity.filter()
    request = ExploreRequest(facet=Facet.KIND, filter=scope, limit=10)
    page = await s.call(f"explore({show(request)})", s.engine.explore(request))
    hits = await s.list_all(scope)
    s.expect("explore facet", Facet.KIND, page.facet)
    s.ensure(not page.truncated, "explore by kind reported truncated=true over a handful of items")
    s.expect("explore total (the number of items listed)", len(hits), page.total)
    buckets = {bucket.value: bucket.count for bucket in page.buckets}
    s.ensure(len(buckets) == len(page.buckets), f"explore repeated a bucket value: {show(page.buckets)}")
    s.expect("kind buckets (value: count of listed items)", dict(Counter(h.kind.value for h in hits)), buckets)
    counts = [bucket.count for bucket in page.buckets]
    s.ensure(counts == sorted(counts, reverse=True), f"bucket counts are not largest first: {counts}")
    for value, count in buckets.items():
        narrowed = await s.list_all(Facet.KIND.narrow(scope, value))
        s.expect(f"items listed when narrowed to kind {value}", count, len(narrowed))
    await _explore_workspace(s, len(hits))
    refused = ExploreRequest(facet=Facet.KIND, limit=0)
    await s.refused("explore with limit 0", (InvalidRequestError,), s.engine.explore(refused))


async def _explore_workspace(s: Session, total: int) -> None:
    request = ExploreRequest(facet=Facet.WORKSPACE, filter=s.identity.filter(), limit=10)
    page = await s.call(f"explore({show(request)})", s.engine.explore(request))
    got = [(bucket.value, bucket.count) for bucket in page.buckets]
    s.expect("workspace buckets", [(s.identity.workspace, total)], got)
    s.expect("explore by workspace `missing`", 0, page.missing)


async def check_get(s: Session) -> None:
    listed = await s.list_all(s.identity.filter())
    by_id = {hit.id: hit for hit in listed}
    known = [hit.id for hit in reversed(listed)]
    asked = list(known)
    asked.insert(min(1, len(known)), f"{s.identity.marker}-missing")
    hits = await s.call(f"get({asked})", s.engine.get(GetRequest(ids=asked)))
    s.expect("ids get returned (the known ones, in request order)", known, [hit.id for hit in hits])
    for hit in hits:
        held = by_id[hit.id]
        s.expect(f"kind of {hit.id} by get (as listed)", held.kind, hit.kind)
        s.expect(f"meta of {hit.id} by get (as listed)", held.meta, hit.meta)
        s.expect(f"text of {hit.id} by get (as listed)", held.text, hit.text)
    await s.refused("get(ids=[])", (InvalidRequestError,), s.engine.get(GetRequest(ids=[])))


async def check_fetch_filters(s: Session) -> None:
    modes = s.fetch_modes()
    stored: list[tuple[Probe, ItemId]] = []
    for probe in probes(s.identity):
        receipt = await s.call(f"store(probe {probe.field})", s.engine.store(probe.item))
        stored.append((probe, receipt.id))
    for probe, probe_id in stored:
        await _probe_alone(s, probe, probe_id, modes)
    every = {probe_id for _, probe_id in stored}
    for mode in modes:
        hits = await _fetch(s, s.identity.marker, mode, s.identity.probe_filter(), PROBE_LIMIT)
        missed = every - {hit.id for hit in hits}
        s.ensure(not missed, f"{mode} fetch over every probe missed {len(missed)} of them: {sorted(missed)}")


async def _probe_alone(s: Session, probe: Probe, probe_id: ItemId, modes: tuple[FetchMode, ...]) -> None:
    """The probe's filter selects its probe and no other, in every fetch mode and in the listing."""
    for mode in modes:
        hits = await _fetch(s, s.identity.marker, mode, probe.filter, PROBE_LIMIT)
        s.expect(f"{mode} fetch hits for the `{probe.field}` probe", {probe_id}, {hit.id for hit in hits})
    listed = await s.listed_ids(probe.filter)
    s.expect(f"ids listed for the `{probe.field}` probe", {probe_id}, set(listed))


async def _fetch(s: Session, query: str, mode: FetchMode, filter: MetaFilter, limit: int) -> list[Hit]:
    request = FetchRequest(query=query, mode=mode, filter=filter, limit=limit)
    page = await s.call(f"fetch({show(request)})", s.engine.fetch(request))
    return page.hits


async def check_unsupported_modes(s: Session) -> None:
    declared = s.fetch_modes()
    for mode in FetchMode:
        if mode in declared:
            continue
        request = FetchRequest(query=s.identity.marker, mode=mode, filter=s.identity.filter(), limit=5)
        what = f"fetch in {mode} mode, which the descriptor does not list"
        await s.refused(what, (UnsupportedError,), s.engine.fetch(request))


async def check_recall(s: Session) -> None:
    request = RecallRequest(question=s.identity.marker, filter=s.identity.filter(), limit=5)
    answer = await s.call(f"recall({show(request)})", s.engine.recall(request))
    s.ensure(bool(answer.answer.strip()), "recall over stored items gave a blank answer")
    cited = len(answer.citations)
    s.ensure(1 <= cited <= 5, f"recall with limit 5 cited {cited} items, expected 1 to 5")
    listed = {hit.id: hit.kind for hit in await s.list_all(s.identity.filter())}
    for citation in answer.citations:
        s.ensure(citation.id in listed, f"recall cited {citation.id}, which list does not hold")
        s.expect(f"kind of cited item {citation.id} (as listed)", listed[citation.id], citation.kind)
