"""`POST /v1/legacy-imports` and `GET /v1/legacy-imports[/{id}]`: admin only, answered at once, followed by id."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.fixtures.legacy_workspace import sample_workspace
from tests.unit.tinymemory_ingest.api.conftest import Api


async def _finished(api: Api, import_id: str) -> dict[str, Any]:
    for _ in range(300):
        body: dict[str, Any] = (await api.client.get(f"/v1/legacy-imports/{import_id}")).json()
        if body["status"] in ("completed", "failed"):
            return body
        await asyncio.sleep(0.02)
    raise AssertionError(f"legacy import {import_id} did not finish")


async def test_an_import_is_started_and_followed(api: Api, tmp_path: Path) -> None:
    ws = sample_workspace(tmp_path / "v1")
    started = await api.post("/v1/legacy-imports", {"path": str(ws.root), "namespace": "team:acme"})
    assert started.status_code == 202, started.text
    record = started.json()
    assert started.headers["location"] == f"/v1/legacy-imports/{record['id']}"
    done = await _finished(api, record["id"])
    assert (done["status"], done["stored"], done["namespace"]) == ("completed", 17, "team:acme")
    listed = (await api.client.get("/v1/legacy-imports")).json()
    assert [r["id"] for r in listed] == [record["id"]]


async def test_refusals(api: Api, tmp_path: Path) -> None:
    assert (await api.client.get("/v1/legacy-imports/legacy-0000000000000000")).status_code == 404
    bad = await api.post("/v1/legacy-imports", {"path": str(tmp_path)})
    assert bad.status_code == 202
    done = await _finished(api, bad.json()["id"])
    assert done["status"] == "failed" and "not a v1 workspace" in done["error"]
    assert (await api.post("/v1/legacy-imports", {"path": str(tmp_path), "namespace": "x:y"})).status_code == 400
