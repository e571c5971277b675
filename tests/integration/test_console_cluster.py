"""The console in distributed mode: a folder added from the console is queued for a real Celery worker, its
run is counted on Redis by the workers and drawn on the progress page with the queues, and what the worker
stored is searchable from the console."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.cluster import Cluster, cluster_fixture, write_notes
from tinymemory_ingest.api import create_app
from worker.control import Services

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

cluster = pytest.fixture(cluster_fixture)
NOTES = 60


@pytest.fixture
def services(cluster: Cluster) -> Iterator[Services]:
    with Services(cluster.settings()) as opened:
        yield opened


async def test_a_folder_added_in_the_console_is_backfilled_by_the_workers_live(
    cluster: Cluster, services: Services, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    write_notes(folder, NOTES, words="heron")
    cluster.start_worker()
    app = create_app(cluster.settings(), services)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        page = await client.get("/sources")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        added = await client.post(
            "/sources", data={"csrf": csrf, "kind": "folder", "target": str(folder), "id": "herons"}
        )
        assert added.status_code == 303 and added.headers["location"] == "/progress"
        live = await client.get("/progress/live")
        assert 'data-queue="tm.sync"' in live.text and 'data-queue="tm.ingest"' in live.text
        deadline = time.monotonic() + 120
        while 'data-finished="true"' not in live.text and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            live = await client.get("/progress/live")
        assert re.search(r'<strong>herons</strong>\s*<span class="state">done</span>', live.text), live.text
        assert f"{NOTES} of {NOTES} units" in live.text and 'value="100"' in live.text
        cluster.wait_done("herons", NOTES)
        sources = await client.get("/sources")
        assert re.search(rf'<td class="num">{NOTES}</td>', sources.text)  # items, from the workers' manifest
        found = await client.get("/search", params={"q": "tokenheron7x", "mode": "keyword"})
        assert "heron-00007.md" in found.text
