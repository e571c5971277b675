"""The registry's entry point for `cortexdb`: CortexDB's own API (the Direct wire)."""

from __future__ import annotations

from engines.cortex.descriptor import CORTEXDB_DESCRIPTOR as DESCRIPTOR
from engines.cortex.engine import CortexEngine
from engines.cortex.factory import build_cortexdb
from engines.settings import EngineCredential, EngineSettings

__all__ = ["DESCRIPTOR", "build"]


def build(settings: EngineSettings, credential: EngineCredential) -> CortexEngine:
    return build_cortexdb(settings, credential)
