"""The run identity and the items the checks store (docs/spec/contract.md §18.2).

Everything a run stores carries its own workspace and marker, so runs against a shared engine never
see each other's items and cleanup can find every one of them.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from engines.contract import (
    Conversation,
    Document,
    DocumentBody,
    ItemKind,
    Learning,
    LearningKind,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Reach,
    Role,
    SourceKind,
    SourceRef,
    ToolCallRef,
    Turn,
)

ROUND_TRIP_AT = datetime(2025, 5, 6, 7, 8, 9, tzinfo=UTC)

# Process-wide, so two identities made within one clock tick still differ.
_SEQUENCE = itertools.count(1)


@dataclass(frozen=True)
class Identity:
    """One run's nonce, and the workspace, marker, metadata and filters derived from it."""

    nonce: str

    @classmethod
    def new(cls) -> Identity:
        return cls(nonce=f"{time.time_ns():x}{next(_SEQUENCE):x}")

    @property
    def workspace(self) -> str:
        return f"conformance/{self.nonce}"

    @property
    def probe_workspace(self) -> str:
        return self.workspace + "/probes"

    @property
    def marker(self) -> str:
        """Letters and digits only, so every scorer sees it as one word."""
        return f"tmconf{self.nonce}"

    def meta(self, namespace: Namespace = Namespace.ROOT, tags: Sequence[str] = ()) -> MemoryMeta:
        return MemoryMeta(namespace=namespace, workspace=self.workspace, tags=list(tags))

    def filter(
        self, tags: Sequence[str] = (), reach: Reach | None = None, kinds: Sequence[ItemKind] = ()
    ) -> MetaFilter:
        """The run's workspace, narrowed by the tags, reach and kinds given."""
        return MetaFilter(workspace=self.workspace, tags_any=list(tags), reach=reach, kinds=list(kinds))

    def probe_filter(self) -> MetaFilter:
        return MetaFilter(workspace=self.probe_workspace)

    def document(self, label: str, meta: MemoryMeta) -> Document:
        return Document(body=DocumentBody.of_text(f"{self.marker} {label} note"), meta=meta)

    def fact(self, text: str, namespace: Namespace, tags: Sequence[str]) -> Learning:
        """A fact learned with confidence 0.9, as the namespace and erase checks store them."""
        return Learning(
            text=text, kind=LearningKind.FACT, confidence=0.9, meta=self.meta(namespace=namespace, tags=tags)
        )

    def node(self, suffix: str) -> Namespace:
        return Namespace.parse(f"agent:{self.marker}-{suffix}")


def round_trip_items(ident: Identity) -> tuple[Document, Conversation, Learning]:
    """One item of each kind with every optional field set, to read back field for field."""
    marker = ident.marker
    document = Document(
        title="Round trip",
        body=DocumentBody.of_text(f"{marker} document body"),
        mime="text/markdown",
        meta=ident.meta(tags=["roundtrip"]),
    )
    question = Turn(role=Role.USER, text=f"{marker} what is in the plan", at=ROUND_TRIP_AT)
    reply = Turn(
        role=Role.ASSISTANT,
        text="the plan has three steps",
        at=ROUND_TRIP_AT,
        tool_calls=[ToolCallRef(name="read_plan", id="call-1")],
    )
    conversation = Conversation(
        turns=[question, reply],
        meta=MemoryMeta(
            workspace=ident.workspace, source=SourceRef(kind=SourceKind.CONVERSATION, id=f"{marker}-thread")
        ),
    )
    learning = Learning(
        text=f"{marker} the user prefers short answers",
        kind=LearningKind.PREFERENCE,
        confidence=0.75,
        evidence="said so twice",
        meta=ident.meta(),
    )
    return document, conversation, learning
