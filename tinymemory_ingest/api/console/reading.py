"""The console's memory pages: search (fetch hits and a recall answer), one item whole, and explore.

They read the engine exactly as the API's routes do, confined to the viewer's reach, so the console never
shows what the same token could not fetch. The filters are query parameters, so every result is a link.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import Response

from engines.contract import (
    ExploreRequest,
    Facet,
    FetchMode,
    FetchRequest,
    GetRequest,
    Hit,
    InvalidRequestError,
    ItemKind,
    MetaFilter,
    NotFoundError,
    RecallRequest,
)
from tinymemory_ingest.api.auth import confined, within_reach
from tinymemory_ingest.api.console.route import ConsoleRoute, page, query_of, services_of, viewer

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

HITS = 20
CITED = 5
BUCKETS = 25
FILTERS = ("kind", "source", "folder", "tag", "language")
# The facets explore offers, by the filter parameter that drills into each (`source` is the source's id).
FACETS: Mapping[str, Facet] = {
    "kind": Facet.KIND,
    "source": Facet.SOURCE_ID,
    "folder": Facet.FOLDER,
    "language": Facet.LANGUAGE,
    "tag": Facet.TAG,
}
_PLACE_TAGS = ("page:", "pages:", "section:")


def filter_of(chosen: Mapping[str, str]) -> MetaFilter:
    """The filter the query parameters choose; an unknown kind is an error that names the kinds."""
    kinds: list[ItemKind] = []
    if "kind" in chosen:
        try:
            kinds = [ItemKind(chosen["kind"])]
        except ValueError as err:
            known = ", ".join(k.value for k in ItemKind)
            raise InvalidRequestError(f"kind {chosen['kind']!r} is not one of {known}") from err
    return MetaFilter(
        kinds=kinds,
        source_id=chosen.get("source"),
        folder=chosen.get("folder"),
        language=chosen.get("language"),
        tags_any=[chosen["tag"]] if "tag" in chosen else [],
    )


def place_of(hit: Hit) -> list[str]:
    """Where in its document a hit is: its page and section tags, as the engine set them."""
    return [tag for tag in hit.meta.tags if tag.startswith(_PLACE_TAGS)]


@router.get("/search")
async def search_page(request: Request) -> Response:
    who = viewer(request)
    chosen = query_of(request, "q", "mode", *FILTERS)
    query = chosen.get("q", "")
    mode = _mode(chosen.get("mode", FetchMode.HYBRID.value))
    hits: list[Hit] = []
    answer = None
    if query:
        engine = services_of(request).engine()
        wanted = filter_of(chosen)
        fetch = FetchRequest(query=query, mode=mode, filter=wanted, limit=HITS)
        hits = (await engine.fetch(within_reach(who.caller, fetch))).hits
        recall = RecallRequest(question=query, filter=wanted, limit=CITED)
        answer = await engine.recall(within_reach(who.caller, recall))
    return page(
        request,
        "search.html",
        who,
        chosen=chosen,
        query=query,
        mode=mode.value,
        modes=[m.value for m in FetchMode],
        kinds=[k.value for k in ItemKind],
        hits=hits,
        answer=answer,
        place_of=place_of,
    )


def _mode(value: str) -> FetchMode:
    try:
        return FetchMode(value)
    except ValueError as err:
        known = ", ".join(m.value for m in FetchMode)
        raise InvalidRequestError(f"fetch mode {value!r} is not one of {known}") from err


@router.get("/items/{item_id:path}")
async def item_page(request: Request, item_id: str) -> Response:
    who = viewer(request)
    engine = services_of(request).engine()
    found = await engine.get(GetRequest(ids=[item_id], reach=confined(who.caller, None)))
    if not found:
        raise NotFoundError(f"no item {item_id!r} this token may read (it may have been forgotten or erased)")
    return page(request, "item.html", who, hit=found[0], place=place_of(found[0]))


@router.get("/explore")
async def explore_page(request: Request) -> Response:
    who = viewer(request)
    chosen = query_of(request, "facet", *FILTERS)
    name = chosen.get("facet", "kind")
    if name not in FACETS:
        raise InvalidRequestError(f"facet {name!r} is not one of {', '.join(FACETS)}")
    filters = {k: v for k, v in chosen.items() if k != "facet"}
    explore = ExploreRequest(facet=FACETS[name], filter=filter_of(filters), limit=BUCKETS)
    shown = await services_of(request).engine().explore(within_reach(who.caller, explore))
    top = max((b.count for b in shown.buckets), default=0)
    drill = {b.value: _drill(filters, name, b.value) for b in shown.buckets}
    undo = {k: "/explore?" + urlencode({"facet": name, **_without(filters, k)}) for k in filters}
    return page(
        request,
        "explore.html",
        who,
        facet=name,
        facets=list(FACETS),
        page_=shown,
        top=top,
        drill=drill,
        filters=filters,
        undo=undo,
        search="/search?" + urlencode(filters) if filters else "/search",
    )


def _drill(filters: Mapping[str, str], facet: str, value: str) -> str:
    """Explore with `facet` = `value` added, grouped by the next facet not chosen yet (else the same)."""
    chosen = {**filters, facet: value}
    following = next((f for f in FACETS if f not in chosen), facet)
    return "/explore?" + urlencode({"facet": following, **chosen})


def _without(filters: Mapping[str, str], name: str) -> dict[str, str]:
    return {k: v for k, v in filters.items() if k != name}
