"""The source registry: which kinds this build offers, and the reader for a configured source.

As the engine registry does for engines, each entry names the module holding a kind's `SPEC` (a `KindSpec`),
imported only when that kind is configured or read. A kind from outside this package (a plugin, or a test's
own kind) is registered the same way, by name and module path: the runtime registers those its settings name
at start-up, in every process that reads sources, so the module is importable wherever the kind runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from engines.contract import ConfigError, InvalidRequestError, UnsupportedError
from sources.base import ReaderOptions, SourceReader
from sources.config import SourceConfigKind, SourceEntry, SourceRequest


@dataclass(frozen=True)
class KindSpec:
    """What a kind's module offers: how to configure a source of it, and how to build its reader.

    `configure` turns a request into an entry, refusing a target the kind cannot read with a contract error
    that names it; `build` makes the reader of an entry (no I/O beyond what it needs to check the entry).
    `target` says what a person gives (`path` or `url`), for help and error messages.
    """

    kind: str
    target: str
    summary: str
    configure: Callable[[SourceRequest], SourceEntry]
    build: Callable[[SourceEntry, ReaderOptions], SourceReader]


@dataclass(frozen=True)
class SourceKindEntry:
    """A kind this build offers: its persisted name and the module holding its `SPEC`."""

    kind: str
    module: str

    def load(self) -> KindSpec:
        """The kind's spec (importing its module on first use); a broken plugin is a `ConfigError`."""
        try:
            spec = importlib.import_module(self.module).SPEC
        except (ImportError, AttributeError) as err:
            raise ConfigError(f"source kind {self.kind!r}: cannot load {self.module}.SPEC ({err})") from err
        if not isinstance(spec, KindSpec) or spec.kind != self.kind:
            raise ConfigError(f"source kind {self.kind!r}: {self.module}.SPEC is not the KindSpec of that kind")
        return spec


class SourceRegistry:
    """Kinds by name, in registration order; registering a different module under a taken name is refused."""

    def __init__(self) -> None:
        self._entries: dict[str, SourceKindEntry] = {}

    def register(self, entry: SourceKindEntry) -> None:
        """Offer `entry`'s kind; registering the same entry again is a no-op (every process does it once)."""
        known = self._entries.get(entry.kind)
        if known is not None and known != entry:
            raise ConfigError(f"source kind {entry.kind!r} is registered twice ({known.module}, {entry.module})")
        self._entries[entry.kind] = entry

    def unregister(self, kind: str) -> None:
        """Stop offering `kind` (a test's own kind, once the test is done)."""
        self._entries.pop(kind, None)

    def kinds(self) -> list[str]:
        return list(self._entries)

    def entry(self, kind: str) -> SourceKindEntry:
        """The entry of `kind`; a known but unbuilt kind is `UnsupportedError`, any other `InvalidRequestError`."""
        entry = self._entries.get(kind)
        if entry is not None:
            return entry
        offered = ", ".join(_typed(k) for k in self._entries)
        if kind in _BUILT_IN:
            name = SourceConfigKind(kind).alias
            raise UnsupportedError(f"{name} sources are not available in this build yet; this build offers {offered}")
        raise InvalidRequestError(f"unknown source kind {kind!r}; this build offers {offered}")

    def resolve(self, typed: str) -> str:
        """The persisted kind a person means by `typed`: a kind name, or a built-in kind's alias."""
        for kind in SourceConfigKind:
            if typed == kind.alias:
                return kind.value
        return typed

    def spec(self, kind: str) -> KindSpec:
        return self.entry(kind).load()

    def configure(self, request: SourceRequest) -> SourceEntry:
        """The entry for a request, checked by its kind."""
        kind = self.resolve(request.kind)
        return self.spec(kind).configure(request.model_copy(update={"kind": kind}))

    def reader_for(self, entry: SourceEntry, options: ReaderOptions) -> SourceReader:
        """The reader of a configured source."""
        return self.spec(entry.kind).build(entry, options)


_BUILT_IN = frozenset(kind.value for kind in SourceConfigKind)


def _typed(kind: str) -> str:
    return SourceConfigKind(kind).alias if kind in _BUILT_IN else kind


REGISTRY = SourceRegistry()
REGISTRY.register(SourceKindEntry(SourceConfigKind.FOLDER, "sources.folder"))
REGISTRY.register(SourceKindEntry(SourceConfigKind.FILE, "sources.file"))
REGISTRY.register(SourceKindEntry(SourceConfigKind.WEB_PAGE, "sources.link"))
REGISTRY.register(SourceKindEntry(SourceConfigKind.GITHUB_REPO, "sources.github"))
REGISTRY.register(SourceKindEntry(SourceConfigKind.RSS_FEED, "sources.rss"))
REGISTRY.register(SourceKindEntry(SourceConfigKind.CONVERSATION, "sources.conversation"))


def register_kinds(modules: Mapping[str, str]) -> None:
    """Register the kinds a runtime's settings name (kind → module path), in this process."""
    for kind, module in modules.items():
        REGISTRY.register(SourceKindEntry(kind, module))


class SourceReaders:
    """Builds the reader of a configured source from the registry, with one set of options."""

    def __init__(self, options: ReaderOptions | None = None, registry: SourceRegistry = REGISTRY) -> None:
        self.options = options or ReaderOptions()
        self.registry = registry

    def reader_for(self, entry: SourceEntry) -> SourceReader:
        return self.registry.reader_for(entry, self.options)

    def kind_entry(self, kind: str) -> SourceKindEntry:
        """Where a kind's module is, so another process can build the same reader."""
        return self.registry.entry(kind)
