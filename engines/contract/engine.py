"""`MemoryEngine`, the interface every engine implements, with its descriptor and health."""

from __future__ import annotations

import abc
from typing import ClassVar, Literal, Self

from pydantic import ConfigDict, model_validator

from engines.contract.enums import FetchMode
from engines.contract.errors import InvalidRequestError, UnsupportedError
from engines.contract.explore import (
    ExplorePage,
    ExploreRequest,
    GetRequest,
    explore_by_listing,
    forget_within_by_get,
    get_by_listing,
)
from engines.contract.items import Conversation, Document, ItemId, Learning, StoreReceipt
from engines.contract.limits import MAX_STORE_MANY
from engines.contract.namespace import Reach
from engines.contract.query import (
    EraseReport,
    EraseRequest,
    ExportPage,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    Hit,
    ListPage,
    ListRequest,
    RecallAnswer,
    RecallRequest,
)
from engines.contract.serialization import Text, WireModel

Item = Document | Conversation | Learning

# Aliases used inside MemoryEngine, where the method `list` shadows the builtin for annotations.
_Items = list[Item]
_ItemIds = list[ItemId]
_Hits = list[Hit]
_Receipts = list[StoreReceipt]


class EngineDescriptor(WireModel):
    """What an engine is and offers. Hosts read `fetch_modes` and never offer an unlisted mode."""

    model_config = ConfigDict(frozen=True)

    id: str
    label: str
    description: str
    hosted: bool = False
    needs_endpoint: bool = False
    needs_key: bool = False
    default_endpoint: str | None = None
    fetch_modes: tuple[FetchMode, ...] = ()

    def supports(self, mode: FetchMode) -> bool:
        return mode in self.fetch_modes

    def ensure_mode(self, mode: FetchMode) -> None:
        if mode not in self.fetch_modes:
            raise UnsupportedError(f"engine does not offer {mode.value} fetch")


class EngineHealth(WireModel):
    """Whether an engine can serve now: ok, degraded (serving, impaired) or down, with a reason."""

    model_config = ConfigDict(frozen=True)

    state: Literal["ok", "degraded", "down"]
    reason: Text | None = None

    @model_validator(mode="after")
    def _reason_matches_state(self) -> Self:
        if (self.state == "ok") != (self.reason is None):
            raise ValueError("a degraded or down health needs a reason, and ok takes none")
        return self

    @classmethod
    def ok(cls) -> EngineHealth:
        return cls(state="ok")

    @classmethod
    def degraded(cls, reason: str) -> EngineHealth:
        return cls(state="degraded", reason=reason)

    @classmethod
    def down(cls, reason: str) -> EngineHealth:
        return cls(state="down", reason=reason)

    def is_serving(self) -> bool:
        return self.state != "down"


def validate_many(items: list[Item]) -> None:
    """The batch rule of `store_many`: 1..100 items, each passing its own `check()`."""
    if not 1 <= len(items) <= MAX_STORE_MANY:
        raise InvalidRequestError(f"store_many takes between 1 and {MAX_STORE_MANY} items")
    for item in items:
        item.check()


class MemoryEngine(abc.ABC):
    """A memory engine. Hosts share one instance between tasks.

    Every method checks its request first with the request's `check()`, so every engine refuses
    the same malformed call with the same `InvalidRequestError`; `fetch` then calls
    `descriptor().ensure_mode`. Engine-specific failures are raised as the contract's error kinds,
    and only `UnavailableError` is worth retrying.
    """

    stores_in_process: ClassVar[bool] = False
    """Whether `store_many` is work of this process's CPU (Python, an embedded database) rather than a wait on
    a server. A host then has nothing to gain by preparing its next batch while a store runs: the two only take
    turns on the GIL, and the store's writing thread waits for it after every database step."""

    @abc.abstractmethod
    def descriptor(self) -> EngineDescriptor: ...

    @abc.abstractmethod
    async def health(self) -> EngineHealth:
        """Never raises: trouble is reported as degraded or down."""

    @abc.abstractmethod
    async def recall(self, req: RecallRequest) -> RecallAnswer:
        """An answer to `req.question` citing at most `req.limit` items, each resolvable through `list`."""

    @abc.abstractmethod
    async def fetch(self, req: FetchRequest) -> FetchPage:
        """Ranked raw retrieval over the admitted items, best first; no synthesis."""

    @abc.abstractmethod
    async def store(self, item: Item) -> StoreReceipt:
        """Keep `item` under `item.fingerprint()`; an item already held is a replay and changes nothing."""

    @abc.abstractmethod
    async def forget(self, target: ForgetTarget) -> ForgetReport:
        """Remove by ids (every node, sandboxes included) or by a non-empty filter."""

    @abc.abstractmethod
    async def list(self, req: ListRequest) -> ListPage:
        """Query-free paging in a stable order; scores are 0.0; a cursor is never handed out twice."""

    async def forget_within(self, ids: _ItemIds, reach: Reach) -> ForgetReport:
        """Remove the named ids that lie within `reach`, looking nowhere else."""
        return await forget_within_by_get(self, ids, reach)

    async def store_many(self, items: _Items) -> _Receipts:
        """Store 1..100 items in order; a repeat within the batch is a replay of its first copy.

        On an error the earlier items stay stored, and sending the batch again replays them.
        """
        validate_many(items)
        return [await self.store(item) for item in items]

    async def explore(self, req: ExploreRequest) -> ExplorePage:
        return await explore_by_listing(self, req)

    async def get(self, req: GetRequest) -> _Hits:
        """Items whole, in the order named; unknown ids and ids beyond the reach are left out."""
        return await get_by_listing(self, req)

    async def export(self, req: ListRequest) -> ExportPage:
        """Pages like `list`, handing each item back whole as it was stored."""
        req.check()
        raise UnsupportedError("engine does not export memory")

    async def erase(self, req: EraseRequest) -> EraseReport:
        """Delete for good; an erased item stored again is new. Callers refused fall back to forget."""
        req.check()
        raise UnsupportedError("engine does not erase memory")


__all__ = [
    "EngineDescriptor",
    "EngineHealth",
    "Item",
    "MemoryEngine",
    "validate_many",
]
