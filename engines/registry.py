"""The engine registry: list the engines this build offers and build one from configuration.

Each entry names the module that holds an engine's `DESCRIPTOR` and `build`; a module is imported only when
its engine is described or built, so choosing `local` never imports another engine's client. Engines come
from code (the five built in, and `Registry.register`) and from installed distributions, which declare an
engine id under the `tinymemory.engines` entry-point group (`engines.plugins`), read on the first lookup in
each process. A registration wins over an entry point of the same id; a built-in id is never replaced, and
an entry point declaring one, or an id two distributions declare differently, is a `ConfigError` when that
engine is used.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from engines.contract import ConfigError, EngineDescriptor, MemoryEngine
from engines.plugins import ENGINES_GROUP, Declared, Offers, declared, load_offered, no_plugins, remedy_for
from engines.settings import EngineCredential, EngineSettings


class _EngineModule(Protocol):
    DESCRIPTOR: EngineDescriptor

    def build(self, settings: EngineSettings, credential: EngineCredential) -> MemoryEngine: ...


@dataclass(frozen=True)
class EngineEntry:
    """An engine this build offers: its id and the module holding `DESCRIPTOR` and `build`. `origin` says
    who declared it (an entry point), for error messages; empty for an engine registered in code."""

    id: str
    module: str
    origin: str = field(default="", compare=False)

    def load(self) -> _EngineModule:
        """The engine's module, imported on first use; one that fails to import, or lacks a `DESCRIPTOR` of
        this id or a `build`, is a `ConfigError` naming where it was declared."""
        what = f'memory engine "{self.id}"'
        module = load_offered(what, self.module, None, self.origin, "")
        descriptor = getattr(module, "DESCRIPTOR", None)
        if not isinstance(descriptor, EngineDescriptor) or descriptor.id != self.id:
            wrong = f"{self.module}.DESCRIPTOR is not the descriptor of that engine"
            raise ConfigError(f"{what}: {wrong}{remedy_for(self.origin, '')}")
        if not callable(getattr(module, "build", None)):
            raise ConfigError(f"{what}: {self.module} has no build function{remedy_for(self.origin, '')}")
        return cast(_EngineModule, module)


class Registry:
    """Engines by id: registered in code (they win), built in, then declared by installed distributions.

    `built_in` are this build's own engines, which neither a registration nor an entry point may replace;
    `plugins` gives the entry points of `tinymemory.engines` (none unless given), read on first lookup.
    """

    def __init__(self, built_in: Iterable[EngineEntry] = (), plugins: Callable[[], Declared] = no_plugins) -> None:
        self._offers = Offers(((entry.id, entry.module) for entry in built_in), plugins, "")

    def register(self, entry: EngineEntry) -> None:
        """Offer `entry`'s engine, over any entry point of that id; a taken id is refused."""
        if self._offers.known(entry.id) is not None:
            raise ConfigError(f'memory engine "{entry.id}" is registered twice')
        self._offers.register(entry.id, entry.module)

    def ids(self) -> list[str]:
        """Every engine offered: built in, registered, then declared by entry points (none of them loaded)."""
        return self._offers.names()

    def entry(self, engine_id: str) -> EngineEntry:
        """The entry of `engine_id`; an unknown id, or an entry point that cannot stand for it (a built-in id,
        declared twice), is `ConfigError`."""
        found = self._offers.find(engine_id)
        if found is None:
            offered = ", ".join(self.ids())
            raise ConfigError(f'unknown memory engine "{engine_id}"; this build offers {offered}')
        return EngineEntry(engine_id, found.module, origin=found.origin)


def _discovered() -> Declared:
    return declared(ENGINES_GROUP)


REGISTRY = Registry(
    built_in=[
        EngineEntry("local", "engines.local.factory"),
        EngineEntry("reference", "engines.reference.factory"),
        EngineEntry("cortexdb", "engines.cortex.cortexdb"),
        EngineEntry("tinyhumans", "engines.cortex.tinyhumans"),
        EngineEntry("postgres", "engines.postgres.factory"),
    ],
    plugins=_discovered,
)
"""This process's engines: the built-in ones and the installed entry points'."""


def list_engines() -> list[EngineDescriptor]:
    """The descriptors of every engine this build offers, in order (a broken plugin is a `ConfigError`)."""
    return [REGISTRY.entry(engine_id).load().DESCRIPTOR for engine_id in REGISTRY.ids()]


def build_engine(engine_id: str, settings: EngineSettings, credential: EngineCredential) -> MemoryEngine:
    """Build the engine `engine_id`; an unknown id or a wrong setting is ConfigError."""
    module = REGISTRY.entry(engine_id).load()
    if module.DESCRIPTOR.needs_key and not credential.is_set():
        raise ConfigError(f'engine "{engine_id}" needs a key')
    return module.build(settings, credential)


class MemoryConfig(BaseModel):
    """Which engine to use and each engine's settings. Holds no credential, so it can be logged."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    engine: str = "local"
    engines: dict[str, EngineSettings] = Field(default_factory=dict)

    def settings(self) -> EngineSettings:
        """The selected engine's settings, or the defaults."""
        return self.engines.get(self.engine, EngineSettings())

    def build(self, credential: EngineCredential | None = None) -> MemoryEngine:
        return build_engine(self.engine, self.settings(), credential or EngineCredential.none())

    @classmethod
    def from_toml(cls, text: str) -> MemoryConfig:
        try:
            return cls._checked(tomllib.loads(text))
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"memory configuration is not valid TOML: {err}") from err

    @classmethod
    def from_json(cls, text: str) -> MemoryConfig:
        try:
            return cls._checked(json.loads(text))
        except json.JSONDecodeError as err:
            raise ConfigError(f"memory configuration is not valid JSON: {err}") from err

    @classmethod
    def from_env(cls) -> MemoryConfig:
        """Read `TINYMEMORY_ENGINE` and `TINYMEMORY_ENGINES__<ID>__<FIELD>` (nested with `__`).

        Call it at a process's start-up edge only: nothing below reads the environment.
        """
        try:
            loaded = _MemoryEnv()
        except ValidationError as err:
            raise ConfigError(f"memory configuration in the environment is invalid: {_first_error(err)}") from err
        return cls(engine=loaded.engine, engines=loaded.engines)

    @classmethod
    def _checked(cls, data: object) -> MemoryConfig:
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            raise ConfigError(f"memory configuration is invalid: {_first_error(err)}") from err


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}"


class _MemoryEnv(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TINYMEMORY_", env_nested_delimiter="__", extra="ignore")

    engine: str = "local"
    engines: dict[str, EngineSettings] = Field(default_factory=dict)
