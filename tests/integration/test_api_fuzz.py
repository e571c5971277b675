"""Schemathesis over the API's own OpenAPI schema: no input, however odd, makes an operation fail unexpectedly.

Every operation the schema lists is called with a bounded number of generated requests (valid and invalid ones,
from a fixed seed, so a run repeats) against an app over a real local engine in a temporary folder, seeded with a
few items, a folder source and a dead letter. Each answer must be one the error table can give: no 500 (a bug),
5xx only the documented 501, 502 and 503, every error in the `{"error": {"kind", "message"}}` shape, and never a
traceback.

The admin routes are fuzzed too (no tokens file: every request is the root's), and none may reach outside that
folder. `POST /v1/sources` may configure a folder source at `/` (configuring only looks at whether the target is
there), so the sync runner is a double that runs nothing: syncing a source (`POST /v1/sources/{source_id}/sync`)
or replaying a letter (`POST /v1/dlq/{letter_id}/replay`) must not walk the filesystem. The control operations
before the runner (finding the source, parsing and clearing the letter) still run for real, and `DELETE
/v1/sources/{source_id}` forgets items of the engine in the folder only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck

from engines.local import LocalEngine
from engines.tools import TOOL_NAMES
from tests.unit.tinymemory_ingest.api.conftest import seed
from tinymemory_ingest.api import create_app
from worker.control import DeadLetter, Services, SourceRequest, SyncOutcome, add_source, letter_id
from worker.settings import Settings
from worker.state.sqlite import SqliteStateStore

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEED = 20_240_611
MAX_EXAMPLES = 50
# The statuses a contract error may answer beyond the 4xx ones: unsupported, engine, unavailable.
DOCUMENTED_5XX = frozenset({501, 502, 503})
ERROR_BODY_KEYS = {"kind", "message"}
# Without tokens the API answers only requests addressed to loopback (`tinymemory_ingest.api.auth.caller_of`).
LOOPBACK = "http://127.0.0.1"
# Without tokens every request is the root's, which may do anything: a refusal would mean the generated
# requests never got past authentication, and the routes behind it went untested.
CALLER_REFUSALS = frozenset({401, 403})


class QueuedSyncs:
    """A `SyncRunner` that runs nothing and answers `queued`, as the Celery runner does."""

    async def request_sync(self, source_id: str, hints: Sequence[str] | None = None) -> SyncOutcome:
        return SyncOutcome(source_id=source_id, status="queued")


# Values the schema cannot tell the fuzzer, drawn now and then in place of generated ones, so requests reach past
# "unknown tool" and "no such source" into the operations themselves: the real tool names, the seeded source
# and its letter, the kinds, and targets a person might mistype (an unknown user's home, a name too long for
# the filesystem, a path this process may not look into). Configuring a target only checks what is there.
SEEDED_LETTER = DeadLetter(
    source_id="notes", unit_id="bad.md", stage="convert", error="ConversionError", message="unreadable"
)
DICTIONARIES: dict[str, list[str]] = {
    "tools": sorted(TOOL_NAMES),
    "sources": ["notes", "missing"],
    "letters": [letter_id(SEEDED_LETTER), "////", "bm90ZXMfYmFkLm1k"],
    "kinds": ["folder", "file", "link", "web_page"],
    "targets": ["/", "/etc/hostname", "~", "~tinymemory-nobody/notes", "n" * 300, "/proc/1/root/notes", "\x00"],
}
BINDINGS = {
    "path.name": "tools",
    "path.source_id": "sources",
    "query.source": "sources",
    "path.letter_id": "letters",
    "body.kind": "kinds",
    "body.target": "targets",
}


def _config() -> schemathesis.Config:
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            # No example database: a run depends on the seed alone, not on what earlier runs failed on.
            "generation": {"max-examples": MAX_EXAMPLES, "database": "none"},
            "dictionaries": {name: {"values": values} for name, values in DICTIONARIES.items()},
            "parameters": {key: {"dictionary": name, "probability": 0.8} for key, name in BINDINGS.items()},
        }
    )


def _seed_state(state: SqliteStateStore, folder: Path) -> None:
    folder.mkdir()
    (folder / "plan.md").write_text("# Plan\n\nThe launch is on Friday.\n")
    add_source(state, SourceRequest(kind="folder", target=str(folder), id="notes"))
    state.add_dead_letter(SEEDED_LETTER)


def _openapi() -> dict[str, Any]:
    """The schema every app of this build serves; building the app opens nothing, so no data dir is made."""
    settings = Settings(data_dir=Path("/nonexistent/tinymemory-fuzz"))  # type: ignore[arg-type]
    return create_app(settings, Services(settings)).openapi()


@pytest.fixture(scope="module")
def fuzzed_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """One engine and state store for every operation, as a real server has: what one stores another reads."""
    root = tmp_path_factory.mktemp("fuzz")
    settings = Settings(data_dir=root / "data", convert_workers=1)  # type: ignore[arg-type]
    engine = LocalEngine(root / "data" / "memory.sqlite3")
    asyncio.run(seed(engine))
    state = SqliteStateStore(settings.state_file)
    _seed_state(state, root / "notes")
    services = Services(settings, state=state, engine=engine, runner=QueuedSyncs())
    yield services
    services.close()
    state.close()
    engine.close()


class FromLoopback:
    """The app as a loopback client reaches it. schemathesis calls an ASGI app through Starlette's test client,
    whose peer is the name `testclient`; an API without tokens answers loopback peers only."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = {**scope, "client": ("127.0.0.1", 50000)}
        await self.app(scope, receive, send)


