"""The README's first command serves what it ingested: `make run` answers `/v1/fetch` for a word in the notes."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.fixtures.processes import served_url

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def test_make_run_serves_the_notes_it_ingested(tmp_path: Path) -> None:
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(tmp_path / "data"), "TINYMEMORY_API_PORT": "0"}
    process = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        url = served_url(process)
        response = httpx.post(f"{url}/v1/fetch", json={"query": "freeze", "mode": "keyword", "limit": 3}, timeout=10)
        assert response.status_code == 200
        hits = response.json()["hits"]
        assert hits and any("examples/notes" in (hit["meta"].get("file_path") or "") for hit in hits)
        assert httpx.get(f"{url}/readyz", timeout=10).json() == {"state": "ok"}
    finally:
        os.killpg(process.pid, signal.SIGINT)
        _, rest = process.communicate(timeout=30)
    assert "Traceback" not in rest
