"""The one settings model every process reads at start-up (environment `TINYMEMORY_*`, optional TOML).

Precedence, highest first: explicit arguments, environment variables, the TOML file named by
`TINYMEMORY_CONFIG` (or `--config`), defaults. Nothing below the command line and the API's app
factory reads the environment: they pass these typed values down.
"""

from __future__ import annotations

import contextvars
import os
from pathlib import Path
from typing import Any, Literal

import phonenumbers
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from engines.contract import ConfigError
from engines.registry import MemoryConfig
from engines.settings import EngineCredential, EngineSettings, masked_endpoint
from pipeline.convert import OcrSettings

_CONFIG_FILE: contextvars.ContextVar[str | None] = contextvars.ContextVar("tinymemory_config_file", default=None)


def default_data_dir() -> Path:
    """`$XDG_DATA_HOME/tinymemory`, else `~/.local/share/tinymemory`."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "tinymemory"


class ScrubSettings(BaseModel):
    """How items are scrubbed: `regions`, the ISO 3166 codes of the countries the texts come from (`["PH",
    "TR"]`), whose phone numbers are then found in their national formats too (`Policy.regions`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    regions: tuple[str, ...] = ()

    @field_validator("regions")
    @classmethod
    def _known(cls, regions: tuple[str, ...]) -> tuple[str, ...]:
        upper = tuple(region.strip().upper() for region in regions)
        unknown = [region for region in upper if region not in phonenumbers.SUPPORTED_REGIONS]
        if unknown:
            names = ", ".join(map(repr, unknown))
            raise ConfigError(f'scrub.regions: {names} is not a region phonenumbers knows (ISO 3166, such as "PH")')
        return upper


class Settings(BaseSettings):
    """Everything a tinymemory process is configured with. Secrets are `SecretStr`: printing hides them."""

    model_config = SettingsConfigDict(env_prefix="TINYMEMORY_", env_nested_delimiter="__", extra="ignore")

    data_dir: Path = Field(default_factory=default_data_dir)
    engine: str = "local"
    engines: dict[str, EngineSettings] = Field(default_factory=dict)
    engine_key: SecretStr | None = None
    redis_url: SecretStr = SecretStr("redis://127.0.0.1:6379/0")
    convert_workers: int = Field(default_factory=lambda: max(1, min(4, os.cpu_count() or 1)))
    # Documents converted at once in one batch; None: twice the process's converter processes, at least 2.
    convert_concurrency: int | None = Field(default=None, ge=1)
    convert_timeout_s: float = 60.0
    convert_memory_mb: int = 1024
    # Scans and images read by OCR (Tesseract): languages, resolution and caps; TINYMEMORY_OCR__LANGUAGES='["eng",
    # "deu"]' or `[ocr] languages = ["eng", "deu"]` in the TOML file. A language not installed stops start-up.
    ocr: OcrSettings = Field(default_factory=OcrSettings)
    # The countries the texts come from, for their phone numbers' national formats: TINYMEMORY_SCRUB__REGIONS=
    # '["PH", "TR"]' or `[scrub] regions = ["PH", "TR"]` in the TOML file.
    scrub: ScrubSettings = Field(default_factory=ScrubSettings)
    max_file_mb: float = 10.0
    item_max_chars: int = 8 * 1024 * 1024
    # Calls of one store_many the engine answers Unavailable before giving up: in embedded mode the units
    # become dead letters; in a Celery task (`task_store_attempts`) the task is retried later with backoff.
    store_attempts: int = Field(default=5, ge=1)
    task_store_attempts: int = Field(default=3, ge=1)
    # Source kinds from outside this package: kind name -> module path holding its `SPEC` (sources.registry),
    # JSON in TINYMEMORY_SOURCE_KINDS. It wins over an installed `tinymemory.sources` entry point of that name.
    source_kinds: dict[str, str] = Field(default_factory=dict)
    # Network sources: private, loopback and link-local addresses stay unreachable unless this is set (tests
    # with loopback servers, an intranet deployment); it is logged whenever a process starts with it on.
    allow_private_networks: bool = False
    fetch_timeout_s: float = Field(default=20.0, gt=0)
    user_agent: str = "tm-reader"
    github_api_url: str = "https://api.github.com"
    github_token: SecretStr | None = None
    state: Literal["sqlite", "redis"] = "sqlite"
    redis_prefix: str = "tm:"
    task_soft_limit_s: float = 540.0
    task_hard_limit_s: float = 600.0
    visibility_timeout_s: float = 3600.0
    sync_lease_s: float = 900.0
    beat_tick_s: float = 10.0
    metrics_port: int = 9464
    # Where a host's worker processes keep their metric counters; None: one folder per port in the temp dir,
    # shared by the workers of a host so that whichever serves the port counts every one of them once.
    metrics_dir: Path | None = None
    log_json: bool = False
    # The read API (`tinymemory serve`, and `tinymemory up`): where it listens (port 0: any free port), and the
    # tokens file; without tokens it may listen on loopback only.
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8765, ge=0, le=65535)
    tokens_file: Path | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config = _CONFIG_FILE.get() or os.environ.get("TINYMEMORY_CONFIG")
        if config:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(config)))
        return tuple(sources)

    @classmethod
    def load(cls, config: Path | None = None) -> Settings:
        """The settings from the environment and `config` (a TOML file; else `TINYMEMORY_CONFIG`'s)."""
        token = _CONFIG_FILE.set(str(config) if config is not None else None)
        try:
            return cls()
        finally:
            _CONFIG_FILE.reset(token)

    @property
    def memory_file(self) -> Path:
        return self.data_dir / "memory.sqlite3"

    @property
    def state_file(self) -> Path:
        return self.data_dir / "state.sqlite3"

    @property
    def token_path(self) -> Path:
        """The tokens file: the configured one, else `tokens.json` in the data directory."""
        return self.tokens_file if self.tokens_file is not None else self.data_dir / "tokens.json"

    def memory_config(self) -> MemoryConfig:
        """The engine configuration, with the local engine's file under the data directory by default."""
        engines = dict(self.engines)
        local = engines.get("local", EngineSettings())
        if local.path is None:
            engines["local"] = local.model_copy(update={"path": self.memory_file})
        return MemoryConfig(engine=self.engine, engines=engines)

    def credential(self) -> EngineCredential:
        key = self.engine_key.get_secret_value() if self.engine_key else None
        return EngineCredential.of(key) if key else EngineCredential.none()

    def printable(self) -> dict[str, Any]:
        """The settings as JSON-ready data with every secret masked: the `SecretStr` fields, and a password
        written into an engine's endpoint (`postgresql://user:password@host/db`)."""
        shown = self.model_dump(mode="json")
        for engine in shown.get("engines", {}).values():
            if engine.get("endpoint"):
                engine["endpoint"] = masked_endpoint(engine["endpoint"])
        return shown
