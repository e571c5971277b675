"""Building a `ReferenceEngine` (the registry's entry point for `reference`): it takes no settings."""

from __future__ import annotations

from engines.contract import MemoryEngine
from engines.reference.engine import DESCRIPTOR, ReferenceEngine
from engines.settings import EngineCredential, EngineSettings

__all__ = ["DESCRIPTOR", "build"]


def build(settings: EngineSettings, credential: EngineCredential) -> MemoryEngine:
    """A fresh, empty in-memory engine; settings and credential are not used."""
    return ReferenceEngine()