@pytest.fixture
def fuzzed_app(fuzzed_services: Services) -> FromLoopback:
    # An app per operation: schemathesis ends an app's lifespan after each test, and the MCP session manager
    # the app runs in its lifespan starts only once.
    return FromLoopback(create_app(fuzzed_services.settings, fuzzed_services))


# Loaded at import from the schema dict, and each case sent to the app the fixture builds: the loader that would
# build the schema from a fixture (`schemathesis.pytest.from_fixture`) fails on pytest 9.2 in schemathesis 4.32
# (it sets `Function._nodeid`, which pytest no longer has).
schema = schemathesis.openapi.from_dict(_openapi(), config=_config())


def _problems(status: int, body: bytes, content_type: str) -> list[str]:
    """What is wrong with an answer. (`/readyz` would answer 503 with the engine's health rather than an error,
    but the local engine here is up, so that too would be a problem.)"""
    problems = []
    if status >= 500 and status not in DOCUMENTED_5XX:
        problems.append(f"status {status} is not one the error table gives")
    if status in CALLER_REFUSALS:
        problems.append(f"status {status}: the root was refused, so the route behind it was never reached")
    if b"Traceback" in body:
        problems.append("the body carries a traceback")
    if status >= 400 and not _is_error_body(body, content_type):
        problems.append("an error whose body is not {'error': {'kind', 'message'}}")
    return problems


def _is_error_body(body: bytes, content_type: str) -> bool:
    if not content_type.startswith("application/json"):
        return False
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return False
    if not isinstance(parsed, dict) or set(parsed) != {"error"} or not isinstance(parsed["error"], dict):
        return False
    error = parsed["error"]
    return set(error) == ERROR_BODY_KEYS and all(isinstance(error[key], str) for key in ERROR_BODY_KEYS)


@pytest.mark.timeout(120)
@schema.parametrize()
# The app fixture is per operation on purpose (see `fuzzed_app`); every generated request of one operation
# shares it, which is what a server does.
@hypothesis.settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_operation_answers_an_undocumented_failure(case: schemathesis.Case, fuzzed_app: FromLoopback) -> None:
    response = case.call(base_url=LOOPBACK, app=fuzzed_app)
    problems = _problems(response.status_code, response.content, response.headers.get("content-type", [""])[0])
    assert not problems, f"{case.method} {case.formatted_path}: {problems}\n{response.status_code} {response.text}"
