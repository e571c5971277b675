"""The CortexDB engine on both wires: CortexDB's own API (`cortexdb`) and the TinyHumans hosted one (`tinyhumans`).

Every item is stored as one or more events of CortexDB's append-only log, with byte-compatible ids, envelopes and
labels (spec cortexdb). The HTTP double tests and benchmarks run against lives in `tinymemory_ingest.cortex_double`.
"""

from engines.cortex.chunks import DOCUMENT_CHUNK_TARGET_BYTES, MAX_EVENT_TEXT_BYTES
from engines.cortex.descriptor import (
    CORTEX_API_ENDPOINT,
    CORTEXDB_DESCRIPTOR,
    CORTEXDB_ENGINE_ID,
    TINYHUMANS_API_ENDPOINT,
    TINYHUMANS_DESCRIPTOR,
    TINYHUMANS_ENGINE_ID,
    CortexWire,
)
from engines.cortex.engine import CortexEngine
from engines.cortex.factory import build
from engines.cortex.failures import error_code, is_insufficient_credits
from engines.cortex.timing import Timing

__all__ = [
    "CORTEXDB_DESCRIPTOR",
    "CORTEXDB_ENGINE_ID",
    "CORTEX_API_ENDPOINT",
    "DOCUMENT_CHUNK_TARGET_BYTES",
    "MAX_EVENT_TEXT_BYTES",
    "TINYHUMANS_API_ENDPOINT",
    "TINYHUMANS_DESCRIPTOR",
    "TINYHUMANS_ENGINE_ID",
    "CortexEngine",
    "CortexWire",
    "Timing",
    "build",
    "error_code",
    "is_insufficient_credits",
]
