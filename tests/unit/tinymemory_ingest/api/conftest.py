"""An API app over a real local engine in a temporary data directory, called in-process through httpx."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from engines.contract import Document, Learning, LearningKind, MemoryEngine, MemoryMeta, Namespace
from engines.local import LocalEngine
from tinymemory_ingest.api import create_app
from worker.control import Services
from worker.settings import Settings
from worker.state.sqlite import SqliteStateStore
from worker.token_store import TokenStore


@dataclass
class Api:
    client: httpx.AsyncClient
    engine: MemoryEngine
    settings: Settings
    tokens: TokenStore

    def token(self, name: str, **rights: object) -> dict[str, str]:
        """A new token with these rights, as the header that bears it."""
        _, token = self.tokens.add(name, **rights)  # type: ignore[arg-type]
        return {"Authorization": f"Bearer {token}"}

    async def post(self, path: str, body: object, headers: dict[str, str] | None = None) -> httpx.Response:
        return await self.client.post(path, json=body, headers=headers)


async def seed(engine: MemoryEngine) -> None:
    """A few items at three nodes: the root, user:a and user:b."""
    for place, text in (
        ("", "the root knows about zeolites"),
        ("user:a", "alice likes zeolites"),
        ("user:b", "bob likes zeolites"),
    ):
        meta = MemoryMeta(namespace=Namespace.parse(place), tags=["minerals"])
        await engine.store(Document.from_text(text, title=f"note {place or 'root'}", meta=meta))
    tabs = Learning(text="prefers tabs over spaces", kind=LearningKind.PREFERENCE, confidence=0.9)
    await engine.store(tabs.model_copy(update={"meta": MemoryMeta(namespace=Namespace.parse("user:a"))}))


@asynccontextmanager
async def open_api(tmp_path: Path, engine: MemoryEngine | None = None) -> AsyncIterator[Api]:
    """The app over `engine` (a local engine in `tmp_path` by default), seeded; everything closed after."""
    settings = Settings(data_dir=tmp_path / "data", convert_workers=1)  # type: ignore[arg-type]
    local = LocalEngine(tmp_path / "data" / "memory.sqlite3") if engine is None else None
    used = engine or local
    assert used is not None
    await seed(used)
    state = SqliteStateStore(settings.state_file)
    services = Services(settings, state=state, engine=used)
    app = create_app(settings, services)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield Api(client, used, settings, TokenStore(settings.token_path))
    services.close()
    state.close()
    if local is not None:
        local.close()


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with open_api(tmp_path) as opened:
        yield opened
