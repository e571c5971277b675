"""The CortexDB double: an in-memory CortexDB on real HTTP, for tests, benchmarks and `tinymemory dev`.

    double = CortexDouble(DoubleConfig(wire="direct"))      # or "hosted"
    with serve(double) as base_url:                          # uvicorn on 127.0.0.1, ephemeral port
        engine = CortexEngine(CortexWire.DIRECT, base_url, EngineCredential.of("test-key"), timing=Timing.fast())

It reproduces the server behaviours and quirks the engine is shaped around (docs/spec/cortexdb.md §13), keeps a request
log (`double.requests`) and offers fault injection (`double.faults`).
"""

from tinymemory_ingest.cortex_double.config import PRESET_SCOPE_TYPES, DoubleConfig, ManualClock
from tinymemory_ingest.cortex_double.double import CortexDouble, RecordedRequest, make_app
from tinymemory_ingest.cortex_double.faults import Faults
from tinymemory_ingest.cortex_double.log import EventRecord, Pack
from tinymemory_ingest.cortex_double.server import main, run, serve

__all__ = [
    "PRESET_SCOPE_TYPES",
    "CortexDouble",
    "DoubleConfig",
    "EventRecord",
    "Faults",
    "ManualClock",
    "Pack",
    "RecordedRequest",
    "main",
    "make_app",
    "run",
    "serve",
]
