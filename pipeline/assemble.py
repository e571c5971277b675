"""Assembling `StoreItem`s: a converted document plus everything known about where it came from."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePath

from engines.contract import Document, DocumentBody, MemoryMeta, Namespace, SourceKind, SourceRef


@dataclass(frozen=True)
class Origin:
    """Where a unit came from: the metadata every item made of it carries (spec §2.4)."""

    source_kind: SourceKind
    source_id: str
    namespace: Namespace = Namespace.ROOT
    workspace: str | None = None
    file_path: str | None = None
    url: str | None = None
    observed_at: datetime | None = None

    @staticmethod
    def of_file(
        source_kind: SourceKind, source_id: str, workspace: str, path: str, mtime_ns: int, namespace: Namespace
    ) -> Origin:
        """A file's origin: its canonical absolute path, its workspace, seen at its mtime."""
        return Origin(
            source_kind=source_kind,
            source_id=source_id,
            namespace=namespace,
            workspace=workspace,
            file_path=path,
            observed_at=datetime.fromtimestamp(mtime_ns / 1e9, UTC),
        )


def meta_for(origin: Origin, language: str | None) -> MemoryMeta:
    return MemoryMeta(
        namespace=origin.namespace,
        workspace=origin.workspace,
        folder=str(PurePath(origin.file_path).parent) if origin.file_path else None,
        file_path=origin.file_path,
        language=language,
        url=origin.url,
        source=SourceRef(kind=origin.source_kind, id=origin.source_id),
        observed_at=origin.observed_at,
    )


def document_item(markdown: str, title: str | None, mime: str, language: str | None, origin: Origin) -> Document:
    """The document a converted unit becomes; a blank title is no title."""
    return Document(
        title=title if title and title.strip() else None,
        body=DocumentBody.of_text(markdown),
        mime=mime,
        meta=meta_for(origin, language),
    )
