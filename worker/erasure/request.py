"""Erasures: what is asked (`ErasureTarget`, `ErasureRequest`), the audit record it ends in (`ErasureReceipt`),
and what keeps erased memory erased (`Tombstone`).

A target is a source (every item it stored) or a namespace subtree (an account such as `user:alice`, a team,
a workspace node, and everything below it), optionally only some item kinds. A receipt holds what was asked,
by whom, when it ran and what it did; it never holds item text, and it outlives the state of what it erased.

A tombstone names a scope (`source:{id}` or `namespace:{path}`) and the kinds erased there. It has no end:
an erased source or account stays erased, so jobs that were queued or running when it was written drop
their items, and later syncs of the source are refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engines.contract import ItemKind, Namespace
from worker.records import now

ErasureStatus = Literal["queued", "running", "completed", "failed"]
ErasureStep = Literal["tombstoned", "stopped", "drained", "erased", "purged", "verified"]
ErasureMethod = Literal["erase", "forget"]
UNFINISHED: Final[frozenset[str]] = frozenset({"queued", "running"})


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def source_scope(source_id: str) -> str:
    """The tombstone scope of a source (source ids never hold `:`, so it cannot read as a namespace's)."""
    return f"source:{source_id}"


def namespace_scope(namespace: Namespace) -> str:
    return f"namespace:{namespace}"


def scopes_over(source_id: str | None, namespaces: Iterable[Namespace]) -> list[str]:
    """Every scope whose tombstone covers an item of `source_id` stored at one of `namespaces`: the source's
    own, and each namespace with every ancestor (an erased account covers the nodes below it)."""
    scopes = [] if source_id is None else [source_scope(source_id)]
    for namespace in namespaces:
        scopes.extend(namespace_scope(node) for node in namespace.ancestors_and_self())
    return list(dict.fromkeys(scopes))


class ErasureTarget(_Record):
    """What to erase: exactly one of `source_id` and `namespace`, and the kinds (none named: every kind)."""

    source_id: str | None = None
    namespace: Namespace | None = None
    kinds: list[ItemKind] = Field(default_factory=list)

    @field_validator("source_id")
    @classmethod
    def _check_source(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or ":" in value):
            raise ValueError("source_id must be a configured source's id (not blank, no ':')")
        return value

    @field_validator("kinds")
    @classmethod
    def _one_of_each(cls, value: list[ItemKind]) -> list[ItemKind]:
        # Sorted and unique, so the same request written twice has one key; all three is the same as none.
        kinds = sorted(set(value))
        return [] if set(kinds) == set(ItemKind) else kinds

    @model_validator(mode="after")
    def _exactly_one(self) -> ErasureTarget:
        if (self.source_id is None) == (self.namespace is None):
            raise ValueError("name exactly one of source_id and namespace")
        if self.namespace is not None and self.namespace.is_root:
            raise ValueError(
                "erasing the root namespace would erase all memory; name an account, team or workspace node"
            )
        return self

    @property
    def scope(self) -> str:
        """The tombstone scope this target writes."""
        if self.source_id is not None:
            return source_scope(self.source_id)
        return namespace_scope(self.node)

    @property
    def node(self) -> Namespace:
        """The namespace of a namespace target (a source target's node is its source's placement)."""
        if self.namespace is None:
            raise ValueError("a source target has no namespace of its own")
        return self.namespace

    @property
    def key(self) -> str:
        """What makes two requests the same request: the scope and the kinds."""
        return f"{self.scope}|{','.join(self.kinds)}"

    @property
    def every_kind(self) -> bool:
        return not self.kinds

    def describe(self) -> str:
        what = f"source {self.source_id!r}" if self.source_id is not None else f"namespace {str(self.node)!r}"
        return what if self.every_kind else f"{what} ({', '.join(self.kinds)} only)"


class ErasureRequest(_Record):
    """One request to erase: its id, what, by which token (or `cli`), and when it was asked."""

    id: str
    target: ErasureTarget
    requested_by: str
    requested_at: datetime = Field(default_factory=now)


class Verification(_Record):
    """The look over the erased reach after the erasure: how many items were still found the last time,
    after how many looks."""

    passed: bool
    remaining: int
    attempts: int
    checked_at: datetime = Field(default_factory=now)


class ErasureReceipt(ErasureRequest):
    """The audit record of one erasure, kept for good: the request, where it stands, and what it did.

    `steps` lists the steps done so far (a resumed erasure skips them); `sources` the sources it stopped and
    purged; `scopes` the nodes it erased or forgot over; `method` whether the engine erased (`erase`) or the
    items were forgotten (`forget`: a source's items share their node with others', or the engine answered
    Unsupported). `erased_scopes` and `engine_receipts` are the engine's own report. No item text, ever.
    """

    status: ErasureStatus = "queued"
    reason: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    runs: int = 0
    steps: list[ErasureStep] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    scopes: list[Namespace] = Field(default_factory=list)
    method: ErasureMethod | None = None
    erased_scopes: int = 0
    forgotten: int = 0
    engine_receipts: list[str] = Field(default_factory=list)
    verification: Verification | None = None

    @property
    def finished(self) -> bool:
        return self.status not in UNFINISHED

    @classmethod
    def of(cls, request: ErasureRequest) -> ErasureReceipt:
        """The receipt of a request just made: queued."""
        return cls.model_validate(request.model_dump())


class Tombstone(_Record):
    """A scope that was erased, for the kinds named (none: every kind), by the erasure `erasure_id`."""

    scope: str
    erasure_id: str
    kinds: list[ItemKind] = Field(default_factory=list)
    at: datetime = Field(default_factory=now)

    @classmethod
    def of(cls, request: ErasureRequest) -> Tombstone:
        return cls(scope=request.target.scope, erasure_id=request.id, kinds=request.target.kinds)

    @property
    def whole(self) -> bool:
        """Every kind is erased: nothing of this scope may be stored again."""
        return not self.kinds

    def covers(self, kind: ItemKind) -> bool:
        return self.whole or kind in self.kinds


def refusing(tombstones: Iterable[Tombstone]) -> Tombstone | None:
    """The first tombstone that erases every kind (a sync of what it covers is refused), if any."""
    return next((t for t in tombstones if t.whole), None)


def covering(
    tombstones: Iterable[Tombstone], source_id: str | None, namespace: Namespace, kind: ItemKind
) -> Tombstone | None:
    """The tombstone, if any, that forbids storing an item of `kind` from `source_id` (None: no source, as for
    a legacy import) at `namespace`."""
    scopes = set(scopes_over(source_id, [namespace]))
    return next((t for t in tombstones if t.scope in scopes and t.covers(kind)), None)
