"""The engine registry and `MemoryConfig`: which engines exist (built in, or declared by an installed distribution),
how one is built, and every refusal."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.contract import ConfigError, Document, ListRequest
from engines.local import LocalEngine, OpenAIEmbedder
from engines.plugins import ENGINES_GROUP, Plugin
from engines.reference import ReferenceEngine
from engines.registry import REGISTRY, EngineEntry, MemoryConfig, Registry, build_engine, list_engines
from engines.settings import ChatSettings, EmbedderSettings, EngineCredential, EngineSettings, check_endpoint
from tests.fixtures.distributions import fake_distribution, plugin_site

# A plugin engine's module: the reference engine under another id, as a distribution would ship one.
ECHO_MODULE = """
from engines.reference import ReferenceEngine
from engines.reference.factory import DESCRIPTOR as REFERENCE

DESCRIPTOR = REFERENCE.model_copy(update={"id": "tm_echo", "label": "Echo"})

def build(settings, credential):
    return ReferenceEngine()
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from plugin_site(tmp_path, monkeypatch)


def test_list_engines_describes_every_engine_in_order() -> None:
    descriptors = list_engines()
    assert [d.id for d in descriptors] == ["local", "reference", "cortexdb", "tinyhumans", "postgres"]
    local = descriptors[0]
    assert (local.hosted, local.needs_endpoint, local.needs_key) == (False, False, False)
    assert [m.value for m in local.fetch_modes] == ["keyword", "vector", "hybrid"]


def test_unknown_engine_is_a_configuration_error_naming_the_offer() -> None:
    with pytest.raises(ConfigError) as caught:
        build_engine("mem0", EngineSettings(), EngineCredential.none())
    offer = "local, reference, cortexdb, tinyhumans, postgres"
    assert str(caught.value) == f'configuration error: unknown memory engine "mem0"; this build offers {offer}'


def test_a_duplicate_registration_is_refused() -> None:
    registry = Registry()
    registry.register(EngineEntry("x", "engines.local.factory"))
    with pytest.raises(ConfigError, match='"x" is registered twice'):
        registry.register(EngineEntry("x", "engines.reference.factory"))
    assert REGISTRY.ids() == ["local", "reference", "cortexdb", "tinyhumans", "postgres"]


def test_choosing_reference_does_not_import_the_local_engine() -> None:
    code = (
        "import sys\n"
        "from engines.registry import build_engine\n"
        "from engines.settings import EngineSettings, EngineCredential\n"
        "build_engine('reference', EngineSettings(), EngineCredential.none())\n"
        "assert 'engines.local' not in sys.modules, sorted(m for m in sys.modules if m.startswith('engines'))\n"
        "assert 'numpy' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[3])


def test_local_needs_a_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match='engine "local" needs a path'):
        build_engine("local", EngineSettings(), EngineCredential.none())
    engine = build_engine("local", EngineSettings(path=tmp_path / "m.sqlite3"), EngineCredential.none())
    assert isinstance(engine, LocalEngine)
    engine.close()


async def test_config_from_toml_builds_a_working_engine(tmp_path: Path) -> None:
    config = MemoryConfig.from_toml(
        f"""
        engine = "local"
        unknown_key = "ignored"
        [engines.local]
        path = "{tmp_path / "m.sqlite3"}"
        tenant = "ana"
        [engines.local.embedder]
        kind = "static"
        dimensions = 128
        """
    )
    assert config.settings().tenant == "ana"
    engine = config.build()
    assert isinstance(engine, LocalEngine)
    await engine.store(Document.from_text("stored through configuration"))
    assert len((await engine.list(ListRequest(limit=5))).items) == 1
    engine.close()


