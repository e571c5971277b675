"""What every reliability test shares: a way to print its figures past pytest's capture, so that a passing
run shows them too, and a reading of everything an engine stored."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable

import pytest

from engines.contract import Hit, ListRequest, MemoryEngine

Figures = Callable[..., None]


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """Print lines of figures under the test's name, even while pytest captures the output: on stderr, which
    an xdist worker shares with the terminal (its stdout is not the terminal's)."""
    capman = request.config.pluginmanager.getplugin("capturemanager")

    def say(line: str, *details: str) -> None:
        with capman.global_and_fixture_disabled():
            print(
                f"\n[reliability] {request.node.name}: {line}",
                *(f"    {d}" for d in details),
                sep="\n",
                file=sys.stderr,
                flush=True,
            )

    return say


async def every_item(engine: MemoryEngine, page: int = 500) -> list[Hit]:
    """Every item the engine holds, read `page` at a time through its cursor."""
    hits: list[Hit] = []
    cursor = None
    while True:
        listed = await engine.list(ListRequest(limit=page, cursor=cursor))
        hits.extend(listed.items)
        if listed.next_cursor is None:
            return hits
        cursor = listed.next_cursor


async def until(condition: Callable[[], bool], within_s: float, what: str) -> None:
    """Wait, letting the event loop run, until `condition()` holds; fails naming `what` after `within_s`."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {within_s} s")
        await asyncio.sleep(0.002)
