"""docker-compose.yml's sets: a plain `docker compose up` runs the local one unchanged, and
`--profile cortexdb` runs the same roles against a CortexDB endpoint with no engine volume (`--profile postgres`,
against a PostgreSQL database: tests/unit/engines/postgres/test_deploy.py).

The other compose tests run over both sets (tests/unit/deploy/conftest.py); these check what sets them
apart, and, where the `docker compose` command is installed, that it selects the sets as these tests do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest

from engines.contract import ConfigError
from tests.unit.deploy.compose_sets import (
    CORTEXDB,
    ENGINE_VOLUMES,
    LOCAL,
    POSTGRES,
    PROFILES,
    ROOT,
    default_profiles,
    dotenv_value,
    interpolated,
    load_compose,
    role_of,
    selected,
    service_of,
)
from tests.unit.deploy.test_deploy_files import (
    ENV_EXAMPLE,
    compose_env,
    compose_service_is_ours,
    volume_mounts,
)
from worker.settings import Settings
from worker.wiring import close_engine, open_engine

CLUSTER_TOML = ROOT / "deploy" / "cluster.toml"
ENDPOINT_VARIABLE = "TINYMEMORY_ENGINES__CORTEXDB__ENDPOINT"
FAKE_ENDPOINT = "https://cortex.example.test:8443"
FAKE_KEY = "tm-fake-cortex-key-7f3a"
# What a role's two services may differ in: the set, the environment and the volumes.
PER_SET_KEYS = frozenset({"profiles", "environment", "volumes"})


def _ours(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: service for name, service in compose["services"].items() if compose_service_is_ours(service)}


def _settings_of(service: dict[str, Any], shell: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings a container of `service` starts with, when the shell holds `shell`."""
    for name in [n for n in os.environ if n.startswith("TINYMEMORY_")]:
        monkeypatch.delenv(name)
    for name, value in compose_env(service).items():
        if name != "TINYMEMORY_CONFIG":  # baked into the image at that path; read from the repository here
            monkeypatch.setenv(name, interpolated(value, shell))
    return Settings.load(CLUSTER_TOML)


def test_a_plain_up_starts_the_local_set() -> None:
    assert default_profiles() == {LOCAL}
    # Copying the example over .env, as the README says one may, keeps that.
    assert dotenv_value("COMPOSE_PROFILES", ENV_EXAMPLE) == LOCAL
    compose = load_compose()
    for name, service in _ours(compose).items():
        assert len(service.get("profiles", [])) == 1 and service["profiles"][0] in PROFILES, name
    for name, service in compose["services"].items():
        if not compose_service_is_ours(service):  # Redis and Flower serve every set, the database its own
            assert service.get("profiles", []) == ([POSTGRES] if name == POSTGRES else []), name


@pytest.mark.parametrize("other", [CORTEXDB, POSTGRES])
def test_every_set_runs_the_same_roles_the_same_way(other: str) -> None:
    compose = load_compose()
    local, others = (_ours(selected(compose, {p})) for p in (LOCAL, other))
    assert {role_of(n) for n in local} == {role_of(n) for n in others} == set(local)
    assert not set(local) & set(others)
    for role, service in local.items():
        twin = others[service_of(role, other)]
        # The PostgreSQL set's roles also wait for their database.
        for key in (set(service) | set(twin)) - PER_SET_KEYS - ({"depends_on"} if other == POSTGRES else set()):
            assert service.get(key) == twin.get(key), f"{role}: {key} differs between the sets"
        watched = {m for m in volume_mounts(service) if m[0].startswith((".", "/"))}
        assert watched == {m for m in volume_mounts(twin) if m[0].startswith((".", "/"))}, role


def test_the_cortexdb_set_mounts_no_engine_volume() -> None:
    compose = selected(load_compose(), {CORTEXDB})
    for name, service in _ours(compose).items():
        mounted = {source for source, _ in volume_mounts(service)}
        assert not mounted & ENGINE_VOLUMES[LOCAL], f"{name} mounts the local engine's volume"


def test_the_cortexdb_set_points_every_role_at_the_endpoint_and_key_from_the_shell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compose = selected(load_compose(), {CORTEXDB})
    shell = {ENDPOINT_VARIABLE: FAKE_ENDPOINT, "TINYMEMORY_ENGINE_KEY": FAKE_KEY}
    for name, service in _ours(compose).items():
        settings = _settings_of(service, shell, monkeypatch)
        assert settings.engine == CORTEXDB, name
        assert settings.memory_config().engines[CORTEXDB].endpoint == FAKE_ENDPOINT, name
        assert settings.credential().static == FAKE_KEY, name
        assert settings.state == "redis" and str(settings.token_path).startswith("/tokens/"), name
    engine = open_engine(settings)
    try:
        assert engine.descriptor().id == CORTEXDB
    finally:
        close_engine(engine)


def test_the_cortexdb_set_without_a_key_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = selected(load_compose(), {CORTEXDB})["services"][service_of("worker", CORTEXDB)]
    settings = _settings_of(worker, {}, monkeypatch)
    assert settings.memory_config().engines[CORTEXDB].endpoint == ""  # CortexDB's hosted API, by default
    with pytest.raises(ConfigError, match='engine "cortexdb" needs a key'):
        open_engine(settings)


def test_the_local_set_leaves_the_engine_to_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    compose = selected(load_compose(), {LOCAL})
    for name, service in _ours(compose).items():
        assert not {n for n in compose_env(service) if n.startswith("TINYMEMORY_ENGINE")}, name
        settings = _settings_of(service, {}, monkeypatch)
        assert settings.engine == LOCAL and str(settings.memory_file).startswith("/data/"), name


def _compose_cli(*args: str, profiles: str | None = None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "COMPOSE_PROFILES"}
    if profiles is not None:
        env["COMPOSE_PROFILES"] = profiles
    done = subprocess.run(
        ["docker", "compose", *args, "config", "--format", "json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded: dict[str, Any] = json.loads(done.stdout)
    return loaded


def _has_compose() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30).returncode == 0


@pytest.mark.skipif(not _has_compose(), reason="the `docker compose` command is not installed")
def test_docker_compose_selects_the_sets_as_these_tests_do() -> None:
    compose = load_compose()
    local, cortexdb = (set(selected(compose, {p})["services"]) for p in PROFILES)
    assert set(_compose_cli()["services"]) == local  # .env's COMPOSE_PROFILES
    assert set(_compose_cli("--profile", CORTEXDB)["services"]) == cortexdb  # the flag wins over .env
    assert set(_compose_cli(profiles=CORTEXDB)["services"]) == cortexdb  # and so does the shell
    resolved = _compose_cli("--profile", CORTEXDB)["services"][service_of("api", CORTEXDB)]
    assert resolved["environment"]["TINYMEMORY_ENGINE"] == CORTEXDB
    assert {volume.get("source") for volume in resolved.get("volumes", [])} == {"api-tokens"}
