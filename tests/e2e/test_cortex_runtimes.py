"""The product on CortexDB: `TINYMEMORY_ENGINE=cortexdb` with an endpoint and a key runs the embedded runtime, the API,
`tinymemory up` and real Celery workers unchanged, each storing into (and reading from) the CortexDB double.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from engines.contract import ListRequest, MetaFilter
from engines.cortex import CortexEngine
from engines.cortex.envelope import decode
from engines.settings import EngineSettings
from sources import SourceRequest
from tests.fixtures.processes import served_url
from tests.integration.cluster import Cluster, cluster_fixture, write_notes
from tinymemory_ingest.api import create_app
from tinymemory_ingest.cortex_double import CortexDouble, DoubleConfig, serve
from worker import control
from worker.embedded import EmbeddedRuntime
from worker.settings import Settings
from worker.wiring import open_engine

KEY = "e2e-cortex-key"


@pytest.fixture
def double() -> Iterator[tuple[CortexDouble, str]]:
    served = CortexDouble(DoubleConfig())
    with serve(served) as url:
        yield served, url


def held_items(double: CortexDouble) -> dict[str, str]:
    """Item id -> text of every live document the double holds, read from its own log (one event each here)."""
    items: dict[str, str] = {}
    for record in double.events():
        envelope = decode(record.text, record.labels)
        assert envelope is not None, record
        assert envelope.id not in items, f"item {envelope.id} is held twice"
        items[envelope.id] = envelope.text
    return items


def cortex_env(url: str) -> dict[str, str]:
    return {
        "TINYMEMORY_ENGINE": "cortexdb",
        "TINYMEMORY_ENGINES__CORTEXDB__ENDPOINT": url,
        "TINYMEMORY_ENGINE_KEY": KEY,
    }


@pytest.mark.e2e
async def test_the_embedded_runtime_and_the_api_on_cortexdb(tmp_path: Path, double: tuple[CortexDouble, str]) -> None:
    served, url = double
    settings = Settings(
        data_dir=tmp_path / "data",  # type: ignore[arg-type]
        convert_workers=1,
        engine="cortexdb",
        engines={"cortexdb": EngineSettings(endpoint=url)},
        engine_key=SecretStr(KEY),
    )
    engine = open_engine(settings)
    assert isinstance(engine, CortexEngine) and KEY not in json.dumps(settings.printable())
    folder = tmp_path / "notes"
    write_notes(folder, 30)
    try:
        with EmbeddedRuntime(settings, engine=engine) as runtime:
            entry = control.add_source(runtime.state, SourceRequest(kind="folder", target=str(folder)))
            report, batches = await runtime.sync(entry.id)
            assert report.upserts == 30 and sum(b.stored for b in batches) == 30
            assert len(held_items(served)) == 30
            page = await engine.list(ListRequest(filter=MetaFilter(source_id=entry.id), limit=100))
            assert len(page.items) == 30 and all("/" not in (hit.meta.file_path or "") for hit in page.items)
            assert str(tmp_path) not in json.dumps([r.body for r in served.requests if r.body is not None])

            (folder / "d01" / "note-00001.md").write_text("# note 1\n\nrewritten with a quetzal\n")
            (folder / "d02" / "note-00002.md").unlink()
            changed, _ = await runtime.sync(entry.id)
            assert (changed.upserts, changed.deletes) == (1, 1)
            texts = held_items(served).values()
            assert len(texts) == 29 and any("quetzal" in text for text in texts)
            assert not any("token" + "note2x" in text for text in texts)

            services = control.Services(settings, state=runtime.state, engine=engine)
            app = create_app(settings, services)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
                found = await client.post("/v1/fetch", json={"query": "quetzal", "mode": "hybrid", "limit": 3})
                assert found.status_code == 200 and "quetzal" in found.json()["hits"][0]["text"]
                refused = await client.post("/v1/fetch", json={"query": "quetzal", "mode": "keyword", "limit": 3})
                assert refused.status_code >= 400
    finally:
        await engine.aclose()


@pytest.mark.e2e
def test_up_serves_what_it_stored_in_cortexdb(tmp_path: Path, double: tuple[CortexDouble, str]) -> None:
    served, url = double
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "first.md").write_text("the gnuffle note\n")
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(tmp_path / "data"), "TINYMEMORY_API_PORT": "0", **cortex_env(url)}
    tinymemory = str(Path(sys.executable).parent / "tinymemory")
    child = subprocess.Popen(
        [tinymemory, "up", str(folder)], env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        api = served_url(child)
        hits = httpx.post(f"{api}/v1/fetch", json={"query": "gnuffle", "mode": "hybrid", "limit": 3}, timeout=30)
        assert hits.status_code == 200 and "the gnuffle note" in hits.json()["hits"][0]["text"]
        assert not (tmp_path / "data" / "memory.sqlite3").exists()  # nothing of the engine is kept on this machine
        (folder / "second.md").write_text("a snorkwhistle idea\n")
        deadline = time.monotonic() + 20
        while not any("snorkwhistle" in text for text in held_items(served).values()):
            assert time.monotonic() < deadline, "the watched change never reached CortexDB"
            time.sleep(0.1)
    finally:
        os.killpg(child.pid, signal.SIGINT)
        _, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert "Traceback" not in err and KEY not in err


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


@pytest.mark.e2e
@pytest.mark.integration
@pytest.mark.slow
def test_celery_workers_on_cortexdb(cluster: Cluster, tmp_path: Path, double: tuple[CortexDouble, str]) -> None:
    served, url = double
    cluster.extra_env.update(cortex_env(url))
    folder = tmp_path / "notes"
    write_notes(folder, 150)
    cluster.add_folder("notes", folder)
    cluster.start_worker()
    cluster.start_worker()
    assert cluster.sync("notes")
    cluster.wait_done("notes", 150, within_s=120)
    assert len(held_items(served)) == 150
    (folder / "d03" / "note-00003.md").write_text("# note 3\n\nnow about axolotls\n")
    (folder / "d04" / "note-00004.md").unlink()
    assert cluster.sync("notes")
    cluster.wait(lambda: cluster.committed("notes") == 149 and cluster.idle(), 60, "the change")
    cluster.wait(lambda: len(held_items(served)) == 149, 30, "the old copies forgotten")
    texts = list(held_items(served).values())
    assert sum("axolotls" in text for text in texts) == 1
    assert cluster.state().dead_letters("notes") == []
    assert not (cluster.data_dir / "memory.sqlite3").exists()
