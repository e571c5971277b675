"""The sets of services docker-compose.yml defines (compose profiles), selected as `docker compose` does.

A service without `profiles` (Redis, Flower) is in every set; one with them only in the sets it names.
The set a plain `docker compose up` starts is the `COMPOSE_PROFILES` of the committed `.env`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

ROOT: Final = Path(__file__).resolve().parents[3]
COMPOSE_FILE: Final = ROOT / "docker-compose.yml"
DOTENV: Final = ROOT / ".env"

LOCAL: Final = "local"
CORTEXDB: Final = "cortexdb"
POSTGRES: Final = "postgres"
PROFILES: Final = (LOCAL, CORTEXDB, POSTGRES)
# The named volumes that hold the engine's data, mounted where the engine is opened, by set (the PostgreSQL set's
# data is the database's, on a volume only the database mounts).
ENGINE_VOLUMES: Final[Mapping[str, frozenset[str]]] = {
    LOCAL: frozenset({"tinymemory-data"}),
    CORTEXDB: frozenset(),
    POSTGRES: frozenset(),
}
# A role's service is named `<role>` in the local set and `<role>-<set>` in the others.
_SUFFIX: Final = {LOCAL: "", CORTEXDB: "-cortexdb", POSTGRES: "-postgres"}

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def load_compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return loaded


def dotenv_value(name: str, path: Path = DOTENV) -> str | None:
    """The value `path` gives `name` (the last line that sets it), without quotes."""
    values = [line.split("=", 1)[1].strip().strip("'\"") for line in _lines(path) if line.startswith(f"{name}=")]
    return values[-1] if values else None


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines()] if path.exists() else []


def default_profiles() -> set[str]:
    """The profiles a plain `docker compose up` runs with: the committed `.env`'s `COMPOSE_PROFILES`."""
    return {p.strip() for p in (dotenv_value("COMPOSE_PROFILES") or "").split(",") if p.strip()}


def selected(compose: Mapping[str, Any], profiles: set[str]) -> dict[str, Any]:
    """`compose` with only the services that run under `profiles`."""
    services = {
        name: service
        for name, service in compose["services"].items()
        if not service.get("profiles") or set(service["profiles"]) & profiles
    }
    return {**compose, "services": services}


def service_of(role: str, profile: str) -> str:
    """The name of `role`'s service in the set of `profile`."""
    return role + _SUFFIX[profile]


def role_of(name: str) -> str:
    """The role a service plays, whichever set it is in."""
    return next((name.removesuffix(s) for s in _SUFFIX.values() if s and name.endswith(s)), name)


def interpolated(value: str, env: Mapping[str, str]) -> str:
    """`value` with `${NAME}` and `${NAME:-default}` replaced from `env`, as compose interpolates."""
    return _VARIABLE.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)
