"""Building a `CortexEngine` from `EngineSettings`: the registry's entry points for `cortexdb` and `tinyhumans`.

Every refusal is a `ConfigError` whose message never carries the credential (docs/spec/cortexdb.md §12).
"""

from __future__ import annotations

from engines.contract import ConfigError
from engines.cortex.descriptor import CORTEXDB_DESCRIPTOR, TINYHUMANS_DESCRIPTOR, CortexWire, descriptor_of
from engines.cortex.engine import CortexEngine
from engines.cortex.layout import parse_root
from engines.cortex.timing import Timing
from engines.settings import EngineCredential, EngineSettings, check_endpoint

__all__ = ["CORTEXDB_DESCRIPTOR", "TINYHUMANS_DESCRIPTOR", "build", "build_cortexdb", "build_tinyhumans"]


def build(
    wire: CortexWire, settings: EngineSettings, credential: EngineCredential, timing: Timing | None = None
) -> CortexEngine:
    """A CortexDB engine on `wire`; a missing key, a bad endpoint or root, or a setting of the other wire is refused."""
    descriptor = descriptor_of(wire)
    engine_id = descriptor.id
    if not credential.is_set():
        raise ConfigError(f'engine "{engine_id}" needs a key')
    foreign = "scope_root" if wire.hosted else "tenant_root"
    if _given(settings.scope_root if wire.hosted else settings.tenant_root):
        raise ConfigError(f'{foreign} does not apply to engine "{engine_id}"')
    endpoint = (settings.endpoint or "").strip() or str(descriptor.default_endpoint)
    url = check_endpoint(endpoint, credentialed=True)
    root = _trimmed(settings.tenant_root if wire.hosted else settings.scope_root)
    if root is not None:
        parse_root(root)
    return CortexEngine(
        wire,
        url,
        credential,
        scope_root=None if wire.hosted else root,
        tenant_root=root if wire.hosted else None,
        timing=timing,
    )


def _given(value: str | None) -> bool:
    return value is not None and bool(value.strip())


def _trimmed(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    return value.strip()


def build_cortexdb(settings: EngineSettings, credential: EngineCredential) -> CortexEngine:
    return build(CortexWire.DIRECT, settings, credential)


def build_tinyhumans(settings: EngineSettings, credential: EngineCredential) -> CortexEngine:
    return build(CortexWire.TINYHUMANS, settings, credential)
