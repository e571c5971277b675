"""The web console, served by the API at `/`: sources, live progress, dead letters, erasures, search, explore.

Server-rendered (Jinja2) pages with plain forms, so it works with JavaScript off; a little script redraws
the progress page live. No build step: the templates and static files ship in the package. It reads and acts
through `worker.control` and the engine, with the API's own tokens (`tinymemory_ingest.api.console.session`).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from tinymemory_ingest.api.console import actions, pages, reading
from tinymemory_ingest.api.console.session import Keys

STATIC = Path(__file__).parent / "static"


def install(app: FastAPI) -> None:
    """Serve the console's pages, actions and static files from `app`."""
    app.state.console_keys = Keys()
    for router in (pages.router, reading.router, actions.router):
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
