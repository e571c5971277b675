"""`cortexdb` and `tinyhumans` in the registry: descriptors, configuration and every refusal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engines.contract import ConfigError, FetchMode
from engines.cortex import CORTEXDB_DESCRIPTOR, TINYHUMANS_DESCRIPTOR, CortexEngine, CortexWire
from engines.registry import MemoryConfig, build_engine, list_engines
from engines.settings import EngineCredential, EngineSettings

KEY = EngineCredential.of("sk-registry-secret")


def test_both_wires_are_offered_with_their_descriptors() -> None:
    offered = {d.id: d for d in list_engines()}
    assert offered["cortexdb"] == CORTEXDB_DESCRIPTOR and offered["tinyhumans"] == TINYHUMANS_DESCRIPTOR
    assert (CORTEXDB_DESCRIPTOR.label, CORTEXDB_DESCRIPTOR.default_endpoint) == (
        "CortexDB",
        "https://api-v1.cortexdb.ai",
    )
    assert (TINYHUMANS_DESCRIPTOR.hosted, TINYHUMANS_DESCRIPTOR.default_endpoint) == (True, "https://api.tinyhumans.ai")
    for descriptor in (CORTEXDB_DESCRIPTOR, TINYHUMANS_DESCRIPTOR):
        assert (descriptor.needs_key, descriptor.needs_endpoint, descriptor.fetch_modes) == (
            True,
            False,
            (FetchMode.HYBRID,),
        )


def test_building_picks_the_wire_and_the_default_endpoint() -> None:
    direct = build_engine("cortexdb", EngineSettings(endpoint="  "), KEY)
    hosted = build_engine("tinyhumans", EngineSettings(tenant_root="org:acme"), KEY)
    assert isinstance(direct, CortexEngine) and direct.wire_id is CortexWire.DIRECT
    assert repr(direct) == "CortexEngine(direct, https://api-v1.cortexdb.ai)"
    assert isinstance(hosted, CortexEngine) and repr(hosted) == "CortexEngine(tinyhumans, https://api.tinyhumans.ai)"
    local = build_engine("cortexdb", EngineSettings(endpoint="http://127.0.0.1:3141/cx", scope_root="user:42"), KEY)
    assert repr(local) == "CortexEngine(direct, http://127.0.0.1:3141)"


@pytest.mark.parametrize(
    ("engine_id", "settings", "credential", "message"),
    [
        ("cortexdb", EngineSettings(), EngineCredential.none(), 'engine "cortexdb" needs a key'),
        ("tinyhumans", EngineSettings(), EngineCredential.of("   "), 'engine "tinyhumans" needs a key'),
        ("cortexdb", EngineSettings(endpoint="ftp://x"), KEY, "endpoint must be an http(s) URL"),
        ("cortexdb", EngineSettings(endpoint="not a url"), KEY, "endpoint must be an http(s) URL"),
        (
            "cortexdb",
            EngineSettings(endpoint="http://cortex.example.com"),
            KEY,
            "credentialed memory endpoints must use https unless they are loopback",
        ),
        ("cortexdb", EngineSettings(scope_root="bogus:1"), KEY, 'scope root "bogus:1"'),
        ("tinyhumans", EngineSettings(tenant_root="app:tinymemory"), KEY, 'scope root "app:tinymemory"'),
        ("tinyhumans", EngineSettings(scope_root="user:42"), KEY, 'scope_root does not apply to engine "tinyhumans"'),
        ("cortexdb", EngineSettings(tenant_root="org:acme"), KEY, 'tenant_root does not apply to engine "cortexdb"'),
    ],
)
def test_every_refusal_is_a_configuration_error_without_the_key(
    engine_id: str, settings: EngineSettings, credential: EngineCredential, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        build_engine(engine_id, settings, credential)
    assert message in caught.value.message and "sk-registry-secret" not in str(caught.value)


def test_a_bearer_source_counts_as_a_key() -> None:
    class Source:
        async def bearer(self) -> str:
            return "fresh"

    assert isinstance(
        build_engine("tinyhumans", EngineSettings(), EngineCredential.from_source(Source())), CortexEngine
    )
    assert "fresh" not in repr(EngineCredential.from_source(Source()))


def test_configuration_files_name_the_engine_and_its_settings() -> None:
    config = MemoryConfig.from_toml(
        'engine = "cortexdb"\n[engines.cortexdb]\nendpoint = "https://cortex.example.com"\nscope_root = "user:42"\n'
        "[engines.tinyhumans]\n"
    )
    assert config.settings() == EngineSettings(endpoint="https://cortex.example.com", scope_root="user:42")
    assert isinstance(config.build(KEY), CortexEngine)


def test_choosing_local_never_imports_the_cortexdb_client() -> None:
    code = (
        "import sys\n"
        "from engines.registry import build_engine, list_engines\n"
        "from engines.settings import EngineSettings, EngineCredential\n"
        "build_engine('reference', EngineSettings(), EngineCredential.none())\n"
        "assert 'engines.cortex.transport' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[4])


def test_an_engine_built_by_hand_refuses_a_cleartext_remote_endpoint() -> None:
    with pytest.raises(ConfigError, match="must use https unless they are loopback"):
        CortexEngine(CortexWire.DIRECT, "http://cortex.example.com", KEY)
    with pytest.raises(ConfigError, match="endpoint must be an http"):
        CortexEngine(CortexWire.TINYHUMANS, "cortex.example.com", KEY)
