"""The fifteen probes of the `fetch_filters` check (docs/spec/contract.md §18.3): one item per filter field.

Each probe's item is the only one its filter selects among the probes, so a filter field an engine
ignores or matches too loosely shows up as extra hits.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from engines.conformance.fixtures import Identity
from engines.contract import (
    Conversation,
    Item,
    ItemKind,
    Learning,
    LearningKind,
    MemoryMeta,
    MetaFilter,
    Role,
    SourceKind,
    SourceRef,
    ToolCallRef,
    Turn,
    TurnRange,
)


@dataclass(frozen=True)
class Probe:
    """An item and the filter that must select it alone among the probes."""

    field: str
    item: Item
    filter: MetaFilter


def probes(ident: Identity) -> list[Probe]:
    """The probes in table order."""
    return [*_path_probes(ident), *_id_probes(ident), *_list_probes(ident)]


def _path_probes(ident: Identity) -> list[Probe]:
    m, r, ws = ident.marker, "/" + ident.marker, ident.probe_workspace

    def doc(field: str, meta: MemoryMeta, filter: MetaFilter, label: str | None = None) -> Probe:
        return Probe(field, ident.document(label or field, meta), filter)

    return [
        doc(
            "folder",
            MemoryMeta(workspace=ws, folder=f"{r}/src/app"),
            MetaFilter(workspace=ws, folder=f"{r}/src"),
        ),
        doc(
            "file_path",
            MemoryMeta(workspace=ws, file_path=f"{r}/docs/guide.md"),
            MetaFilter(workspace=ws, file_path=f"{r}/docs"),
            label="file",
        ),
        doc(
            "language",
            MemoryMeta(workspace=ws, language=f"{m}-lang"),
            MetaFilter(workspace=ws, language=f"{m}-lang"),
        ),
        doc("repo", MemoryMeta(workspace=ws, repo=f"owner/{m}"), MetaFilter(workspace=ws, repo=f"owner/{m}")),
        doc(
            "commit",
            MemoryMeta(workspace=ws, commit=f"{m}c0ffee"),
            MetaFilter(workspace=ws, commit=f"{m}c0ffee"),
        ),
        doc(
            "url",
            MemoryMeta(workspace=ws, url=f"https://{m}.test/a"),
            MetaFilter(workspace=ws, url=f"https://{m}.test/a"),
        ),
    ]


def _id_probes(ident: Identity) -> list[Probe]:
    m, ws = ident.marker, ident.probe_workspace
    thread = _conversation(f"{m} thread question", "thread answer", MemoryMeta(workspace=ws, thread_id=f"{m}-t1"))
    window = TurnRange(first=4, last=5)
    turns = _conversation(f"{m} turns question", "turns answer", MemoryMeta(workspace=ws, turns=window))
    tool = MemoryMeta(workspace=ws, tool_call=ToolCallRef(name=f"{m}_tool"))
    source = MemoryMeta(workspace=ws, source=SourceRef(kind=SourceKind.FILE, id=f"{m}-src"))
    return [
        Probe("thread_id", thread, MetaFilter(workspace=ws, thread_id=f"{m}-t1")),
        Probe("turns", turns, MetaFilter(workspace=ws, turns=window)),
        Probe(
            "agent_id",
            ident.document("agent", MemoryMeta(workspace=ws, agent_id=f"{m}-agent")),
            MetaFilter(workspace=ws, agent_id=f"{m}-agent"),
        ),
        Probe("tool_call", ident.document("tool", tool), MetaFilter(workspace=ws, tool_call=f"{m}_tool")),
        Probe("source_id", ident.document("source", source), MetaFilter(workspace=ws, source_id=f"{m}-src")),
    ]


def _list_probes(ident: Identity) -> list[Probe]:
    m, ws = ident.marker, ident.probe_workspace
    feed = MemoryMeta(workspace=ws, source=SourceRef(kind=SourceKind.RSS))
    tagged = MemoryMeta(workspace=ws, tags=[f"{m}-tag"])
    learning = Learning(
        text=f"{m} kinds learning", kind=LearningKind.FACT, confidence=0.5, meta=MemoryMeta(workspace=ws)
    )
    observed = MemoryMeta(workspace=ws, observed_at=datetime(2001, 1, 1, tzinfo=UTC))
    window = MetaFilter(
        workspace=ws,
        observed_after=datetime(2000, 1, 1, tzinfo=UTC),
        observed_before=datetime(2002, 1, 1, tzinfo=UTC),
    )
    return [
        Probe("sources", ident.document("feed", feed), MetaFilter(workspace=ws, sources=[SourceKind.RSS])),
        Probe(
            "tags_any",
            ident.document("tags", tagged),
            MetaFilter(workspace=ws, tags_any=[f"{m}-none", f"{m}-tag"]),
        ),
        Probe("kinds", learning, MetaFilter(workspace=ws, kinds=[ItemKind.LEARNING])),
        Probe("observed_at", ident.document("observed", observed), window),
    ]


def _conversation(question: str, answer: str, meta: MemoryMeta) -> Conversation:
    turns = [Turn(role=Role.USER, text=question), Turn(role=Role.ASSISTANT, text=answer)]
    return Conversation(turns=turns, meta=meta)
