"""Operations: liveness, readiness (the engine's health) and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from engines.contract import EngineHealth
from tinymemory_ingest.api.auth import ServicesDep
from tinymemory_ingest.api.errors import RETRY_AFTER_S
from tinymemory_ingest.api.metrics import REGISTRY

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up (it says nothing of the engine)."""
    return {"status": "ok"}


@router.get("/readyz", response_model=EngineHealth, responses={503: {"description": "the engine is down"}})
async def readyz(services: ServicesDep) -> JSONResponse:
    """The engine's health: 200 while it serves (ok or degraded), 503 with the reason when it is down."""
    health = await services.engine().health()
    if health.state == "down":
        return JSONResponse(
            health.model_dump(mode="json"), status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)}
        )
    return JSONResponse(health.model_dump(mode="json"))


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics() -> PlainTextResponse:
    """The API's requests and latencies, in Prometheus's text format."""
    return PlainTextResponse(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
