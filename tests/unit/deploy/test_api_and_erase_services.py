"""The deploy files run the read API (`tinymemory serve`) and a worker of erasures' own, each the way the code
needs: the API on 0.0.0.0 with tokens on a volume and the state on Redis, the erase worker on `tm.erase`
alone, both on the engine's data volume where the engine is local (on none where it is CortexDB)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from engines.contract import ConfigError
from tests.unit.deploy.compose_sets import ENGINE_VOLUMES, service_of
from tests.unit.deploy.test_deploy_files import (
    COMPOSE_FILE,
    DATA_CLAIM,
    DOCKERFILE,
    K8S_DIR,
    ROOT,
    Dockerfile,
    compose_argv,
    compose_env,
    container_argv,
    containers,
    declared_ports,
    documents,
    k8s_docs,
    parse_dockerfile,
    queues_of,
    subcommand_of,
    volume_mounts,
    words,
    workloads,
)
from worker.control import check_listen
from worker.settings import Settings
from worker.token_store import TokenStore

CLUSTER_TOML = ROOT / "deploy" / "cluster.toml"
BAKED_AT = "/etc/tinymemory/cluster.toml"


@pytest.fixture(scope="module")
def image() -> Dockerfile:
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def manifests() -> dict[str, list[dict[str, Any]]]:
    return k8s_docs()


@pytest.fixture(scope="module")
def cluster_settings() -> Settings:
    return Settings.load(CLUSTER_TOML)


def test_the_cluster_settings_put_the_state_on_redis_and_the_api_on_every_address(cluster_settings: Settings) -> None:
    assert cluster_settings.state == "redis"
    assert cluster_settings.api_host == "0.0.0.0"
    assert str(cluster_settings.token_path).startswith("/data/")  # on the volume every role mounts
    with pytest.raises(ConfigError, match="no tokens"):
        check_listen(cluster_settings.api_host, TokenStore(Path("/nonexistent/tokens.json")))
    assert set(tomllib.loads(CLUSTER_TOML.read_text())) <= set(Settings.model_fields)


def test_the_image_carries_the_cluster_settings_where_compose_and_k8s_name_them(
    image: Dockerfile, compose: dict[str, Any], manifests: dict[str, list[dict[str, Any]]]
) -> None:
    copies = [rest.split() for name, rest in image.final if name == "COPY" and "--from=" not in rest]
    assert ["deploy/cluster.toml", BAKED_AT] in copies
    for name, service in compose["services"].items():
        if subcommand_of(compose_argv(name, compose, image)):
            assert compose_env(service).get("TINYMEMORY_CONFIG") == BAKED_AT, name
    (config,) = documents(manifests, "ConfigMap")
    assert config["data"]["TINYMEMORY_CONFIG"] == BAKED_AT


def test_compose_serves_the_api_with_tokens_on_a_volume(
    compose: dict[str, Any], image: Dockerfile, cluster_settings: Settings, profile: str
) -> None:
    services = compose["services"]
    (api,) = [name for name in services if subcommand_of(compose_argv(name, compose, image)) == "serve"]
    service = services[api]
    tokens = compose_env(service).get("TINYMEMORY_TOKENS_FILE") or str(cluster_settings.token_path)
    (volume,) = [source for source, target in volume_mounts(service) if tokens.startswith(target + "/")]
    assert volume in compose["volumes"]
    # Where the engine is local, the tokens are on its volume, which `docker compose run --rm worker tokens
    # add` writes too; a CortexDB set keeps them on a volume of their own, holding nothing of the engine.
    assert (volume in ENGINE_VOLUMES[profile]) == bool(ENGINE_VOLUMES[profile])
    port = cluster_settings.api_port
    assert service["ports"] == [f"127.0.0.1:{port}:{port}"]  # published on the host's loopback only
    assert f"127.0.0.1:{port}/healthz" in " ".join(words(service["healthcheck"]["test"]))
    assert "tinymemory api" not in COMPOSE_FILE.read_text()


def test_compose_runs_one_erase_worker_on_its_own_queue(
    compose: dict[str, Any], image: Dockerfile, profile: str
) -> None:
    services = compose["services"]
    erasers = [name for name in services if "tm.erase" in queues_of(compose_argv(name, compose, image))]
    assert erasers == [service_of("erase-worker", profile)]
    assert queues_of(compose_argv(erasers[0], compose, image)) == ["tm.erase"]
    at_data = {source for source, target in volume_mounts(services[erasers[0]]) if target == "/data"}
    assert at_data == ENGINE_VOLUMES[profile]  # it erases from the engine, wherever that is


def test_k8s_serves_the_api_behind_a_service_on_its_probed_port(
    manifests: dict[str, list[dict[str, Any]]], image: Dockerfile, cluster_settings: Settings
) -> None:
    served = [
        (doc, container)
        for _, doc in workloads(manifests)
        for container in containers(doc)
        if subcommand_of(container_argv(container, image)) == "serve"
    ]
    assert len(served) == 1
    deployment, container = served[0]
    ports = declared_ports(container)
    assert ports["http"] == cluster_settings.api_port
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    data = [m["name"] for m in container["volumeMounts"] if m["mountPath"] == "/data"]
    assert data and volumes[data[0]]["persistentVolumeClaim"]["claimName"] == DATA_CLAIM
    (service,) = [s for s in documents(manifests, "Service") if s["metadata"]["name"] == "tinymemory-api"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert all(labels.get(key) == value for key, value in service["spec"]["selector"].items())
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert not any("tinymemory api" in path.read_text() for path in K8S_DIR.glob("*.yaml"))


def test_k8s_runs_one_erase_worker_on_its_own_queue(
    manifests: dict[str, list[dict[str, Any]]], image: Dockerfile
) -> None:
    erasers = [
        doc
        for _, doc in workloads(manifests)
        if any("tm.erase" in queues_of(container_argv(c, image)) for c in containers(doc))
    ]
    assert [doc["metadata"]["name"] for doc in erasers] == ["tinymemory-erase-worker"]
    assert erasers[0]["spec"]["replicas"] == 1
    (container,) = containers(erasers[0])
    assert queues_of(container_argv(container, image)) == ["tm.erase"]