def test_config_defaults_and_missing_entries() -> None:
    config = MemoryConfig.from_json('{"engine": "reference"}')
    assert config.settings() == EngineSettings()
    assert isinstance(config.build(), ReferenceEngine)
    assert MemoryConfig().engine == "local"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('engine = "local"\n[engines.local]\npassage_chars = "many"', "engines.local.passage_chars"),
        ('engine = "local"\nengines = 3', "engines"),
        ("engine = ", "not valid TOML"),
    ],
)
def test_bad_toml_is_a_configuration_error(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        MemoryConfig.from_toml(text)


def test_bad_json_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="not valid JSON"):
        MemoryConfig.from_json("{")


def test_config_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TINYMEMORY_ENGINE", "local")
    monkeypatch.setenv("TINYMEMORY_ENGINES__LOCAL__PATH", str(tmp_path / "env.sqlite3"))
    monkeypatch.setenv("TINYMEMORY_ENGINES__LOCAL__EMBEDDER__DIMENSIONS", "64")
    config = MemoryConfig.from_env()
    assert config.settings().path == tmp_path / "env.sqlite3"
    assert config.settings().embedder.dimensions == 64
    monkeypatch.setenv("TINYMEMORY_ENGINES__LOCAL__PASSAGE_CHARS", "lots")
    with pytest.raises(ConfigError, match="environment is invalid"):
        MemoryConfig.from_env()


@pytest.mark.parametrize(
    ("endpoint", "credentialed", "message"),
    [
        ("ftp://example.com", False, "endpoint must be an http(s) URL"),
        ("not a url", False, "endpoint must be an http(s) URL"),
        ("http://", False, "endpoint must be an http(s) URL"),
        ("http://example.com/v1", True, "credentialed memory endpoints must use https unless they are loopback"),
    ],
)
def test_endpoint_refusals(endpoint: str, credentialed: bool, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_endpoint(endpoint, credentialed)
    assert caught.value.message == message


@pytest.mark.parametrize(
    "endpoint", ["http://127.0.0.1:8080/v1", "http://localhost/v1", "http://[::1]:1/v1", "https://api.example.com/v1"]
)
def test_endpoints_that_may_carry_a_key(endpoint: str) -> None:
    assert check_endpoint(f"  {endpoint} ", credentialed=True) == endpoint


def test_a_keyed_cleartext_embedder_off_loopback_is_refused(tmp_path: Path) -> None:
    settings = EngineSettings(
        path=tmp_path / "m.sqlite3",
        embedder=EmbedderSettings(kind="openai", endpoint="http://embed.example.com/v1", model="m", dimensions=8),
    )
    with pytest.raises(ConfigError, match="must use https unless they are loopback") as caught:
        build_engine("local", settings, EngineCredential.of("sk-secret"))
    assert "sk-secret" not in str(caught.value)
    # Without a key, cleartext is the operator's choice.
    engine = build_engine("local", settings, EngineCredential.none())
    assert isinstance(engine._embedder, OpenAIEmbedder)
    engine.close()


@pytest.mark.parametrize(
    ("embedder", "message"),
    [
        (EmbedderSettings(kind="openai", model="m"), 'the "openai" embedder needs an endpoint'),
        (EmbedderSettings(kind="openai", endpoint="https://x.test/v1"), 'the "openai" embedder needs a model'),
        (EmbedderSettings(kind="hashing", dimensions=100), "power of two"),
        (EmbedderSettings(kind="sentence", model="all-MiniLM-L6-v2"), "sentence-transformers"),
    ],
)
def test_embedder_settings_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: EmbedderSettings, message: str
) -> None:
    # As on a machine without the `sentence` extra, whatever this one has installed.
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ConfigError, match=message):
        build_engine("local", EngineSettings(path=tmp_path / "m.sqlite3", embedder=embedder), EngineCredential.none())


def test_chat_endpoint_is_checked_like_any_endpoint(tmp_path: Path) -> None:
    settings = EngineSettings(
        path=tmp_path / "m.sqlite3", chat=ChatSettings(endpoint="http://llm.example.com", model="m")
    )
    with pytest.raises(ConfigError, match="https unless they are loopback"):
        build_engine("local", settings, EngineCredential.of("key"))


