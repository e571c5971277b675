"""The vendor's own SDK (`cortexdbai`, a client nobody on this project wrote) against the CortexDB double.

It round-trips every operation the engine uses (experience and bulk, events, recall, answer, forget, erasures,
whoami), and reads back, through its own calls, items the engine stored: the same ids and the same text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from engines.contract import Conversation, Document, Learning, LearningKind, MemoryMeta, Role, Turn
from engines.cortex import CortexEngine, CortexWire, Timing
from engines.settings import EngineCredential
from tinymemory_ingest.cortex_double import CortexDouble, DoubleConfig, serve

cortexdb = pytest.importorskip("cortexdb")

pytestmark = pytest.mark.integration

KEY = "sdk-test-key"
SCOPE = "ws:demo"


@pytest.fixture
def served() -> Iterator[tuple[CortexDouble, str]]:
    double = CortexDouble(DoubleConfig(api_key=KEY, require_actor=True))
    with serve(double) as url:
        yield double, url


def _envelope_id(labels: list[str]) -> str:
    """The item id in an event's v3 envelope, joined from its `tm:e:` labels as any reader would."""
    parts = sorted(
        (label[5:].partition(":")[0], label[5:].partition(":")[2]) for label in labels if label.startswith("tm:e:")
    )
    return str(json.loads("".join(piece for _, piece in parts))["id"])


def test_the_sdk_round_trips_every_operation_the_engine_uses(served: tuple[CortexDouble, str]) -> None:
    double, url = served
    with cortexdb.Cortex(url, actor="user:local", bearer=KEY) as client:
        assert client.whoami()["caller"] == "user:local"
        one = client.experience(SCOPE, text="Priya at Acme signed for 200 seats.", labels=["deal"], wait="indexed")
        assert one["status"] == "captured" and not one["replayed_from_idempotency"]
        bulk = client.experience_bulk(
            SCOPE,
            [{"text": "Acme renews in March."}, {"text": "Bo owns the Acme account.", "role": "assistant"}],
            wait="indexed",
        )
        assert bulk["accepted"] == 2 and [r["index"] for r in bulk["results"]] == [0, 1]
        listed = client.events(SCOPE, limit=10)
        assert [item["id"] for item in listed["items"]] == [
            r["event_id"] for r in reversed(bulk["results"]) for _ in (0, 1)
        ] + [one["event_id"]] * 2
        labelled = client.events(SCOPE, labels=["deal"])
        assert {item["id"] for item in labelled["items"]} == {one["event_id"]}
        pack = client.recall(SCOPE, query="How many seats did Acme sign for?", view="granular")
        assert pack["layers"]["events"][0]["id"] == one["event_id"]
        answer = client.answer(SCOPE, question="How many seats?", use_pack_id=pack["pack_id"], cite_sources=True)
        assert answer["answer"] == "Based on memory: Priya at Acme signed for 200 seats."
        forgot = client.forget(SCOPE, memory_ids=[one["event_id"]], cascade="redact_events")
        assert forgot["deleted"] == {"events": 1}
        assert {item["id"] for item in client.events(SCOPE)["items"]} == {r["event_id"] for r in bulk["results"]}
        named = client.erase(SCOPE, memory_ids=[bulk["results"][0]["event_id"]], audit_note="sdk test")
        assert named["status"] == "completed"
        assert {item["id"] for item in client.events(SCOPE)["items"]} == {bulk["results"][1]["event_id"]}
        whole = client.erase(SCOPE, confirm_all=True, audit_note="sdk test")
        assert whole["erasure_id"].startswith("era_") and client.events(SCOPE)["items"] == []
    assert all(r.status < 400 for r in double.requests)


def test_the_sdk_reads_what_the_engine_stored(served: tuple[CortexDouble, str]) -> None:
    _, url = served
    learning = Learning(text="the user prefers tea", kind=LearningKind.PREFERENCE, confidence=0.8)
    document = Document.from_text("meeting notes: ship on friday", title="Notes", meta=MemoryMeta(workspace="team"))
    talk = Conversation(
        turns=[Turn(role=Role.USER, text="are we shipping?"), Turn(role=Role.ASSISTANT, text="on friday")]
    )

    async def store() -> list[str]:
        engine = CortexEngine(CortexWire.DIRECT, url, EngineCredential.of(KEY), timing=Timing.fast())
        async with engine:
            return [r.id for r in await engine.store_many([learning, document, talk])]

    ids = asyncio.run(store())
    with cortexdb.Cortex(url, actor="user:local", bearer=KEY) as client:
        learned = client.events("app:tinymemory/app:learnings")["items"][0]
        assert (_envelope_id(learned["context"]["labels"]), learned["content"]["text"]) == (ids[0], learning.text)
        noted = client.events("app:tinymemory/app:documents")["items"][0]
        assert (_envelope_id(noted["context"]["labels"]), noted["content"]["text"]) == (ids[1], document.body.text)
        turns = client.events("app:tinymemory/app:conversations")["items"][::2]
        assert [(_envelope_id(t["context"]["labels"]), t["content"]["text"]) for t in reversed(turns)] == [
            (ids[2], "are we shipping?"),
            (ids[2], "on friday"),
        ]
        assert [t["content"]["role"] for t in reversed(turns)] == ["user", "assistant"]
        pack = client.recall("app:tinymemory/app:documents", query="when do we ship", view="granular")
        assert pack["layers"]["events"][0]["content"]["text"] == document.body.text
