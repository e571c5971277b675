"""What keeps a legacy import from re-filling what an erasure erased (`worker.legacy.job`).

Like every ingest job, an import reads the tombstones over where it stores when it starts and again right before
each batch is sent: an erasure of every kind there refuses it (`ConflictError`), and items of an erased kind are
left out, counted by kind and erasure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Protocol

from engines.contract import ConflictError, Namespace, StoreItem
from worker.erasure.request import Tombstone, covering, refusing, scopes_over


class Erasures(Protocol):
    """Where the tombstones are (the state store): an import never re-fills what an erasure erased."""

    def tombstones(self, scopes: Iterable[str]) -> list[Tombstone]: ...


class ErasureGuard:
    """The tombstones over where an import stores, read before it starts and before each batch is sent."""

    def __init__(self, erasures: Erasures | None, node: Namespace) -> None:
        self.erasures = erasures
        self.node = node
        self.left_out: Counter[str] = Counter()

    def refuse_if_erased(self) -> None:
        """`ConflictError` when an erasure of every kind covers the import's namespace."""
        self._refuse_whole(self._tombstones([self.node]))

    def kept(self, items: list[StoreItem]) -> list[StoreItem]:
        """`items` less those an erasure covers, which are counted (`take_left_out`); `ConflictError` when one
        of every kind covers them all, as it now forbids the whole import."""
        self.left_out = Counter()
        tombstones = self._tombstones(list({item.meta.namespace for item in items}))
        if not tombstones:
            return items
        self._refuse_whole(tombstones)
        kept = []
        for item in items:
            erased = covering(tombstones, None, item.meta.namespace, item.item_kind)
            if erased is None:
                kept.append(item)
            else:
                self.left_out[f"{item.item_kind} items: erased (erasure {erased.erasure_id})"] += 1
        return kept

    def take_left_out(self) -> Counter[str]:
        """What the last `kept` left out, once (its batch was acknowledged)."""
        left_out, self.left_out = self.left_out, Counter()
        return left_out

    def _tombstones(self, namespaces: list[Namespace]) -> list[Tombstone]:
        return [] if self.erasures is None else self.erasures.tombstones(scopes_over(None, namespaces))

    def _refuse_whole(self, tombstones: list[Tombstone]) -> None:
        over = set(scopes_over(None, [self.node]))
        erased = refusing(t for t in tombstones if t.scope in over)
        if erased is not None:
            raise ConflictError(
                f"cannot import into {self.node}: it was erased (erasure {erased.erasure_id}, `tinymemory erase "
                f"status {erased.erasure_id}`); what an erasure covers stays erased, so import under another "
                "namespace (--namespace)"
            )
