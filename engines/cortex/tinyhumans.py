"""The registry's entry point for `tinyhumans`: CortexDB hosted by the TinyHumans backend."""

from __future__ import annotations

from engines.cortex.descriptor import TINYHUMANS_DESCRIPTOR as DESCRIPTOR
from engines.cortex.engine import CortexEngine
from engines.cortex.factory import build_tinyhumans
from engines.settings import EngineCredential, EngineSettings

__all__ = ["DESCRIPTOR", "build"]


def build(settings: EngineSettings, credential: EngineCredential) -> CortexEngine:
    return build_tinyhumans(settings, credential)
