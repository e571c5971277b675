"""The engine registry: list the engines this build offers and build one from configuration.

Each entry names the module that holds an engine's descriptor and factory; a module is imported
only when its engine is described or built, so choosing `local` never imports another engine's
client.
"""

from __future__ import annotations

import importlib
import json
import tomllib
from dataclasses import dataclass
from typing import Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from engines.contract import ConfigError, EngineDescriptor, MemoryEngine
from engines.settings import EngineCredential, EngineSettings


class _EngineModule(Protocol):
    DESCRIPTOR: EngineDescriptor

    def build(self, settings: EngineSettings, credential: EngineCredential) -> MemoryEngine: ...


@dataclass(frozen=True)
class EngineEntry:
    """An engine this build offers: its id and the module holding `DESCRIPTOR` and `build`."""

    id: str
    module: str

    def load(self) -> _EngineModule:
        return cast(_EngineModule, importlib.import_module(self.module))


class Registry:
    """Engines by id, in registration order; a duplicate id is refused."""

    def __init__(self) -> None:
        self._entries: dict[str, EngineEntry] = {}

    def register(self, entry: EngineEntry) -> None:
        if entry.id in self._entries:
            raise ConfigError(f'memory engine "{entry.id}" is registered twice')
        self._entries[entry.id] = entry

    def ids(self) -> list[str]:
        return list(self._entries)

    def entry(self, engine_id: str) -> EngineEntry:
        entry = self._entries.get(engine_id)
        if entry is None:
            offered = ", ".join(self._entries)
            raise ConfigError(f'unknown memory engine "{engine_id}"; this build offers {offered}')
        return entry


REGISTRY = Registry()
REGISTRY.register(EngineEntry("local", "engines.local.factory"))
REGISTRY.register(EngineEntry("reference", "engines.reference.factory"))
REGISTRY.register(EngineEntry("cortexdb", "engines.cortex.cortexdb"))
REGISTRY.register(EngineEntry("tinyhumans", "engines.cortex.tinyhumans"))


def list_engines() -> list[EngineDescriptor]:
    """The descriptors of every engine this build offers, in registration order."""
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
