"""The PostgreSQL set of docker-compose.yml and the Kubernetes component in deploy/k8s/postgres: every role on the
engine's database, the database on pgvector's image with a volume of its own, its password the engine key."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from engines.postgres import PostgresEngine
from tests.unit.deploy.compose_sets import ENGINE_VOLUMES, LOCAL, POSTGRES, ROOT, interpolated, load_compose, selected
from tests.unit.deploy.test_deploy_files import compose_env, compose_service_is_ours, volume_mounts
from worker.settings import Settings
from worker.wiring import close_engine, open_engine

KEY = "tm-fake-database-password-4d1e"
COMPONENT = ROOT / "deploy" / "k8s" / "postgres"


def _roles() -> dict[str, dict[str, Any]]:
    services = selected(load_compose(), {POSTGRES})["services"]
    return {name: service for name, service in services.items() if compose_service_is_ours(service)}


def _settings(service: dict[str, Any], shell: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in [n for n in os.environ if n.startswith("TINYMEMORY_")]:
        monkeypatch.delenv(name)
    for name, value in compose_env(service).items():
        if name != "TINYMEMORY_CONFIG":
            monkeypatch.setenv(name, interpolated(value, shell))
    return Settings.load(ROOT / "deploy" / "cluster.toml")


def test_every_role_of_the_postgres_set_opens_the_database_with_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    roles = _roles()
    assert {name.removesuffix("-postgres") for name in roles} == {"worker", "erase-worker", "beat", "watcher", "api"}
    for name, service in roles.items():
        settings = _settings(service, {"TINYMEMORY_ENGINE_KEY": KEY}, monkeypatch)
        assert settings.engine == POSTGRES, name
        endpoint = settings.memory_config().engines[POSTGRES].endpoint
        assert endpoint == "postgresql://tinymemory@postgres:5432/tinymemory", name
        assert settings.credential().static == KEY, name
        assert service["depends_on"]["postgres"] == {"condition": "service_healthy"}, name
        assert not {source for source, _ in volume_mounts(service)} & ENGINE_VOLUMES[LOCAL], name


def test_the_postgres_set_runs_pgvector_on_a_volume_with_the_key_as_password() -> None:
    database = selected(load_compose(), {POSTGRES})["services"]["postgres"]
    assert database["image"].startswith("pgvector/pgvector:")
    assert ("postgres-data", "/var/lib/postgresql/data") in volume_mounts(database)
    assert interpolated(compose_env(database)["POSTGRES_PASSWORD"], {"TINYMEMORY_ENGINE_KEY": KEY}) == KEY
    assert "pg_isready" in database["healthcheck"]["test"]
    assert "postgres" not in selected(load_compose(), {LOCAL})["services"]


def test_a_role_of_the_postgres_set_builds_the_engine(monkeypatch: pytest.MonkeyPatch, postgres_url: str) -> None:
    worker = _roles()["worker-postgres"]
    settings = _settings(worker, {"TINYMEMORY_ENGINES__POSTGRES__ENDPOINT": postgres_url}, monkeypatch)
    monkeypatch.setenv("TINYMEMORY_ENGINES__POSTGRES__EMBEDDER__KIND", "hashing")
    engine = open_engine(Settings.load(ROOT / "deploy" / "cluster.toml"))
    try:
        assert isinstance(engine, PostgresEngine) and settings.engine == POSTGRES
    finally:
        close_engine(engine)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """deploy/k8s with the postgres component, as `kubectl kustomize` renders an overlay naming both."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: the component is not rendered")
    root = tmp_path_factory.mktemp("k8s")
    shutil.copytree(ROOT / "deploy" / "k8s", root / "base", ignore=shutil.ignore_patterns("postgres"))
    shutil.copytree(COMPONENT, root / "postgres")
    overlay = root / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - ../base\ncomponents:\n  - ../postgres\n"
    )
    done = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_the_k8s_component_points_every_role_at_its_database(rendered: list[dict[str, Any]]) -> None:
    config = _named(rendered, "ConfigMap", "tinymemory-config")["data"]
    assert config["TINYMEMORY_ENGINE"] == POSTGRES
    host = config["TINYMEMORY_ENGINES__POSTGRES__ENDPOINT"].split("@", 1)[1].split(":", 1)[0]
    service = _named(rendered, "Service", "postgres")
    assert host == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"
    database = _named(rendered, "StatefulSet", "postgres")["spec"]
    (container,) = database["template"]["spec"]["containers"]
    assert container["image"].startswith("pgvector/pgvector:")
    password = next(e for e in container["env"] if e["name"] == "POSTGRES_PASSWORD")
    assert password["valueFrom"]["secretKeyRef"] == {"name": "tinymemory-secrets", "key": "TINYMEMORY_ENGINE_KEY"}
    assert database["volumeClaimTemplates"][0]["metadata"]["name"] == "postgres-data"


def test_the_k8s_component_frees_the_workers_from_the_shared_volume(rendered: list[dict[str, Any]]) -> None:
    for name in ("tinymemory-worker", "tinymemory-erase-worker"):
        volumes = _named(rendered, "Deployment", name)["spec"]["template"]["spec"]["volumes"]
        data = next(v for v in volumes if v["name"] == "data")
        assert "persistentVolumeClaim" not in data and "emptyDir" in data, name
    api = _named(rendered, "Deployment", "tinymemory-api")["spec"]["template"]["spec"]["volumes"]
    assert any(v.get("persistentVolumeClaim", {}).get("claimName") == "tinymemory-data" for v in api)


def test_the_component_files_are_what_its_kustomization_lists() -> None:
    listed = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    named = {*listed["resources"], *(p["path"] for p in listed["patches"])}
    assert named == {p.name for p in COMPONENT.glob("*.yaml")} - {"kustomization.yaml"}
    assert all(Path(COMPONENT / n).exists() for n in named)
