"""`CortexEngine`: the memory contract over CortexDB, on the Direct wire or the TinyHumans hosted one."""

from __future__ import annotations

from types import TracebackType

import httpx

from engines.contract import (
    EngineDescriptor,
    EngineHealth,
    EraseReport,
    EraseRequest,
    Error,
    ExportPage,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    GetRequest,
    Hit,
    Item,
    ListPage,
    ListRequest,
    MemoryEngine,
    RecallAnswer,
    RecallRequest,
    StoreReceipt,
    UnavailableError,
)
from engines.cortex.descriptor import CortexWire, descriptor_of
from engines.cortex.failures import DASH
from engines.cortex.layout import layout_for
from engines.cortex.ranked import Ranker
from engines.cortex.reads import Reader
from engines.cortex.removal import Remover
from engines.cortex.scopes import Selector
from engines.cortex.timing import Timing
from engines.cortex.transport import Transport
from engines.cortex.wire import Wire
from engines.cortex.writes import Writer
from engines.settings import EngineCredential, check_endpoint

# Aliases for annotations inside the class, where the method `list` shadows the builtin.
_Items = list[Item]
_Receipts = list[StoreReceipt]
_Hits = list[Hit]


class CortexEngine(MemoryEngine):
    """Every item is one or more events in CortexDB's append-only log, read back through listing and recall.

    One instance is shared by every task of a process: its connections are pooled per event loop. `scope_root`
    (Direct) or `tenant_root` (hosted) selects the v3 layout; without them items live under `app:tinymemory`.
    Close it with `aclose()` (or `close()` from synchronous code), or use it as an async context manager.
    """

    def __init__(
        self,
        wire: CortexWire,
        endpoint: str,
        credential: EngineCredential,
        *,
        scope_root: str | None = None,
        tenant_root: str | None = None,
        timing: Timing | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.wire_id = wire
        self.timing = timing or Timing()
        # The registry checks this too; an engine built by hand gets the same refusal (ConfigError).
        endpoint = check_endpoint(endpoint, credentialed=True)
        self._transport = Transport(wire, endpoint, credential, self.timing, client)
        self._wire = Wire(self._transport)
        layout = layout_for(wire.hosted, tenant_root if wire.hosted else scope_root)
        self._selector = Selector(self._wire, layout)
        self._writer = Writer(self._wire, layout, self.timing)
        self._reader = Reader(self._wire, layout, self._selector)
        self._ranker = Ranker(self._wire, self._selector)
        self._remover = Remover(self._wire, self._selector, self.timing)

    def __repr__(self) -> str:
        return f"CortexEngine({self.wire_id.value}, {self._transport.origin})"

    def descriptor(self) -> EngineDescriptor:
        return descriptor_of(self.wire_id)

    async def aclose(self) -> None:
        await self._transport.aclose()

    def close(self) -> None:
        self._transport.close()

    async def __aenter__(self) -> CortexEngine:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    async def health(self) -> EngineHealth:
        try:
            await self._wire.health()
        except UnavailableError as err:
            return EngineHealth.degraded(err.message.split(DASH)[0])
        except Error as err:
            return EngineHealth.down(err.message.split(DASH)[0])
        return EngineHealth.ok()

    async def store(self, item: Item) -> StoreReceipt:
        return (await self.store_many([item]))[0]

    async def store_many(self, items: _Items) -> _Receipts:
        return await self._writer.store_many(list(items))

    async def list(self, req: ListRequest) -> ListPage:
        req.check()
        return await self._reader.list(req)

    async def export(self, req: ListRequest) -> ExportPage:
        req.check()
        return await self._reader.export(req)

    async def get(self, req: GetRequest) -> _Hits:
        req.check()
        return await self._reader.get(req)

    async def fetch(self, req: FetchRequest) -> FetchPage:
        req.check()
        self.descriptor().ensure_mode(req.mode)
        return await self._ranker.fetch(req)

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        req.check()
        return await self._ranker.recall(req)

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        target.check()
        return await self._remover.forget(target)

    async def erase(self, req: EraseRequest) -> EraseReport:
        req.check()
        return await self._remover.erase(req)
