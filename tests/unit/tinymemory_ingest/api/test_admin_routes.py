"""Admin routes through `worker.control`: sources, sync, status and dead letters over HTTP."""

from __future__ import annotations

from pathlib import Path

from tests.unit.tinymemory_ingest.api.conftest import Api


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "plan.md").write_text("# Plan\n\nThe quarzite launch is on Friday.\n")
    (folder / "bad.md").write_bytes(b"\xff\xfe not text")
    return folder


async def test_a_source_is_added_synced_shown_and_removed(api: Api, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    added = await api.post("/v1/sources", {"kind": "folder", "target": str(folder), "id": "notes"})
    assert added.status_code == 201 and added.json()["id"] == "notes"
    assert [s["id"] for s in (await api.client.get("/v1/sources")).json()] == ["notes"]
    synced = await api.client.post("/v1/sources/notes/sync")
    assert synced.status_code == 200 and synced.json()["status"] == "synced"
    assert synced.json()["report"]["upserts"] == 2
    shown = (await api.client.get("/v1/sources/notes")).json()
    assert (shown["units"], shown["dead_letters"]) == (1, 1)
    hits = (await api.post("/v1/fetch", {"query": "quarzite", "mode": "keyword", "limit": 5})).json()["hits"]
    assert len(hits) == 1
    removed = await api.client.delete("/v1/sources/notes")
    assert removed.json() == {"source_id": "notes", "forgotten": 1, "kept_items": False}
    assert (await api.post("/v1/fetch", {"query": "quarzite", "mode": "keyword", "limit": 5})).json()["hits"] == []


async def test_refusals_are_contract_errors(api: Api, tmp_path: Path) -> None:
    missing = await api.post("/v1/sources", {"kind": "folder", "target": str(tmp_path / "gone")})
    assert missing.status_code == 404 and "does not exist" in missing.json()["error"]["message"]
    refused = await api.post("/v1/sources", {"kind": "link", "target": "ftp://example.com/"})
    assert refused.status_code == 400 and "http or https" in refused.json()["error"]["message"]
    unknown = await api.post("/v1/sources", {"kind": "telepathy", "target": "x"})
    assert unknown.status_code == 400 and "unknown source kind" in unknown.json()["error"]["message"]
    shapeless = await api.post("/v1/sources", {"kind": "folder", "target": "/x", "glob": "*.md"})
    assert shapeless.status_code == 422
    assert (await api.client.post("/v1/sources/nope/sync")).status_code == 404


async def test_a_dead_letter_is_listed_with_its_id_and_replayed(api: Api, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    await api.post("/v1/sources", {"kind": "folder", "target": str(folder), "id": "notes"})
    await api.client.post("/v1/sources/notes/sync")
    (letter,) = (await api.client.get("/v1/dlq")).json()
    assert (letter["unit_id"], letter["stage"]) == ("bad.md", "convert")
    (folder / "bad.md").write_text("fixed: readable now\n")
    replayed = await api.client.post(f"/v1/dlq/{letter['id']}/replay")
    assert replayed.status_code == 200 and replayed.json()["units"] == ["bad.md"]
    assert (await api.client.get("/v1/dlq")).json() == []
    status = (await api.client.get("/v1/status")).json()
    assert (status["dead_letters"], status["sources"][0]["units"]) == (0, 2)
    unknown = await api.client.post(f"/v1/dlq/{letter['id']}/replay")
    assert unknown.status_code == 404
    assert (await api.client.post("/v1/dlq/not-an-id/replay")).status_code == 400
