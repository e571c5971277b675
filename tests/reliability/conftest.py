"""What every reliability test shares: its figures printed past pytest's capture (`figures`), a reading of
everything an engine stored, and a wait that lets the event loop run."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable

import pytest

from engines.contract import Hit, ListRequest, MemoryEngine
from tests.reliability.figures import print_figures

Figures = Callable[..., None]


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """`print_figures` for the requesting test."""
    return functools.partial(print_figures, request)


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
