"""The deployment files stay honest: every `tinymemory` command line they run exists in the CLI.

`docker-compose.yml`, `deploy/k8s/*.yaml` and `deploy/Dockerfile` are parsed (no Docker, no
cluster); every command line a container runs (compose `entrypoint` + `command`, Kubernetes
`command` + `args` over the image's ENTRYPOINT, healthchecks, exec probes, `sh -c` scripts) that
invokes `tinymemory` is checked against the click command built from `tinymemory_ingest.cli.main`: the
subcommand path exists and every option it passes belongs to that command. Around that, the
structure the pipeline relies on: Redis durable, the engine's data volume where the engine is
opened, real queue names, resources and probes, a non-root image without compilers, and an
`.env.example` that documents every variable the files use.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Annotated, Any

import pytest
import typer
import yaml

from tests.unit.deploy.compose_sets import COMPOSE_FILE, ENGINE_VOLUMES, ROOT, role_of
from tinymemory_ingest.cli import app
from worker.redis.keys import Keys
from worker.settings import Settings

try:
    from worker.cluster.queues import ALL_QUEUES as QUEUES
except ImportError:  # pragma: no cover - the queue module lands with the distributed worker
    # Until then, the queues named in ARCHITECTURE.md and the issue.
    QUEUES = ("tm.sync", "tm.ingest", "tm.backfill", "tm.erase")

K8S_DIR = ROOT / "deploy" / "k8s"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERIGNORE = ROOT / ".dockerignore"

IMAGE_NAME = "tinymemory-ingest"
(DATA_CLAIM,) = ENGINE_VOLUMES["local"]
DEFAULT_METRICS_PORT = 9464
# The subcommands that open the memory engine, so need its data directory where the engine is local.
ENGINE_COMMANDS = frozenset({"worker", "api", "up", "ingest", "recall", "fetch", "list", "backfill"})
# Kubernetes manifests that are examples to copy, not resources to apply.
EXAMPLE_MANIFESTS = frozenset({"secret.example.yaml"})
WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet"})
CLUSTER_SCOPED_KINDS = frozenset({"Namespace", "PersistentVolume", "StorageClass", "ClusterRole"})
SHELLS = frozenset({"sh", "bash", "dash", "ash"})
SHELL_OPERATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", ";;"})
COMPILERS = ("gcc", "g++", "cc", "c++", "clang", "build-essential", "make", "cmake", "rustc", "cargo")
STANDARD_ENV = re.compile(r"^(COMPOSE_[A-Z0-9_]+|TZ|LANG|LC_[A-Z]+|PYTHON[A-Z0-9_]*)$")
SECRET_NAME = re.compile(r"(KEY|SECRET|TOKEN|PASSWORD)")


# --- the command lines the files run ----------------------------------------------------------


@dataclass(frozen=True)
class Invocation:
    """One command line a container runs, and where it was found."""

    where: str
    argv: tuple[str, ...]

    @property
    def line(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True)
class Dockerfile:
    stages: tuple[tuple[tuple[str, str], ...], ...]  # per stage: (INSTRUCTION, rest)

    @property
    def final(self) -> tuple[tuple[str, str], ...]:
        return self.stages[-1]

    def last(self, instruction: str) -> str | None:
        values = [rest for name, rest in self.final if name == instruction]
        return values[-1] if values else None

    def exec_form(self, instruction: str) -> tuple[str, ...]:
        rest = self.last(instruction)
        if rest is None:
            return ()
        value = json.loads(rest) if rest.startswith("[") else ["/bin/sh", "-c", rest]
        return tuple(value)

    def env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for name, rest in self.final:
            if name != "ENV":
                continue
            words = shlex.split(rest)
            if words and "=" not in words[0]:  # legacy `ENV KEY value`
                env[words[0]] = " ".join(words[1:])
                continue
            env.update(word.split("=", 1) for word in words)
        return env


def parse_dockerfile(text: str) -> Dockerfile:
    """Instructions per stage, continuation lines joined, comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    stages: list[list[tuple[str, str]]] = []
    for line in lines:
        name, _, rest = line.partition(" ")
        name = name.upper()
        if name == "FROM":
            stages.append([])
        if not stages:  # ARG before the first FROM
            continue
        stages[-1].append((name, rest.strip()))
    return Dockerfile(tuple(tuple(stage) for stage in stages))


