"""A running check's view of the engine: calls that turn failures into the check's errors, and listings."""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import NoReturn, TypeVar

from engines.conformance.errors import CallFailed, CheckFailed
from engines.conformance.fixtures import Identity
from engines.contract import (
    Error,
    FetchMode,
    Hit,
    ItemId,
    ListRequest,
    MemoryEngine,
    MetaFilter,
    UnsupportedError,
    WireModel,
)

_T = TypeVar("_T")

LIST_PAGE = 2
"""Page size of every listing walk: small, so that paging is exercised even on a handful of items."""

MAX_PAGES = 10_000


SHOW_CHARS = 600
"""Longest value a failure detail prints in full; a whole page or answer is cut after this."""


def show(value: object) -> str:
    """A value as a failure detail prints it: contract models in their wire JSON, the rest by repr."""
    if isinstance(value, WireModel):
        text = value.model_dump_json()
    elif isinstance(value, list | tuple):
        text = "[" + ", ".join(show(v) for v in value) + "]"
    else:
        text = repr(value)
    return text if len(text) <= SHOW_CHARS else text[:SHOW_CHARS] + "…"


class Session:
    """One engine under test, the run identity, and the name of the check in progress.

    Every engine call goes through `call` or `refused`, so a failure always names the check and
    says what was called and what came back.
    """

    def __init__(self, engine: MemoryEngine, identity: Identity, check: str = "") -> None:
        self.engine = engine
        self.identity = identity
        self.check = check
        self.step = ""
        # Ids stored at sandbox nodes: a filter never reaches them, so cleanup forgets them by id.
        self.sandbox_ids: set[ItemId] = set()

    def fail(self, detail: str) -> NoReturn:
        raise CheckFailed(self.check, self._detail(detail))

    def ensure(self, ok: bool, detail: str) -> None:
        if not ok:
            self.fail(detail)

    def expect(self, what: str, expected: object, got: object) -> None:
        if expected != got:
            self.fail(f"{what}: expected {show(expected)}, got {show(got)}")

    async def call(self, what: str, pending: Awaitable[_T]) -> _T:
        """Await a call the engine must serve; a raise fails the check."""
        try:
            return await pending
        except Error as err:
            raise CallFailed(self.check, self._detail(f"{what} raised `{err}`"), err) from err
        except Exception as err:
            # An engine maps its own failures to contract errors; anything else breaks the contract too.
            detail = f"{what} raised {type(err).__name__} ({err}), which is not a contract error"
            raise CheckFailed(self.check, self._detail(detail)) from err

    async def call_optional(self, what: str, pending: Awaitable[_T]) -> _T | None:
        """Like `call`, for an operation an engine may decline: `UnsupportedError` gives None."""
        try:
            return await self.call(what, pending)
        except CallFailed as failed:
            if isinstance(failed.error, UnsupportedError):
                return None
            raise

    async def refused(self, what: str, expected: tuple[type[Error], ...], pending: Awaitable[object]) -> Error:
        """Await a call that must raise one of `expected`; returning or raising anything else fails."""
        wanted = " or ".join(kind.__name__ for kind in expected)
        try:
            got = await pending
        except Error as err:
            if isinstance(err, expected):
                return err
            raise CheckFailed(self.check, self._detail(f"{what}: expected {wanted}, got `{err}`")) from err
        except Exception as err:
            detail = f"{what}: expected {wanted}, got {type(err).__name__} ({err})"
            raise CheckFailed(self.check, self._detail(detail)) from err
        self.fail(f"{what}: expected {wanted}, but it returned {show(got)}")

    def fetch_modes(self) -> tuple[FetchMode, ...]:
        return tuple(self.engine.descriptor().fetch_modes)

    async def list_all(self, filter: MetaFilter) -> list[Hit]:
        """Every hit `filter` admits, walking `list` two at a time through its cursors."""
        hits: list[Hit] = []
        seen: set[str] = set()
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            request = ListRequest(filter=filter, limit=LIST_PAGE, cursor=cursor)
            page = await self.call(f"list({show(request)})", self.engine.list(request))
            for hit in page.items:
                self.ensure(hit.score == 0.0, f"listed hit {hit.id} has score {hit.score}, expected 0.0")
            hits.extend(page.items)
            if page.next_cursor is None:
                return hits
            self.ensure(page.next_cursor not in seen, f"list handed out cursor {page.next_cursor!r} twice in one walk")
            seen.add(page.next_cursor)
            cursor = page.next_cursor
        self.fail(f"listing {show(filter)} did not end within {MAX_PAGES} pages")

    async def listed_ids(self, filter: MetaFilter) -> list[ItemId]:
        return [hit.id for hit in await self.list_all(filter)]

    def _detail(self, detail: str) -> str:
        return f"{self.step}: {detail}" if self.step else detail


def named(ids: Iterable[ItemId], names: dict[ItemId, str]) -> list[str]:
    """Ids as the labels a check gave them (unknown ids as themselves), sorted, for readable details."""
    return sorted(names.get(item_id, item_id) for item_id in ids)
