"""Running independent requests at once, the first failure raised only after every one has settled."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

_T = TypeVar("_T")


async def all_of(pending: Iterable[Awaitable[_T]]) -> list[_T]:
    """Every result in order; when some fail, the first failure (no request is left running behind it)."""
    results = await asyncio.gather(*pending, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]