def words(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Compose and exec forms: a list as is, a string split the way compose splits it."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(shlex.split(value))
    return tuple(str(word) for word in value)


def shell_commands(argv: tuple[str, ...]) -> list[tuple[str, ...]]:
    """`argv`, or the simple commands of its script when it is `sh -c SCRIPT`."""
    if not argv or PurePosixPath(argv[0]).name not in SHELLS or "-c" not in argv[1:-1]:
        return [argv]
    script = argv[argv.index("-c", 1) + 1]
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[tuple[str, ...]] = []
    current: list[str] = []
    for token in [*lexer, ";"]:
        if token in SHELL_OPERATORS:
            commands.append(strip_prefixes(current))
            current = []
        else:
            current.append(token)
    return [command for command in commands if command]


def strip_prefixes(command: list[str]) -> tuple[str, ...]:
    """Drop `exec` and leading `NAME=value` assignments from a shell command."""
    rest = list(command)
    while rest and (rest[0] == "exec" or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", rest[0])):
        rest.pop(0)
    return tuple(rest)


def image_is_ours(image: str | None) -> bool:
    if not image:
        return False
    name = image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
    return name == IMAGE_NAME


def compose_service_is_ours(service: Mapping[str, Any]) -> bool:
    build = service.get("build")
    dockerfile = build.get("dockerfile") if isinstance(build, Mapping) else None
    return image_is_ours(service.get("image")) or dockerfile == "deploy/Dockerfile"


def healthcheck_argv(test: str | Sequence[str] | None) -> tuple[str, ...]:
    if test is None:
        return ()
    if isinstance(test, str):
        return ("/bin/sh", "-c", test)
    kind, *rest = [str(word) for word in test]
    if kind == "CMD":
        return tuple(rest)
    if kind == "CMD-SHELL":
        return ("/bin/sh", "-c", " ".join(rest))
    return ()  # NONE


def compose_invocations(compose: Mapping[str, Any], image: Dockerfile) -> Iterator[Invocation]:
    for name, service in compose["services"].items():
        ours = compose_service_is_ours(service)
        entrypoint = words(service.get("entrypoint")) if "entrypoint" in service else None
        command = words(service.get("command")) if "command" in service else None
        if entrypoint is None:
            entrypoint = image.exec_form("ENTRYPOINT") if ours else ()
        if command is None and "entrypoint" not in service:
            command = image.exec_form("CMD") if ours else ()
        argv = (*entrypoint, *(command or ()))
        if argv:
            yield Invocation(f"docker-compose.yml services.{name}", argv)
        check = healthcheck_argv((service.get("healthcheck") or {}).get("test"))
        if check:
            yield Invocation(f"docker-compose.yml services.{name}.healthcheck", check)


def k8s_docs() -> dict[str, list[dict[str, Any]]]:
    """Every manifest's documents, by file name (kustomization.yaml included)."""
    return {
        path.name: [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
        for path in sorted(K8S_DIR.glob("*.yaml"))
    }


def pod_spec(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    kind = doc.get("kind")
    if kind in WORKLOAD_KINDS or kind == "Job":
        return doc["spec"]["template"]["spec"]
    if kind == "CronJob":
        return doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return None


def containers(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = pod_spec(doc)
    if spec is None:
        return []
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def container_argv(container: Mapping[str, Any], image: Dockerfile) -> tuple[str, ...]:
    ours = image_is_ours(container.get("image"))
    command = words(container.get("command")) if "command" in container else None
    args = words(container.get("args")) if "args" in container else None
    if command is None:
        command = image.exec_form("ENTRYPOINT") if ours else ()
        if args is None:
            args = image.exec_form("CMD") if ours else ()
    return (*command, *(args or ()))


def k8s_invocations(docs: Mapping[str, list[dict[str, Any]]], image: Dockerfile) -> Iterator[Invocation]:
    for file, file_docs in docs.items():
        for doc in file_docs:
            for container in containers(doc):
                where = f"deploy/k8s/{file} {doc['kind']}/{doc['metadata']['name']} container {container['name']}"
                argv = container_argv(container, image)
                if argv:
                    yield Invocation(where, argv)
                for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                    exec_command = (container.get(probe) or {}).get("exec", {}).get("command")
                    if exec_command:
                        yield Invocation(f"{where} {probe}", words(exec_command))


def dockerfile_invocations(image: Dockerfile) -> Iterator[Invocation]:
    yield Invocation("deploy/Dockerfile ENTRYPOINT + CMD", (*image.exec_form("ENTRYPOINT"), *image.exec_form("CMD")))


def tinymemory_lines(invocations: Iterator[Invocation]) -> list[Invocation]:
    """Every simple command that runs `tinymemory`, shell scripts opened up."""
    return [
        Invocation(invocation.where, argv)
        for invocation in invocations
        for argv in shell_commands(invocation.argv)
        if argv and PurePosixPath(argv[0]).name == "tinymemory"
    ]


# --- checking a command line against the click command ----------------------------------------


# Typer builds click-style commands; recent typer releases carry their own copy of click, so the
# command, its parameters and its context are read by their click attributes, not by class.
Command = Any


def context_of(command: Command) -> Any:
    return command.context_class(command, info_name=command.name)


def is_group(command: Command) -> bool:
    return callable(getattr(command, "get_command", None))


def parameters(command: Command, kind: str) -> list[Any]:
    """The command's options (with --help) or arguments: `kind` is click's `param_type_name`."""
    return [param for param in command.get_params(context_of(command)) if param.param_type_name == kind]


def options_of(command: Command) -> dict[str, Any]:
    return {name: option for option in parameters(command, "option") for name in (*option.opts, *option.secondary_opts)}


def takes_value(option: Any) -> bool:
    return not option.is_flag and not option.count


def argument_problems(command: Command, path: str, positionals: int) -> list[str]:
    arguments = parameters(command, "argument")
    required = sum(max(arg.nargs, 1) for arg in arguments if arg.required)
    variadic = any(arg.nargs < 0 for arg in arguments)
    capacity = sum(arg.nargs for arg in arguments if arg.nargs > 0)
    if positionals < required:
        names = ", ".join((arg.metavar or arg.name).upper() for arg in arguments if arg.required)
        return [f"`{path}` is missing its argument(s) {names}"]
    if not variadic and positionals > capacity:
        return [f"`{path}` takes {capacity} argument(s), the line passes {positionals}"]
    return []


def cli_problems(root: Command, argv: Sequence[str]) -> list[str]:
    """What in `argv` (`tinymemory ...`) the command line does not offer; empty when it all exists."""
    command, path, positionals, problems = root, "tinymemory", 0, []
    rest = list(argv[1:])
    while rest:
        token = rest.pop(0)
        if token == "--":
            positionals += len(rest)
            break
        if token.startswith("-") and token != "-":
            name, has_value, _ = token.partition("=")
            option = options_of(command).get(name)
            if option is None:
                # Whether it would take a value is unknown, so the positional count is left unchecked.
                problems.append(f"`{path}` has no option {name}")
            elif not has_value and takes_value(option):
                del rest[: max(option.nargs, 1)]
            continue
        if is_group(command):
            found = command.get_command(context_of(command), token)
            if found is None:
                return [*problems, f"no command `{path} {token}`"]
            command, path = found, f"{path} {token}"
            continue
        positionals += 1
    if "--help" in argv or problems:
        return problems
    if is_group(command):
        return [*problems, f"`{path}` needs a subcommand"]
    return [*problems, *argument_problems(command, path, positionals)]


@pytest.fixture(scope="module")
def cli() -> Command:
    return typer.main.get_command(app)


@pytest.fixture(scope="module")
def image() -> Dockerfile:
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def manifests() -> dict[str, list[dict[str, Any]]]:
    return k8s_docs()


def all_tinymemory_lines(
    compose: Mapping[str, Any], manifests: Mapping[str, Any], image: Dockerfile
) -> list[Invocation]:
    return [
        *tinymemory_lines(dockerfile_invocations(image)),
        *tinymemory_lines(compose_invocations(compose, image)),
        *tinymemory_lines(k8s_invocations(manifests, image)),
    ]


def test_every_tinymemory_command_line_in_the_deploy_files_exists_in_the_cli(cli, compose, manifests, image):
    report: list[str] = []
    missing: set[str] = set()
    for invocation in all_tinymemory_lines(compose, manifests, image):
        problems = cli_problems(cli, invocation.argv)
        missing.update(problems)
        report.extend(f"  {invocation.where}: `{invocation.line}`: {problem}" for problem in problems)
    assert not report, (
        "the deploy files run `tinymemory` command lines the CLI does not offer.\nMissing:\n"
        + "\n".join(f"  - {problem}" for problem in sorted(missing))
        + "\nWhere:\n"
        + "\n".join(report)
    )


def test_the_collector_finds_every_role(compose, manifests, image):
    compose_lines = tinymemory_lines(compose_invocations(compose, image))
    k8s_lines = tinymemory_lines(k8s_invocations(manifests, image))
    for lines in (compose_lines, k8s_lines):
        assert {line.argv[1] for line in lines} >= {"worker", "beat", "watch", "status"}
    ours = {
        f"docker-compose.yml services.{name}"
        for name, svc in compose["services"].items()
        if compose_service_is_ours(svc)
    }
    assert ours == {line.where for line in compose_lines if not line.where.endswith(".healthcheck")}


# --- the checker itself: it must refuse what does not exist ----------------------------------

toy = typer.Typer()


@toy.callback()
def toy_main() -> None:
    """A toy command line for the checker's own tests."""


@toy.command()
def run(
    path: str,
    count: Annotated[int, typer.Option("--count", "-n")] = 1,
    loud: Annotated[bool, typer.Option("--loud/--quiet")] = False,
) -> None:
    """A command with an argument, a valued option and a flag."""


things = typer.Typer()
toy.add_typer(things, name="things")


@things.command("add")
def things_add(name: str) -> None:
    """A subcommand of a group."""


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        ("tinymemory run x --count 3 --loud", None),
        ("tinymemory run x --count=3 -n 4 --quiet", None),
        ("tinymemory things add a", None),
        ("tinymemory --help", None),
        ("tinymemory frobnicate", "no command `tinymemory frobnicate`"),
        ("tinymemory things frobnicate a", "no command `tinymemory things frobnicate`"),
        ("tinymemory run x --frobnicate", "`tinymemory run` has no option --frobnicate"),
        ("tinymemory run x --frobnicate=1", "`tinymemory run` has no option --frobnicate"),
        ("tinymemory run --count 3", "`tinymemory run` is missing its argument(s) PATH"),
        ("tinymemory run x y", "`tinymemory run` takes 1 argument(s), the line passes 2"),
        ("tinymemory things", "`tinymemory things` needs a subcommand"),
    ],
)
def test_the_checker_refuses_commands_and_options_that_do_not_exist(argv, problem):
    problems = cli_problems(typer.main.get_command(toy), shlex.split(argv))
    assert problems == ([problem] if problem else [])


def test_a_frobnicate_added_to_a_manifest_or_compose_is_caught(cli, compose, manifests, image):
    manifests = copy.deepcopy(manifests)
    worker = next(doc for doc in manifests["worker.yaml"] if doc["kind"] == "Deployment")
    worker["spec"]["template"]["spec"]["containers"][0]["args"] = ["frobnicate"]
    compose = copy.deepcopy(compose)
    (beat,) = [name for name in compose["services"] if role_of(name) == "beat"]
    compose["services"][beat]["healthcheck"]["test"] = "tinymemory status --json && tinymemory frobnicate --now"
    lines = [
        *tinymemory_lines(k8s_invocations(manifests, image)),
        *tinymemory_lines(compose_invocations(compose, image)),
    ]
    flagged = {line.where for line in lines if "no command `tinymemory frobnicate`" in cli_problems(cli, line.argv)}
    assert any(where.startswith("deploy/k8s/worker.yaml") for where in flagged)
    assert f"docker-compose.yml services.{beat}.healthcheck" in flagged


# --- docker-compose.yml -----------------------------------------------------------------------

COMPOSE_TOP_LEVEL = {"version", "name", "services", "volumes", "networks", "configs", "secrets"}
COMPOSE_ROLES = {"redis", "worker", "erase-worker", "beat", "watcher", "flower"}


def subcommand_of(argv: Sequence[str]) -> str | None:
    return argv[1] if len(argv) > 1 and PurePosixPath(argv[0]).name == "tinymemory" else None


def compose_argv(name: str, compose: Mapping[str, Any], image: Dockerfile) -> tuple[str, ...]:
    where = f"docker-compose.yml services.{name}"
    return next((inv.argv for inv in compose_invocations(compose, image) if inv.where == where), ())


def option_value(argv: Sequence[str], option: str) -> str | None:
    for index, word in enumerate(argv):
        if word == option and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith(option + "="):
            return word.split("=", 1)[1]
    return None


def queues_of(argv: Sequence[str]) -> list[str]:
    value = option_value(argv, "--queues")
    return [name.strip() for name in value.split(",")] if value else []


def volume_mounts(service: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each volume, short or long syntax."""
    mounts: list[tuple[str, str]] = []
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, _, target = volume.partition(":")
            mounts.append((source, target.split(":", 1)[0]) if target else ("", source))
        else:
            mounts.append((volume.get("source", ""), volume["target"]))
    return mounts


def compose_env(service: Mapping[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env if "=" in item)
    return {key: str(value) for key, value in env.items()}


def test_compose_has_the_pipeline_services_in_a_valid_shape(compose):
    assert set(compose) - COMPOSE_TOP_LEVEL <= {key for key in compose if key.startswith("x-")}
    services = compose["services"]
    assert isinstance(services, dict)
    assert {role_of(name) for name in services} >= COMPOSE_ROLES
    declared_volumes = set(compose.get("volumes") or {})
    for name, service in services.items():
        assert isinstance(service, dict), name
        assert "image" in service or "build" in service, f"{name} has neither image nor build"
        assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
        named = {source for source, _ in volume_mounts(service) if source and not source.startswith((".", "/", "~"))}
        assert named <= declared_volumes, f"{name} mounts undeclared volumes {named - declared_volumes}"
        depends = service.get("depends_on") or {}
        for other in depends:
            assert other in services, f"{name} depends on unknown service {other}"
            if isinstance(depends, dict) and depends[other].get("condition") == "service_healthy":
                assert services[other].get("healthcheck"), f"{name} waits for {other} to be healthy, it has no check"
        if compose_service_is_ours(service) and name != "redis":
            assert depends.get("redis", {}).get("condition") == "service_healthy", f"{name} must wait for redis"


def test_compose_redis_keeps_an_append_only_file_on_a_volume(compose):
    redis = compose["services"]["redis"]
    command = words(redis.get("command"))
    assert option_value(command, "--appendonly") == "yes", command
    assert any(
        target == "/data" and source in (compose.get("volumes") or {}) for source, target in volume_mounts(redis)
    )
    assert "redis-cli" in words(redis["healthcheck"]["test"]) and "ping" in words(redis["healthcheck"]["test"])


def compose_data_dir(service: Mapping[str, Any], image: Dockerfile) -> str | None:
    return compose_env(service).get("TINYMEMORY_DATA_DIR") or image.env().get("TINYMEMORY_DATA_DIR")


def test_compose_roles_that_open_the_engine_share_the_data_volume(compose, image, profile):
    # The local engine's file is on one volume every such role mounts; a CortexDB set mounts none at all.
    engine_volumes = ENGINE_VOLUMES[profile]
    sources = set()
    for name, service in compose["services"].items():
        if subcommand_of(compose_argv(name, compose, image)) not in ENGINE_COMMANDS:
            continue
        data_dir = compose_data_dir(service, image)
        mounted = [source for source, target in volume_mounts(service) if target == data_dir]
        assert bool(mounted) == bool(engine_volumes), f"{name} mounts {mounted} at its data dir {data_dir}"
        sources.update(mounted)
    assert sources == engine_volumes, sources


def test_compose_watched_folders_are_readable_by_the_sync_worker(compose, image):
    services = compose["services"]
    argvs = {name: compose_argv(name, compose, image) for name in services}
    watchers = [name for name, argv in argvs.items() if subcommand_of(argv) == "watch"]
    syncers = [name for name, argv in argvs.items() if "tm.sync" in queues_of(argv)]
    assert watchers and syncers
    for watcher in watchers:
        folders = {mount for mount in volume_mounts(services[watcher]) if mount[0].startswith((".", "/"))}
        assert folders, f"{watcher} watches nothing"
        for syncer in syncers:
            assert folders <= set(volume_mounts(services[syncer])), f"{syncer} cannot read what {watcher} watches"


def test_compose_worker_healthchecks_ask_the_metrics_port_the_worker_serves(compose, image):
    for name, service in compose["services"].items():
        argv = compose_argv(name, compose, image)
        if subcommand_of(argv) != "worker":
            continue
        port = option_value(argv, "--metrics-port") or str(DEFAULT_METRICS_PORT)
        assert f":{port}/metrics" in " ".join(words(service["healthcheck"]["test"])), name


# --- deploy/k8s -------------------------------------------------------------------------------


def workloads(manifests: Mapping[str, list[dict[str, Any]]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for file, docs in manifests.items():
        for doc in docs:
            if doc.get("kind") in WORKLOAD_KINDS:
                yield file, doc


def documents(manifests: Mapping[str, list[dict[str, Any]]], kind: str) -> list[dict[str, Any]]:
    return [doc for docs in manifests.values() for doc in docs if doc.get("kind") == kind]


def declared_ports(container: Mapping[str, Any]) -> dict[str | int, int]:
    ports: dict[str | int, int] = {}
    for port in container.get("ports", []):
        ports[port["containerPort"]] = port["containerPort"]
        if "name" in port:
            ports[port["name"]] = port["containerPort"]
    return ports


def probe_port(probe: Mapping[str, Any]) -> str | int | None:
    for handler in ("httpGet", "tcpSocket", "grpc"):
        if handler in probe:
            return probe[handler]["port"]
    return None


def data_dir_in_cluster(manifests: Mapping[str, list[dict[str, Any]]], image: Dockerfile) -> str:
    config = {key: value for doc in documents(manifests, "ConfigMap") for key, value in doc.get("data", {}).items()}
    return config.get("TINYMEMORY_DATA_DIR") or image.env()["TINYMEMORY_DATA_DIR"]


def test_k8s_manifests_parse_and_the_kustomization_lists_them(manifests):
    for file, docs in manifests.items():
        assert docs, f"{file} is empty"
        for doc in docs:
            assert doc.get("apiVersion") and doc.get("kind"), file
            if doc["kind"] == "Kustomization":
                continue
            assert doc.get("metadata", {}).get("name"), file
            if doc["kind"] not in CLUSTER_SCOPED_KINDS:
                assert doc["metadata"].get("namespace") == "tinymemory", f"{file} {doc['kind']} namespace"
    listed = set(manifests["kustomization.yaml"][0]["resources"])
    assert listed == set(manifests) - {"kustomization.yaml"} - EXAMPLE_MANIFESTS


def test_k8s_workloads_have_resources_probes_and_a_restricted_security_context(manifests):
    for file, doc in workloads(manifests):
        spec = pod_spec(doc)
        assert spec is not None
        assert spec["securityContext"]["runAsNonRoot"] is True, file
        for container in spec["containers"]:
            where = f"{file} {container['name']}"
            for section in ("requests", "limits"):
                assert set(container.get("resources", {}).get(section, {})) >= {"cpu", "memory"}, f"{where} {section}"
            assert container.get("readinessProbe"), f"{where} has no readiness probe"
            ports = declared_ports(container)
            if ports:
                assert container.get("livenessProbe"), f"{where} serves a port and has no liveness probe"
            for kind in ("readinessProbe", "livenessProbe"):
                port = probe_port(container.get(kind) or {})
                assert port is None or port in ports, f"{where} {kind} asks port {port}, not one it declares"
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["capabilities"]["drop"] == ["ALL"], where
            if image_is_ours(container.get("image")):
                assert security["readOnlyRootFilesystem"] is True, where
                tmp = {mount["mountPath"] for mount in container.get("volumeMounts", [])}
                assert "/tmp" in tmp, f"{where} has a read-only root and no writable /tmp"


def test_k8s_workers_are_probed_on_the_metrics_port_they_serve(manifests, image):
    for file, doc in workloads(manifests):
        for container in containers(doc):
            argv = container_argv(container, image)
            if subcommand_of(argv) != "worker":
                continue
            port = int(option_value(argv, "--metrics-port") or DEFAULT_METRICS_PORT)
            ports = declared_ports(container)
            for kind in ("readinessProbe", "livenessProbe"):
                probe = container[kind]
                assert probe["httpGet"]["path"] == "/metrics", f"{file} {kind}"
                assert ports.get(probe["httpGet"]["port"]) == port, f"{file} {kind} is not on --metrics-port {port}"


def test_k8s_runs_exactly_one_beat(manifests, image):
    beats = [
        doc
        for _, doc in workloads(manifests)
        if any(subcommand_of(container_argv(c, image)) == "beat" for c in containers(doc))
    ]
    assert len(beats) == 1
    assert beats[0]["spec"]["replicas"] == 1
    assert beats[0]["spec"]["strategy"]["type"] == "Recreate"


def test_k8s_roles_that_open_the_engine_mount_the_shared_data_claim(manifests, image):
    data_dir = data_dir_in_cluster(manifests, image)
    claims = {doc["metadata"]["name"]: doc for doc in documents(manifests, "PersistentVolumeClaim")}
    assert "ReadWriteMany" in claims[DATA_CLAIM]["spec"]["accessModes"]
    engine_roles = 0
    for file, doc in workloads(manifests):
        spec = pod_spec(doc) or {}
        volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
        for container in containers(doc):
            if subcommand_of(container_argv(container, image)) not in ENGINE_COMMANDS:
                continue
            engine_roles += 1
            mounted = [m["name"] for m in container.get("volumeMounts", []) if m["mountPath"] == data_dir]
            assert mounted, f"{file} opens the engine and mounts nothing at {data_dir}"
            claim = volumes[mounted[0]].get("persistentVolumeClaim", {}).get("claimName")
            assert claim == DATA_CLAIM, f"{file} mounts {claim} at {data_dir}, not {DATA_CLAIM}"
    assert engine_roles >= 2


def test_k8s_redis_keeps_an_append_only_file_on_a_claim(manifests):
    redis = next(doc for doc in documents(manifests, "StatefulSet") if doc["metadata"]["name"] == "redis")
    container = redis["spec"]["template"]["spec"]["containers"][0]
    argv = (*words(container.get("command")), *words(container.get("args")))
    assert option_value(argv, "--appendonly") == "yes", argv
    templates = {template["metadata"]["name"] for template in redis["spec"]["volumeClaimTemplates"]}
    data = [mount for mount in container["volumeMounts"] if mount["mountPath"] == "/data"]
    assert data and data[0]["name"] in templates
    services = {doc["metadata"]["name"] for doc in documents(manifests, "Service")}
    assert redis["spec"]["serviceName"] in services


def consumed_queues(argvs: Sequence[Sequence[str]]) -> set[str]:
    return {queue for argv in argvs if subcommand_of(argv) == "worker" for queue in queues_of(argv)}


def test_every_queue_named_is_real_and_every_queue_has_a_worker(compose, manifests, image):
    compose_argvs = [compose_argv(name, compose, image) for name in compose["services"]]
    k8s_argvs = [container_argv(c, image) for _, doc in workloads(manifests) for c in containers(doc)]
    for argvs, where in ((compose_argvs, "docker-compose.yml"), (k8s_argvs, "deploy/k8s")):
        consumed = consumed_queues(argvs)
        assert consumed <= set(QUEUES), f"{where} names unknown queues {consumed - set(QUEUES)}"
        assert consumed == set(QUEUES), f"{where} leaves queues without a worker: {set(QUEUES) - consumed}"
        erase_workers = [argv for argv in argvs if "tm.erase" in queues_of(argv)]
        assert all(queues_of(argv) == ["tm.erase"] for argv in erase_workers), "tm.erase needs a worker of its own"


def test_keda_scales_the_ingest_workers_on_real_queues(manifests, image):
    (scaled,) = documents(manifests, "ScaledObject")
    assert scaled["apiVersion"].startswith("keda.sh/")
    spec = scaled["spec"]
    assert 1 <= spec["minReplicaCount"] < spec["maxReplicaCount"]
    target = next(
        doc for doc in documents(manifests, "Deployment") if doc["metadata"]["name"] == spec["scaleTargetRef"]["name"]
    )
    assert "replicas" not in target["spec"], "KEDA owns the worker's replica count"
    served = consumed_queues([container_argv(c, image) for c in containers(target)])
    # Celery keeps a queue as a Redis list under the project's key prefix: the key `tinymemory status` reads.
    broker = Keys(Settings().redis_prefix).celery()
    lists = [trigger["metadata"]["listName"] for trigger in spec["triggers"] if trigger["type"] == "redis"]
    assert set(lists) >= {broker + "tm.ingest", broker + "tm.backfill"}, lists
    for key in lists:
        name = key.removeprefix(broker)
        assert key.startswith(broker) and name in QUEUES, f"KEDA watches {key}, not a queue's list"
        assert name in served, f"KEDA scales {target['metadata']['name']} on {name}, which it does not consume"
    for trigger in spec["triggers"]:
        assert int(trigger["metadata"]["listLength"]) > 0


def test_beat_has_a_volume_at_the_data_dir_for_its_schedule(compose, manifests, image):
    # `tinymemory beat` keeps celerybeat-schedule under TINYMEMORY_DATA_DIR.
    beats = [name for name in compose["services"] if subcommand_of(compose_argv(name, compose, image)) == "beat"]
    assert len(beats) == 1
    service = compose["services"][beats[0]]
    assert compose_data_dir(service, image) in {target for _, target in volume_mounts(service)}
    data_dir = data_dir_in_cluster(manifests, image)
    for file, doc in workloads(manifests):
        for container in containers(doc):
            if subcommand_of(container_argv(container, image)) == "beat":
                mounts = {mount["mountPath"] for mount in container.get("volumeMounts", [])}
                assert data_dir in mounts, f"{file}: beat has a read-only root and nothing writable at {data_dir}"


# --- deploy/Dockerfile and .dockerignore ------------------------------------------------------


def test_the_dockerfile_is_multi_stage_slim_non_root_and_without_compilers(image):
    assert len(image.stages) >= 2
    base = image.final[0][1].split()[0]
    assert base == "python:3.11-slim", base
    user = image.last("USER")
    assert user is not None and user.split(":")[0] not in {"root", "0"}, user
    final_runs = " ".join(rest for name, rest in image.final if name == "RUN")
    for compiler in COMPILERS:
        assert not re.search(rf"(^|[\s/]){re.escape(compiler)}(\s|$)", final_runs), f"{compiler} in the final stage"
    assert any(name == "COPY" and "--from=" in rest for name, rest in image.final), "the final stage copies no build"
    assert image.exec_form("ENTRYPOINT") == ("tinymemory",)
    env = image.env()
    assert env.get("TINYMEMORY_DATA_DIR") == "/data"
    assert env.get("PYTHONDONTWRITEBYTECODE") == "1" and env.get("PYTHONUNBUFFERED") == "1"
    assert "/data" in (image.last("VOLUME") or "")


def test_the_dockerignore_keeps_local_state_and_secrets_out():
    patterns = {line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip()}
    assert {".venv", ".git", ".env"} <= patterns


# --- .env.example -----------------------------------------------------------------------------


def env_example() -> tuple[set[str], dict[str, str]]:
    """The variables the example names (commented-out defaults included), and the values it sets."""
    named: set[str] = set()
    values: dict[str, str] = {}
    for raw in ENV_EXAMPLE.read_text().splitlines():
        line = raw.strip()
        match = re.fullmatch(r"(#\s*)?([A-Z][A-Z0-9_]*)=(.*)", line)
        if match:
            named.add(match.group(2))
            if not match.group(1):
                values[match.group(2)] = match.group(3)
    return named, values


def variables_used() -> set[str]:
    files = [COMPOSE_FILE, DOCKERFILE, *sorted(K8S_DIR.glob("*.yaml"))]
    return {name for path in files for name in re.findall(r"\bTINYMEMORY_[A-Z0-9_]+", path.read_text())}


def test_env_example_names_only_real_settings_and_documents_every_variable_used():
    example, _ = env_example()
    assert example, ".env.example names no variable"
    fields = set(Settings.model_fields) | {"config"}
    for name in example:
        assert name.startswith("TINYMEMORY_") or STANDARD_ENV.match(name), f"{name} is not a tinymemory variable"
        if name.startswith("TINYMEMORY_"):
            field = name.removeprefix("TINYMEMORY_").lower().split("__")[0]
            assert field in fields, f"{name} is not a setting (worker.settings.Settings has no {field})"
    undocumented = variables_used() - set(example)
    assert not undocumented, f"used in the deploy files, missing from .env.example: {sorted(undocumented)}"


def test_env_example_and_the_secret_example_hold_no_secret():
    _, values = env_example()
    for name, value in values.items():
        if SECRET_NAME.search(name):
            assert value == "", f".env.example gives {name} a value"
    (secret,) = yaml.safe_load_all((K8S_DIR / "secret.example.yaml").read_text())
    assert all(value in ("", None) for value in {**secret.get("stringData", {}), **secret.get("data", {})}.values())
