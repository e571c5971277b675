"""Which kind scopes a read, a forget or an erase touches (docs/spec/cortexdb.md §10.4).

A reach without descendants names its nodes outright; a subtree reach, an unscoped read, a forget by id, an erase
and an export discover nodes from the server's scope listing, which has no cursor: a listing of 1000 paths or
more may be incomplete, so a read goes on with a warning and an export refuses.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from engines.contract import EngineError, ItemKind, MetaFilter, Namespace, Reach
from engines.cortex.layout import KindScope, Layout
from engines.cortex.wire import SCOPES_LIMIT, Wire

logger = logging.getLogger(__name__)

ALL_KINDS = (ItemKind.DOCUMENT, ItemKind.CONVERSATION, ItemKind.LEARNING)
_ROOT_SUBTREE = Reach.subtree(Namespace.ROOT)


@dataclass(frozen=True)
class Discovered:
    """The kind scopes the server listed under a prefix, and whether the listing may be cut short."""

    scopes: list[KindScope]
    truncated: bool
    prefix: str | None


def kinds_of(filter: MetaFilter) -> list[ItemKind]:
    return [kind for kind in ALL_KINDS if filter.admits_kind(kind)]


class Selector:
    """Resolves filters and reaches to kind scopes for one engine's wire and layout."""

    def __init__(self, wire: Wire, layout: Layout) -> None:
        self.wire = wire
        self.layout = layout

    async def discover(self, at: Namespace = Namespace.ROOT) -> Discovered:
        prefix = self.layout.discovery_prefix(at)
        paths = await self.wire.scopes(prefix)
        found = {scope.path: scope for scope in map(self.layout.parse, paths) if scope is not None}
        truncated = len(paths) >= SCOPES_LIMIT
        return Discovered(list(found.values()), truncated, prefix)

    async def read(self, filter: MetaFilter, *, held_only: bool = False, strict: bool = False) -> list[KindScope]:
        """The kind scopes a read of `filter` touches, in read order; `held_only` keeps discovered ones only
        (when discovery ran), `strict` refuses a discovery that may be incomplete (export)."""
        kinds = kinds_of(filter)
        if not kinds:
            return []
        reach = filter.reach
        if reach is not None and not reach.descendants:
            return sort_scopes(self.layout.scope(node, kind) for node in reach.nodes() for kind in kinds)
        at = reach.at if reach is not None else Namespace.ROOT
        found = await self.discover(at)
        if found.truncated:
            message = f"more than {SCOPES_LIMIT} scopes under {found.prefix or 'the tenant'}"
            if strict:
                raise EngineError(f"{message}; the engine cannot list them all")
            logger.warning("%s; this read may miss some of them", message)
        admitted = [s for s in found.scopes if s.kind in kinds and Reach.admitted_by(reach or _ROOT_SUBTREE, s.node)]
        if not held_only:
            # The node itself is always read, whatever a listing capped at 1000 paths reported.
            admitted += [self.layout.scope(at, kind) for kind in kinds]
        return sort_scopes(admitted)

    async def everything(self) -> list[KindScope]:
        """Every kind scope the engine holds, service nodes included (forget by id looks everywhere)."""
        found = await self.discover(Namespace.ROOT)
        return sort_scopes([*found.scopes, *(self.layout.scope(Namespace.ROOT, kind) for kind in ALL_KINDS)])

    async def erased(self, reach: Reach, kinds: list[ItemKind]) -> list[KindScope]:
        """The held kind scopes an erase removes: at `reach.at` and, with descendants, every node below it (deepest
        first)."""
        wanted = kinds or list(ALL_KINDS)
        found = await self.discover(reach.at)
        chosen = [
            scope
            for scope in found.scopes
            if scope.kind in wanted
            and (scope.node == reach.at or (reach.descendants and scope.node.is_within(reach.at)))
        ]
        return sorted(chosen, key=lambda scope: (-scope.path.count("/"), scope.path))


def sort_scopes(scopes: Iterable[KindScope]) -> list[KindScope]:
    """Each scope once, by kind, then by node with the root first."""
    unique = {scope.path: scope for scope in scopes}
    return sorted(unique.values(), key=KindScope.order)
