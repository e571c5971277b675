"""The source registry: which kinds this build offers, and the reader for a configured source.

As the engine registry does for engines, each entry names the module holding a kind's `SPEC` (a `KindSpec`),
imported only when that kind is configured or read. A kind comes from one of three places, in this order of
precedence:

1. registered here by module path (`register`, `register_kinds`): the `source_kinds` setting
   (`TINYMEMORY_SOURCE_KINDS`), which every process that reads sources registers at start-up, or a test;
2. built in (the six kinds of `SourceConfigKind` this build has readers for), never replaced;
3. declared by an installed distribution under the `tinymemory.sources` entry-point group (`engines.plugins`),
   found on the first lookup in each process without importing anything.

So the setting overrides an entry point of the same name, and also settles two distributions declaring one
kind. An entry point that declares a built-in kind, or a name two distributions declare differently, is a
`ConfigError` when that kind is used, as a plugin whose module will not import is when its spec is loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from engines.contract import ConfigError, InvalidRequestError, UnsupportedError
from engines.plugins import SOURCES_GROUP, Declared, Offers, declared, load_offered, no_plugins, remedy_for, target_name
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
    """A kind this build offers: its persisted name and where its spec is (`module`, the module holding `SPEC`,
    or `module:attribute`). `origin` says who declared it, for error messages (an entry point); empty for a
    kind registered in code or by the `source_kinds` setting. Plain data, so another process can load it."""

    kind: str
    module: str
    origin: str = field(default="", compare=False)

    def load(self) -> KindSpec:
        """The kind's spec (importing its module on first use); a broken plugin is a `ConfigError`."""
        what = f"source kind {self.kind!r}"
        spec = load_offered(what, self.module, "SPEC", self.origin, _SETTING_REMEDY)
        if not isinstance(spec, KindSpec) or spec.kind != self.kind:
            name = target_name(self.module, "SPEC")
            raise ConfigError(
                f"{what}: {name} is not the KindSpec of that kind{remedy_for(self.origin, _SETTING_REMEDY)}"
            )
        return spec


_SETTING_REMEDY = "; check the module named for it in the source_kinds setting (TINYMEMORY_SOURCE_KINDS)"


class SourceRegistry:
    """Kinds by name: registered here (they win), built in, then declared by installed distributions.

    `built_in` are this build's own kinds, which neither a registration nor an entry point may replace;
    `plugins` gives the entry points of `tinymemory.sources` (none unless given), read on first lookup.
    """

    def __init__(self, built_in: Iterable[SourceKindEntry] = (), plugins: Callable[[], Declared] = no_plugins) -> None:
        remedy = " or name the module to use in the source_kinds setting (TINYMEMORY_SOURCE_KINDS)"
        self._offers = Offers(((entry.kind, entry.module) for entry in built_in), plugins, remedy)

    def register(self, entry: SourceKindEntry) -> None:
        """Offer `entry`'s kind, over any entry point of that name; the same entry again is a no-op (every
        process registers its settings' kinds), another module under a taken name is refused."""
        known = self._offers.known(entry.kind)
        if known is not None and known != entry.module:
            raise ConfigError(f"source kind {entry.kind!r} is registered twice ({known}, {entry.module})")
        self._offers.register(entry.kind, entry.module)

    def unregister(self, kind: str) -> None:
        """Stop offering `kind` (a test's own kind, once the test is done)."""
        self._offers.unregister(kind)

    def kinds(self) -> list[str]:
        """Every kind offered: built in, registered, then declared by entry points (none of them loaded)."""
        return self._offers.names()

    def entry(self, kind: str) -> SourceKindEntry:
        """The entry of `kind`; a known but unbuilt kind is `UnsupportedError`, any other `InvalidRequestError`,
        and an entry point that cannot stand for it (a built-in name, declared twice) `ConfigError`."""
        found = self._offers.find(kind)
        if found is not None:
            return SourceKindEntry(kind, found.module, origin=found.origin)
        offered = ", ".join(_typed(k) for k in self.kinds())
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


def _discovered() -> Declared:
    return declared(SOURCES_GROUP)


REGISTRY = SourceRegistry(
    built_in=[
        SourceKindEntry(SourceConfigKind.FOLDER, "sources.folder"),
        SourceKindEntry(SourceConfigKind.FILE, "sources.file"),
        SourceKindEntry(SourceConfigKind.WEB_PAGE, "sources.link"),
        SourceKindEntry(SourceConfigKind.GITHUB_REPO, "sources.github"),
        SourceKindEntry(SourceConfigKind.RSS_FEED, "sources.rss"),
        SourceKindEntry(SourceConfigKind.CONVERSATION, "sources.conversation"),
    ],
    plugins=_discovered,
)
"""This process's kinds: the built-in ones, the `source_kinds` setting's and the installed entry points'."""


def register_kinds(modules: Mapping[str, str]) -> None:
    """Register the kinds a runtime's settings name (kind → module path), in this process, over any entry
    point of the same name."""
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
