"""The contract's read operations over HTTP: bodies and answers are exactly the contract's JSON."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from api.auth import CallerDep, ServicesDep, confined, within_reach
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

router = APIRouter(prefix="/v1", tags=["memory"])


def wire(value: BaseModel | list[Hit]) -> JSONResponse:
    """The contract's wire JSON of `value` (its `model_dump(mode="json")` applies the omission rules)."""
    if isinstance(value, list):
        return JSONResponse([hit.model_dump(mode="json") for hit in value])
    return JSONResponse(value.model_dump(mode="json"))


@router.post("/recall", response_model=RecallAnswer)
async def recall(body: RecallRequest, caller: CallerDep, services: ServicesDep) -> JSONResponse:
    """An answer with citations, confined to the token's reach."""
    return wire(await services.engine().recall(within_reach(caller, body)))


@router.post("/fetch", response_model=FetchPage)
async def fetch(body: FetchRequest, caller: CallerDep, services: ServicesDep) -> JSONResponse:
    """Ranked items in one fetch mode (keyword, vector or hybrid), with a cursor for the next page."""
    return wire(await services.engine().fetch(within_reach(caller, body)))


@router.post("/list", response_model=ListPage)
async def list_items(body: ListRequest, caller: CallerDep, services: ServicesDep) -> JSONResponse:
    """Items without a query, oldest first, with a cursor for the next page."""
    return wire(await services.engine().list(within_reach(caller, body)))


@router.post("/get", response_model=list[Hit])
async def get(body: GetRequest, caller: CallerDep, services: ServicesDep) -> JSONResponse:
    """Items whole by id; ids unknown or beyond the reach are left out alike."""
    request = body.model_copy(update={"reach": confined(caller, body.reach)})
    return wire(await services.engine().get(request))


@router.post("/explore", response_model=ExplorePage)
async def explore(body: ExploreRequest, caller: CallerDep, services: ServicesDep) -> JSONResponse:
    """How many items hold each value of a facet."""
    return wire(await services.engine().explore(within_reach(caller, body)))
