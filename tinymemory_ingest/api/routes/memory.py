"""The contract's read operations over HTTP: bodies and answers are exactly the contract's JSON."""

from __future__ import annotations

from fastapi import APIRouter, Response
from pydantic import BaseModel, TypeAdapter

from engines.contract import (
    ExplorePage,
    ExploreRequest,
    FetchPage,
    FetchRequest,
    GetRequest,
    Hit,
    ListPage,
    ListRequest,
    RecallAnswer,
    RecallRequest,
)
from tinymemory_ingest.api.auth import CallerDep, ServicesDep, confined, within_reach

router = APIRouter(prefix="/v1", tags=["memory"])


_HITS = TypeAdapter(list[Hit])


def wire(value: BaseModel | list[Hit]) -> Response:
    """The contract's wire JSON of `value`: serialised by pydantic at once (its serialiser applies the omission
    rules), not dumped to dicts for `json.dumps`, which took twice as long."""
    body = _HITS.dump_json(value) if isinstance(value, list) else value.model_dump_json()
    return Response(content=body, media_type="application/json")


@router.post("/recall", response_model=RecallAnswer)
async def recall(body: RecallRequest, caller: CallerDep, services: ServicesDep) -> Response:
    """An answer with citations, confined to the token's reach."""
    return wire(await services.engine().recall(within_reach(caller, body)))


@router.post("/fetch", response_model=FetchPage)
async def fetch(body: FetchRequest, caller: CallerDep, services: ServicesDep) -> Response:
    """Ranked items in one fetch mode (keyword, vector or hybrid), with a cursor for the next page."""
    return wire(await services.engine().fetch(within_reach(caller, body)))


@router.post("/list", response_model=ListPage)
async def list_items(body: ListRequest, caller: CallerDep, services: ServicesDep) -> Response:
    """Items without a query, oldest first, with a cursor for the next page."""
    return wire(await services.engine().list(within_reach(caller, body)))


@router.post("/get", response_model=list[Hit])
async def get(body: GetRequest, caller: CallerDep, services: ServicesDep) -> Response:
    """Items whole by id; ids unknown or beyond the reach are left out alike."""
    request = body.model_copy(update={"reach": confined(caller, body.reach)})
    return wire(await services.engine().get(request))


@router.post("/explore", response_model=ExplorePage)
async def explore(body: ExploreRequest, caller: CallerDep, services: ServicesDep) -> Response:
    """How many items hold each value of a facet."""
    return wire(await services.engine().explore(within_reach(caller, body)))
