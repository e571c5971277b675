"""Every contract error answers from one table; nothing unexpected leaks a trace or a credential."""

from __future__ import annotations

from pathlib import Path

import pytest

from engines.contract import (
    ConflictError,
    EngineError,
    EngineHealth,
    Error,
    FetchPage,
    FetchRequest,
    NotFoundError,
    UnauthorizedError,
    UnavailableError,
    UnsupportedError,
)
from engines.reference import ReferenceEngine
from tests.unit.tinymemory_ingest.api.conftest import open_api
from tinymemory_ingest.api.metrics import REGISTRY


class FailingEngine(ReferenceEngine):
    """Raises `failure` from fetch, and reports `health` (down or ok)."""

    def __init__(self) -> None:
        super().__init__()
        self.failure: Exception | None = None
        self.state = EngineHealth.ok()

    async def fetch(self, req: FetchRequest) -> FetchPage:
        if self.failure is not None:
            raise self.failure
        return await super().fetch(req)

    async def health(self) -> EngineHealth:
        return self.state


@pytest.mark.parametrize(
    ("failure", "status", "kind"),
    [
        (UnauthorizedError("the engine's key was refused"), 401, "unauthorized"),
        (NotFoundError("no such item"), 404, "not_found"),
        (ConflictError("it changed meanwhile"), 409, "conflict"),
        (UnsupportedError("engine does not offer vector fetch"), 501, "unsupported"),
        (UnavailableError("the engine is restarting"), 503, "unavailable"),
        (EngineError("the engine failed"), 502, "engine"),
    ],
)
async def test_each_contract_error_has_its_status(tmp_path: Path, failure: Error, status: int, kind: str) -> None:
    engine = FailingEngine()
    engine.failure = failure
    async with open_api(tmp_path, engine) as api:
        response = await api.post("/v1/fetch", {"query": "x", "mode": "keyword", "limit": 3})
    assert response.status_code == status
    assert response.json() == {"error": {"kind": kind, "message": failure.message}}
    assert ("retry-after" in response.headers) is (status == 503)


async def test_an_unexpected_failure_is_a_bare_500(tmp_path: Path) -> None:
    engine = FailingEngine()
    engine.failure = RuntimeError("password=hunter2 in a bug's message")
    async with open_api(tmp_path, engine) as api:
        response = await api.post("/v1/fetch", {"query": "x", "mode": "keyword", "limit": 3})
    assert response.status_code == 500
    assert response.json()["error"]["kind"] == "internal"
    assert "hunter2" not in response.text and "Traceback" not in response.text


async def test_readiness_follows_the_engines_health(tmp_path: Path) -> None:
    engine = FailingEngine()
    async with open_api(tmp_path, engine) as api:
        assert (await api.client.get("/readyz")).json() == {"state": "ok"}
        engine.state = EngineHealth.degraded("rate limited")
        degraded = await api.client.get("/readyz")
        assert degraded.status_code == 200 and degraded.json()["state"] == "degraded"
        engine.state = EngineHealth.down("connection refused")
        down = await api.client.get("/readyz")
        assert down.status_code == 503 and down.json() == {"state": "down", "reason": "connection refused"}
        assert (await api.client.get("/healthz")).status_code == 200


async def test_metrics_count_requests_by_route(tmp_path: Path) -> None:
    def counted(route: str, status: int) -> float:
        value = REGISTRY.get_sample_value("tinymemory_api_requests_total", {"route": route, "status": str(status)})
        return value or 0.0

    before = {key: counted(*key) for key in (("/healthz", 200), ("/readyz", 503), ("unmatched", 404))}
    engine = FailingEngine()
    async with open_api(tmp_path, engine) as api:
        await api.client.get("/healthz")
        await api.client.get("/healthz")
        engine.state = EngineHealth.down("connection refused")
        await api.client.get("/readyz")
        await api.client.get("/no/such/route")
        text = (await api.client.get("/metrics")).text
    assert 'tinymemory_api_requests_total{route="/healthz",status="200"}' in text
    after = {key: counted(*key) - before[key] for key in before}
    assert after == {("/healthz", 200): 2.0, ("/readyz", 503): 1.0, ("unmatched", 404): 1.0}
