"""Where items live in CortexDB: one scope per item kind per namespace node, in one of two layouts
(docs/spec/cortexdb.md §10).

The legacy layout (the default) keeps everything under `app:tinymemory`; the v3 layout lays it out below a root
of the host's choosing, with `app:brain` and `app:flows` grouping sourced documents and services. Each engine
reads only its own layout, and a path it did not write (another writer's scope) parses to None.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass

from engines.contract import ConfigError, InvalidRequestError, ItemKind, Namespace, SegmentKind

LEGACY_ROOT = "app:tinymemory"
BRAIN = "app:brain"
FLOWS = "app:flows"
LEAVES = {
    ItemKind.DOCUMENT: "app:documents",
    ItemKind.CONVERSATION: "app:conversations",
    ItemKind.LEARNING: "app:learnings",
}
KINDS_BY_LEAF = {leaf: kind for kind, leaf in LEAVES.items()}
KIND_ORDER = {ItemKind.DOCUMENT: 0, ItemKind.CONVERSATION: 1, ItemKind.LEARNING: 2}
ROOT_TYPES = frozenset({"org", "dept", "team", "app", "user", "agent", "service", "ws", "project", "source"})
_ROOT_SEGMENT = re.compile(r"([a-z]+):([A-Za-z0-9_-]+)")


@dataclass(frozen=True)
class KindScope:
    """The scope holding the items of one kind at one node; `path` is what the engine sends."""

    path: str
    node: Namespace
    kind: ItemKind

    def order(self) -> tuple[int, str]:
        """Reads walk scopes by kind, then by namespace path with the root first."""
        return KIND_ORDER[self.kind], "" if self.node.is_root else str(self.node)

    def specificity(self) -> tuple[int, int, str]:
        """Recall asks the most specific node first: deepest, then by kind, then by path."""
        return -self.node.depth, KIND_ORDER[self.kind], self.path


class Layout(ABC):
    """How a node and a kind become a scope path, and how a listed path reads back."""

    @abstractmethod
    def path(self, node: Namespace, kind: ItemKind) -> str: ...

    @abstractmethod
    def parse(self, path: str) -> KindScope | None:
        """The kind scope a listed path names, or None when this layout did not write it."""

    @abstractmethod
    def discovery_prefix(self, at: Namespace) -> str | None:
        """The `prefix` of a scope listing that finds every scope at or below `at`; None sends no prefix."""

    def scope(self, node: Namespace, kind: ItemKind) -> KindScope:
        return KindScope(self.path(node, kind), node, kind)


def _segments(node: Namespace) -> list[str]:
    return [str(segment) for segment in node]


def _namespace(segments: list[str]) -> Namespace | None:
    try:
        return Namespace.parse("/".join(segments)) if segments else Namespace.ROOT
    except InvalidRequestError:
        return None


class LegacyLayout(Layout):
    """`app:tinymemory/<node>/app:<kind>s`; the hosted backend puts the tenant in front, which parsing skips."""

    def __init__(self, hosted: bool) -> None:
        self._hosted = hosted

    def path(self, node: Namespace, kind: ItemKind) -> str:
        return "/".join([LEGACY_ROOT, *_segments(node), LEAVES[kind]])

    def parse(self, path: str) -> KindScope | None:
        parts = path.split("/")
        if LEGACY_ROOT not in parts:
            return None
        start = parts.index(LEGACY_ROOT)
        kind = KINDS_BY_LEAF.get(parts[-1])
        if kind is None or (start > 0 and not self._hosted) or len(parts) - start < 2:
            return None
        node = _namespace(parts[start + 1 : -1])
        return None if node is None else self.scope(node, kind)

    def discovery_prefix(self, at: Namespace) -> str | None:
        return "/".join([LEGACY_ROOT, *_segments(at)])


def parse_root(root: str) -> list[str]:
    """The segments of a v3 root; a root that is not `type:id` segments of the allowed types is ConfigError."""
    trimmed = root.strip().strip("/").strip()
    segments = trimmed.split("/") if trimmed else []
    problem = None
    if not segments:
        problem = "is empty"
    for segment in segments:
        found = _ROOT_SEGMENT.fullmatch(segment)
        if found is None or found.group(1) not in ROOT_TYPES:
            problem = f"has a segment `{segment}` that is not type:id with a type of {', '.join(sorted(ROOT_TYPES))}"
            break
        if segment == LEGACY_ROOT:
            problem = f"must not hold `{LEGACY_ROOT}`, the legacy layout's root"
            break
    if problem:
        raise ConfigError(f'scope root "{root.strip()}" {problem}')
    return segments


class RootedLayout(Layout):
    """The v3 layout below `root`: written in full on Direct, relative to the tenant on the hosted wire."""

    def __init__(self, root: str, hosted: bool) -> None:
        self._root = parse_root(root)
        self._hosted = hosted

    def path(self, node: Namespace, kind: ItemKind) -> str:
        segments = _segments(node)
        if segments[: len(self._root)] == self._root:
            raise InvalidRequestError(f"namespace `{node}` repeats the scope root `{'/'.join(self._root)}`")
        out = [] if self._hosted else list(self._root)
        service = source = False
        for segment, raw in zip(node, segments, strict=True):
            if segment.kind is SegmentKind.SERVICE and not service:
                out.append(FLOWS)
                service = True
            if segment.kind is SegmentKind.SOURCE and kind is ItemKind.DOCUMENT and not source:
                out.append(BRAIN)
                source = True
            out.append(raw)
        if not source:
            out.append(LEAVES[kind])
        return "/".join(out)

    def parse(self, path: str) -> KindScope | None:
        parts = self._relative(path.split("/"))
        if not parts:
            return None
        kind = KINDS_BY_LEAF.get(parts[-1])
        rest = parts[:-1] if kind is not None else parts
        if kind is None:
            if BRAIN not in parts:
                return None
            kind = ItemKind.DOCUMENT
        node = _namespace([segment for segment in rest if segment not in (BRAIN, FLOWS)])
        if node is None:
            return None
        try:
            written = self.path(node, kind)
        except InvalidRequestError:
            return None
        return KindScope(written, node, kind) if written == "/".join(self._write_form(parts)) else None

    def _relative(self, parts: list[str]) -> list[str] | None:
        size = len(self._root)
        if not self._hosted:
            return parts[size:] if parts[:size] == self._root else None
        # The backend re-roots under the tenant: drop everything up to its last occurrence.
        for start in range(len(parts) - size, -1, -1):
            if parts[start : start + size] == self._root:
                return parts[start + size :]
        return parts

    def _write_form(self, relative: list[str]) -> list[str]:
        return relative if self._hosted else [*self._root, *relative]

    def discovery_prefix(self, at: Namespace) -> str | None:
        return None if self._hosted else "/".join(self._root)


def layout_for(hosted: bool, root: str | None) -> Layout:
    """The v3 layout below `root` when one is given, else the legacy layout."""
    return RootedLayout(root, hosted) if root is not None and root.strip() else LegacyLayout(hosted)
