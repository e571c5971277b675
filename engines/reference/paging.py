"""Decimal-offset cursors, as the reference engine pages `list`, `fetch` and `export`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar

from engines.contract import InvalidRequestError

_Row = TypeVar("_Row")

_CANONICAL = re.compile(r"0|[1-9][0-9]*")

# Longer decimal strings name offsets no in-memory store reaches; they also exceed what int() parses.
_MAX_DIGITS = 18
_PAST_END: int = 10**_MAX_DIGITS


def cursor_offset(cursor: str | None) -> int:
    """The offset a cursor names: None is the start; only `0` or a decimal without a leading zero is ours."""
    if cursor is None:
        return 0
    if _CANONICAL.fullmatch(cursor) is None:
        raise InvalidRequestError(f"unknown cursor `{cursor}`")
    if len(cursor) > _MAX_DIGITS:
        return _PAST_END
    return int(cursor)


def window(rows: Sequence[_Row], start: int, limit: int) -> tuple[list[_Row], str | None]:
    """At most `limit` rows from `start`, and the cursor of the next row when any remain."""
    chunk = list(rows[start : start + limit])
    end = start + len(chunk)
    return chunk, (str(end) if end < len(rows) else None)
