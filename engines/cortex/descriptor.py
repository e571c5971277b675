"""The two engine ids CortexDB is registered under, their descriptors and default endpoints
(docs/spec/cortexdb.md §3)."""

from __future__ import annotations

from enum import StrEnum

from engines.contract import EngineDescriptor, FetchMode

CORTEXDB_ENGINE_ID = "cortexdb"
TINYHUMANS_ENGINE_ID = "tinyhumans"

CORTEX_API_ENDPOINT = "https://api-v1.cortexdb.ai"
TINYHUMANS_API_ENDPOINT = "https://api.tinyhumans.ai"


class CortexWire(StrEnum):
    """Which API the engine speaks: CortexDB's own (`/v1/*`) or the TinyHumans backend's (`/memory/*`)."""

    DIRECT = "direct"
    TINYHUMANS = "tinyhumans"

    @property
    def hosted(self) -> bool:
        return self is CortexWire.TINYHUMANS


CORTEXDB_DESCRIPTOR = EngineDescriptor(
    id=CORTEXDB_ENGINE_ID,
    label="CortexDB",
    description="CortexDB's own API: an append-only memory log with ranked recall and grounded answers.",
    hosted=False,
    needs_endpoint=False,
    needs_key=True,
    default_endpoint=CORTEX_API_ENDPOINT,
    # The recall body has no switch between lexical and embedding retrieval, so only hybrid is honest.
    fetch_modes=(FetchMode.HYBRID,),
)

TINYHUMANS_DESCRIPTOR = EngineDescriptor(
    id=TINYHUMANS_ENGINE_ID,
    label="TinyHumans",
    description="CortexDB hosted by the TinyHumans backend, billed to the signed-in account.",
    hosted=True,
    needs_endpoint=False,
    needs_key=True,
    default_endpoint=TINYHUMANS_API_ENDPOINT,
    fetch_modes=(FetchMode.HYBRID,),
)


def descriptor_of(wire: CortexWire) -> EngineDescriptor:
    return TINYHUMANS_DESCRIPTOR if wire.hosted else CORTEXDB_DESCRIPTOR
