"""Admin routes (admin tokens only), each one call of `worker.control`: sources, sync, status, dead letters."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from tinymemory_ingest.api.auth import AdminDep, ServicesDep
from worker import control
from worker.control import SourceEntry, SourceRequest, SyncOutcome

router = APIRouter(prefix="/v1", tags=["admin"])


def _json(value: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(value, status_code=status)


@router.get("/sources", response_model=list[SourceEntry])
async def list_sources(_: AdminDep, services: ServicesDep) -> JSONResponse:
    """The configured sources."""
    return _json([e.model_dump(mode="json") for e in control.list_sources(services.state())])


@router.post("/sources", response_model=SourceEntry, status_code=201)
async def add_source(body: SourceRequest, _: AdminDep, services: ServicesDep) -> JSONResponse:
    """Configure a source (the same request again answers the same entry); its kind checks the target."""
    entry = control.add_source(services.state(), body)
    return _json(entry.model_dump(mode="json"), 201)


@router.get("/sources/{source_id}", response_model=control.SourceDetail)
async def show_source(source_id: str, _: AdminDep, services: ServicesDep) -> JSONResponse:
    """One source: its settings, units, last sync and dead letters."""
    return _json(control.show_source(services.state(), source_id).model_dump(mode="json"))


@router.delete("/sources/{source_id}", response_model=control.SourceRemoval)
async def remove_source(
    source_id: str, _: AdminDep, services: ServicesDep, keep_items: Annotated[bool, Query()] = False
) -> JSONResponse:
    """Unregister a source and, unless `keep_items`, forget every item it stored."""
    engine = None if keep_items else services.engine()
    removal = await control.remove_source(services.state(), engine, source_id, keep_items=keep_items)
    return _json(removal.model_dump(mode="json"))


@router.post("/sources/{source_id}/sync", response_model=SyncOutcome)
async def sync_source(source_id: str, _: AdminDep, services: ServicesDep) -> JSONResponse:
    """Sync a source now: run here (embedded) or queued for the workers (distributed)."""
    outcome = await control.sync_now(services.state(), services.runner(), source_id)
    return _json(outcome.model_dump(mode="json"))


@router.get("/status", response_model=control.Status)
async def status(_: AdminDep, services: ServicesDep) -> JSONResponse:
    """Sources with their units and last sync, dead letters, (distributed) queues and workers, and the engine's
    vector backlog with its ETA."""
    vectors = await control.engine_vector_backlog(services.engine())
    return _json(control.status(services.state(), services.probe(), vectors=vectors).model_dump(mode="json"))


@router.get("/dlq")
async def dead_letters(
    _: AdminDep,
    services: ServicesDep,
    source: Annotated[str | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> JSONResponse:
    """Dead letters, newest first, each with the id its replay route takes."""
    letters = control.dead_letters(services.state(), source, limit=limit)
    return _json([{"id": control.letter_id(d), **d.model_dump(mode="json")} for d in letters])


@router.post("/dlq/{letter_id}/replay", response_model=control.Replay)
async def replay(letter_id: str, _: AdminDep, services: ServicesDep) -> JSONResponse:
    """Try one dead-lettered unit again: its letters are cleared and its source synced for it."""
    done = await control.replay_dead_letter(services.state(), services.runner(), letter_id)
    return _json(done.model_dump(mode="json"))
