"""`MemoryTools`: the seven memory tools over any engine, under a scope the host fixes
(docs/spec/tools-and-context.md §1–6)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from engines.contract import (
    FetchMode,
    ForgetTarget,
    InvalidRequestError,
    ItemId,
    MemoryEngine,
    Namespace,
    Reach,
    StoreItem,
    UnsupportedError,
)
from engines.tools import names, render
from engines.tools.arguments import Arguments, check, decode, refuse_fixed_keys
from engines.tools.builder import RequestBuilder
from engines.tools.names import MEMORY_FETCH, TOOL_NAMES, WRITE_TOOL_NAMES
from engines.tools.schemas import JsonObject, parameters
from engines.tools.scope import ToolScope
from engines.tools.spec import ToolSpec, served_modes, tool_specs

Clock = Callable[[], datetime]
"""Returns the current instant (UTC); what `memory_store` records as `observed_at`."""

Prepare = Callable[[StoreItem], StoreItem]
"""What the host does to an item a model stores, before it is stored (the product's pipeline scrubs it)."""

_UNKNOWN_TOOL = "unknown tool `{name}`; the memory tools are " + ", ".join(TOOL_NAMES)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _as_is(item: StoreItem) -> StoreItem:
    return item


class MemoryTools:
    """The tools a model calls, with no tool runtime or LLM library behind them.

    The model never chooses whose memory it touches: writes land at `scope.place`, every read is
    confined to `scope.reach`, and `namespace` or `reach` in the arguments is refused. Instances are
    immutable; the builders return new tools. `zone` is the IANA zone `refers_to` days are read in
    (None: UTC); `clock` gives the time stored items are observed at; `prepare` is applied to every item
    `memory_store` stores (its id is computed after, from what is stored).
    """

    def __init__(
        self,
        engine: MemoryEngine,
        scope: ToolScope | None = None,
        *,
        zone: str | None = None,
        clock: Clock | None = None,
        prepare: Prepare | None = None,
    ) -> None:
        self._engine = engine
        self._scope = scope if scope is not None else ToolScope.default()
        self._zone = zone
        self._clock = clock or _utc_now
        self._prepare = prepare or _as_is
        self._build = RequestBuilder(self._scope, zone)

    @property
    def engine(self) -> MemoryEngine:
        return self._engine

    @property
    def scope(self) -> ToolScope:
        return self._scope

    def with_scope(self, scope: ToolScope) -> MemoryTools:
        """The same tools under another scope."""
        return MemoryTools(self._engine, scope, zone=self._zone, clock=self._clock, prepare=self._prepare)

    def placed_at(self, place: Namespace) -> MemoryTools:
        """Writes at `place`, reads of `place` and its ancestors (`Reach.of(place)`)."""
        return self.with_scope(replace(self._scope, place=place, reach=Reach.of(place)))

    def with_reach(self, reach: Reach | None) -> MemoryTools:
        """Reads confined to `reach` (None: the root's subtree without sandboxes); the place is kept."""
        return self.with_scope(replace(self._scope, reach=reach))

    def read_only(self) -> MemoryTools:
        """The same tools without `memory_store` and `memory_forget`."""
        return self.with_scope(replace(self._scope, writes=False))

    def _modes(self) -> list[FetchMode]:
        # Read on every use, so the tools follow what the engine offers now.
        return served_modes(self._engine.descriptor().fetch_modes)

    def specs(self) -> list[ToolSpec]:
        """The tools to offer a model, in `TOOL_NAMES` order: no write tools when read-only, no
        `memory_fetch` when the engine serves no fetch mode, and its `mode` lists exactly those served."""
        return tool_specs(self._modes(), self._scope.writes)

    async def call(self, name: str, args: Arguments) -> str:
        """Run tool `name` with the model's arguments and return the result as compact JSON.

        Refusals are `InvalidRequestError` (unknown tool, bad arguments) or `UnsupportedError` (no
        fetch mode; a write on read-only tools, refused before the arguments are read). Contract
        errors raised by the engine propagate unchanged.
        """
        modes = self._modes()
        if name not in TOOL_NAMES:
            raise InvalidRequestError(_UNKNOWN_TOOL.format(name=name))
        if name == MEMORY_FETCH and not modes:
            raise UnsupportedError(f"{MEMORY_FETCH}: this memory offers no fetch mode")
        if name in WRITE_TOOL_NAMES and not self._scope.writes:
            raise UnsupportedError(f"{name}: these memory tools are read-only")
        given = decode(name, args)
        refuse_fixed_keys(name, given)
        checked = check(name, parameters(name, modes), given)
        return render.compact(await self._run(name, checked, modes))

    async def _run(self, name: str, args: JsonObject, modes: list[FetchMode]) -> JsonObject:
        engine, build = self._engine, self._build
        match name:
            case names.MEMORY_RECALL:
                return render.recalled(await engine.recall(build.recall(args)))
            case names.MEMORY_FETCH:
                found = await engine.fetch(build.fetch(args, modes))
                return render.page("hits", found.hits, found.next_cursor)
            case names.MEMORY_LIST:
                listed = await engine.list(build.list(args))
                return render.page("items", listed.items, listed.next_cursor)
            case names.MEMORY_GET:
                return render.got(args["ids"], await engine.get(build.get(args["ids"])))
            case names.MEMORY_EXPLORE:
                return render.explored(await engine.explore(build.explore(args)))
            case names.MEMORY_STORE:
                return render.stored(await engine.store(self._prepare(build.item(args, self._clock()))))
            case _:  # memory_forget, the last of the seven: `call` refused every other name
                return await self._forget(args)

    async def _forget(self, args: JsonObject) -> JsonObject:
        if "filter" in args:
            report = await self._engine.forget(ForgetTarget.by_filter(self._build.filter(args)))
            return render.forgot(report.forgotten, [])
        ids: list[ItemId] = args["ids"]
        # Forget by ids reaches every node, so the ids are first read back under the scope's reach:
        # an id the model cannot see is skipped, never forgotten.
        wanted = set(ids)
        hits = await self._engine.get(self._build.get(ids))
        found = list(dict.fromkeys(hit.id for hit in hits if hit.id in wanted))
        forgotten = 0
        if found:
            forgotten = (await self._engine.forget(ForgetTarget.by_ids(found))).forgotten
        seen = set(found)
        return render.forgot(forgotten, [i for i in ids if i not in seen])