def test_credentials_never_print() -> None:
    assert "sk-123" not in repr(EngineCredential.of("sk-123"))
    assert EngineCredential.of("  ").token() is None
    assert EngineCredential(dynamic=lambda: "fresh").token() == "fresh"


# -- engines from installed distributions (tinymemory.engines entry points) --------------------------------------


def test_an_installed_engine_is_listed_and_built(site: Path) -> None:
    fake_distribution(site, "tm-echo", {ENGINES_GROUP: {"tm_echo": "tm_plugin_echo"}}, {"tm_plugin_echo": ECHO_MODULE})
    assert REGISTRY.ids() == ["local", "reference", "cortexdb", "tinyhumans", "postgres", "tm_echo"]
    assert "tm_plugin_echo" not in sys.modules  # found from metadata only
    assert isinstance(MemoryConfig(engine="tm_echo").build(), ReferenceEngine)
    assert list_engines()[-1].label == "Echo"


def test_a_registration_wins_over_an_entry_point() -> None:
    declared = {"x": (Plugin(ENGINES_GROUP, "x", "tm_plugin_nowhere", "tm-x 1.0"),)}
    registry = Registry(plugins=lambda: declared)
    assert registry.entry("x").module == "tm_plugin_nowhere"
    registry.register(EngineEntry("x", "engines.reference.factory"))
    assert registry.entry("x").module == "engines.reference.factory" and registry.ids() == ["x"]


@pytest.mark.parametrize(
    ("modules", "message"),
    [
        ({}, "cannot load tm_plugin_echo (ModuleNotFoundError: No module named 'tm_plugin_echo')"),
        ({"tm_plugin_echo": "raise ImportError('needs libecho')"}, "cannot load tm_plugin_echo (ImportError: needs"),
        ({"tm_plugin_echo": ECHO_MODULE.replace('"tm_echo"', '"echo"')}, "tm_plugin_echo.DESCRIPTOR is not the"),
        ({"tm_plugin_echo": ECHO_MODULE.replace("def build", "def make")}, "tm_plugin_echo has no build function"),
    ],
)
def test_a_broken_engine_plugin_fails_only_when_it_is_used(site: Path, modules: dict[str, str], message: str) -> None:
    fake_distribution(site, "tm-echo", {ENGINES_GROUP: {"tm_echo": "tm_plugin_echo"}}, modules)
    assert isinstance(MemoryConfig(engine="reference").build(), ReferenceEngine)
    with pytest.raises(ConfigError, match=re.escape(f'memory engine "tm_echo": {message}')) as caught:
        MemoryConfig(engine="tm_echo").build()
    assert str(caught.value).endswith(
        "; it is declared by entry point tm_echo = tm_plugin_echo in group tinymemory.engines of distribution"
        " tm-echo 1.0: reinstall a working version or uninstall it"
    )


def test_an_engine_id_declared_twice_or_built_in_is_refused_when_used(site: Path) -> None:
    fake_distribution(site, "tm-echo", {ENGINES_GROUP: {"tm_echo": "tm_plugin_echo", "local": "tm_plugin_echo"}})
    fake_distribution(site, "tm-echo-fork", {ENGINES_GROUP: {"tm_echo": "tm_plugin_fork"}})
    assert isinstance(MemoryConfig(engine="reference").build(), ReferenceEngine)
    with pytest.raises(
        ConfigError, match=r'"tm_echo" is declared twice, by .* tm-echo 1\.0 and by .* tm-echo-fork 1\.0'
    ):
        MemoryConfig(engine="tm_echo").build()
    with pytest.raises(ConfigError, match=r'memory engine "local" is built in, but entry point local = tm_plugin_echo'):
        build_engine("local", EngineSettings(), EngineCredential.none())
