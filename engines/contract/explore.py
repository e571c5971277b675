"""Explore and get: walking stored items by facet, reading items by id, and their listing defaults."""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from pydantic import Field

from engines.contract.errors import EngineError, InvalidRequestError
from engines.contract.facets import Facet
from engines.contract.items import ItemId
from engines.contract.limits import DEFAULT_SCAN_LIMIT, LISTING_PAGE, MAX_BUCKETS, MAX_GET_IDS, MAX_SCAN_LIMIT
from engines.contract.meta import MetaFilter
from engines.contract.namespace import Reach
from engines.contract.query import ForgetReport, ForgetTarget, Hit, ListPage, ListRequest
from engines.contract.serialization import WireModel

_Hits = list[Hit]


class ListingEngine(Protocol):
    """What the listing defaults need of an engine: `list`, `get` and `forget` (every `MemoryEngine` has them)."""

    async def list(self, req: ListRequest) -> ListPage: ...

    async def get(self, req: GetRequest) -> _Hits: ...

    async def forget(self, target: ForgetTarget) -> ForgetReport: ...


class ExploreRequest(WireModel):
    """Group the items `filter` admits by one facet: at most `limit` buckets, scanning `scan_limit` items."""

    facet: Facet
    filter: MetaFilter = Field(default_factory=MetaFilter)
    limit: int
    scan_limit: int = DEFAULT_SCAN_LIMIT

    def check(self) -> None:
        if not 1 <= self.limit <= MAX_BUCKETS:
            raise InvalidRequestError(f"explore limit must be between 1 and {MAX_BUCKETS}")
        if not 1 <= self.scan_limit <= MAX_SCAN_LIMIT:
            raise InvalidRequestError(f"explore scan_limit must be between 1 and {MAX_SCAN_LIMIT}")


class FacetBucket(WireModel):
    value: str
    count: int


class ExplorePage(WireModel):
    """Buckets largest first (ties by value); `missing` counts items without a value.

    When `truncated`, the scan stopped early and every count is a lower bound.
    """

    facet: Facet
    buckets: list[FacetBucket] = Field(default_factory=list)
    total: int = 0
    missing: int = 0
    more_buckets: int = 0
    truncated: bool = False


class GetRequest(WireModel):
    """Read items whole by id; unknown ids and ids beyond `reach` are left out alike."""

    ids: list[ItemId]
    reach: Reach | None = None

    def check(self) -> None:
        if not 1 <= len(self.ids) <= MAX_GET_IDS:
            raise InvalidRequestError(f"get takes between 1 and {MAX_GET_IDS} ids")
        if any(not item_id.strip() for item_id in self.ids):
            raise InvalidRequestError("get ids must not be blank")


def in_request_order(ids: list[ItemId], found: dict[ItemId, Hit]) -> list[Hit]:
    """The found hits in the order of `ids`, each id once (first occurrence), absent ids skipped."""
    return [found[item_id] for item_id in dict.fromkeys(ids) if item_id in found]


def page_explore(
    facet: Facet, counts: Counter[str], total: int, missing: int, limit: int, truncated: bool
) -> ExplorePage:
    """Build an explore page from counted values: largest first, ties by value in code-point order."""
    ordered = sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))
    return ExplorePage(
        facet=facet,
        buckets=[FacetBucket(value=value, count=count) for value, count in ordered[:limit]],
        total=total,
        missing=missing,
        more_buckets=max(0, len(ordered) - limit),
        truncated=truncated,
    )


async def explore_by_listing(engine: ListingEngine, req: ExploreRequest) -> ExplorePage:
    """The default explore: page through `list` up to `scan_limit` items and count facet values."""
    req.check()
    counts: Counter[str] = Counter()
    total = missing = 0
    cursor: str | None = None
    seen: set[str] = set()
    truncated = False
    while True:
        want = min(LISTING_PAGE, req.scan_limit - total)
        page = await engine.list(ListRequest(filter=req.filter, limit=want, cursor=cursor))
        for hit in page.items:
            values = req.facet.values(hit)
            missing += not values
            counts.update(values)
        total += len(page.items)
        if page.next_cursor is None:
            break
        if total >= req.scan_limit:
            truncated = True
            break
        if page.next_cursor in seen:
            raise EngineError("list repeated a cursor")
        seen.add(page.next_cursor)
        cursor = page.next_cursor
    return page_explore(req.facet, counts, total, missing, req.limit, truncated)


async def get_by_listing(engine: ListingEngine, req: GetRequest) -> list[Hit]:
    """The default get: page through `list` under the reach until every id is found."""
    req.check()
    wanted = set(req.ids)
    found: dict[ItemId, Hit] = {}
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        page = await engine.list(ListRequest(filter=MetaFilter(reach=req.reach), limit=LISTING_PAGE, cursor=cursor))
        found.update((hit.id, hit) for hit in page.items if hit.id in wanted and hit.id not in found)
        if len(found) == len(wanted) or page.next_cursor is None:
            break
        if page.next_cursor in seen:
            raise EngineError("list repeated a cursor")
        seen.add(page.next_cursor)
        cursor = page.next_cursor
    return in_request_order(req.ids, found)


def check_forget_ids(ids: list[ItemId]) -> None:
    """The id rules of `forget_within`: at least one id, none blank."""
    if not ids:
        raise InvalidRequestError("forget needs at least one id")
    if any(not item_id.strip() for item_id in ids):
        raise InvalidRequestError("forget ids must not be blank")


async def forget_within_by_get(engine: ListingEngine, ids: list[ItemId], reach: Reach) -> ForgetReport:
    """The default `forget_within`: read the ids back under the reach, then forget only those found."""
    check_forget_ids(ids)
    unique = list(dict.fromkeys(ids))
    found: list[ItemId] = []
    for start in range(0, len(unique), MAX_GET_IDS):
        batch = unique[start : start + MAX_GET_IDS]
        found.extend(hit.id for hit in await engine.get(GetRequest(ids=batch, reach=reach)))
    if not found:
        return ForgetReport(forgotten=0)
    return await engine.forget(ForgetTarget.by_ids(found))
