"""The README's first command serves what it ingested: `make run` answers `/v1/fetch` for a word in the notes, and
by meaning once the default embedder (MiniLM) has embedded them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from tests.fixtures.processes import serving

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def test_make_run_serves_the_notes_it_ingested(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYMEMORY_")}  # a newcomer's defaults
    env.update(TINYMEMORY_DATA_DIR=str(tmp_path / "data"), TINYMEMORY_API_PORT="0")
    with serving(["make", "--no-print-directory", "run"], REPO, env) as url:
        response = httpx.post(f"{url}/v1/fetch", json={"query": "freeze", "mode": "keyword", "limit": 3}, timeout=10)
        assert response.status_code == 200
        hits = response.json()["hits"]
        assert hits and any("examples/notes" in (hit["meta"].get("file_path") or "") for hit in hits)
        assert httpx.get(f"{url}/readyz", timeout=10).json() == {"state": "ok"}
        # No word in common with "Feature freeze: Thursday 12 March" (stop words aside): found by meaning.
        deadline, found = time.monotonic() + 120, []
        while time.monotonic() < deadline and not found:
            query = {"query": "deadline to stop adding capabilities", "mode": "vector", "limit": 1}
            hits = httpx.post(f"{url}/v1/fetch", json=query, timeout=10).json()["hits"]
            found = [hit for hit in hits if hit["meta"].get("file_path", "").endswith("release-plan.md")]
            time.sleep(0.5)
        assert found, "the release plan was not found by meaning within 120 s"
