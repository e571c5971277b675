"""The local engine against an OpenAI-compatible server on loopback: embeddings, chat answers, fallbacks."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import SecretStr

from engines.contract import Document, EngineError, FetchMode, FetchRequest, RecallRequest, UnavailableError
from engines.local import ChatSynthesizer, Endpoint, LocalEngine, OpenAIEmbedder

pytestmark = pytest.mark.integration

DIMENSIONS = 8


class FakeOpenAI(BaseHTTPRequestHandler):
    """Answers /v1/embeddings with letter-count vectors and /v1/chat/completions with a fixed reply."""

    status: ClassVar[int] = 200
    chat_status: ClassVar[int] = 200
    chat_reply: ClassVar[str | None] = "The deploy runs at noon [1]."  # None: cite the passage about noon
    seen: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        status = self.chat_status if self.path == "/v1/chat/completions" else self.status
        if status != 200:
            self._send(status, {"error": {"message": "nope"}})
        elif self.path == "/v1/embeddings":
            rows = [{"index": i, "embedding": _vector(text)} for i, text in enumerate(body["input"])]
            self._send(200, {"data": list(reversed(rows))})
        else:
            reply = self.chat_reply
            if reply is None:
                reply = _cite_the_passage_about("noon", body["messages"][1]["content"])
            self._send(200, {"choices": [{"message": {"role": "assistant", "content": reply}}]})

    def _send(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _cite_the_passage_about(word: str, prompt: str) -> str:
    """A grounded model's answer: the passage holding `word`, cited by the number the prompt gave it."""
    numbers = re.findall(r"^\[(\d+)\] (.*)$", prompt, re.MULTILINE)
    cited = next(n for n, text in numbers if word in text)
    return f"It runs at {word} [{cited}]."


def _vector(text: str) -> list[float]:
    return [float(text.lower().count(letter)) for letter in "aeioustn"[:DIMENSIONS]]


@pytest.fixture
def server() -> Iterator[str]:
    FakeOpenAI.status = FakeOpenAI.chat_status = 200
    FakeOpenAI.chat_reply = "The deploy runs at noon [1]."
    FakeOpenAI.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def engine(tmp_path: Path, server: str) -> Iterator[LocalEngine]:
    key = SecretStr("sk-test-key")
    engine = LocalEngine(
        tmp_path / "m.sqlite3",
        embedder=OpenAIEmbedder(Endpoint(server, "embed-model", key), DIMENSIONS),
        chat=ChatSynthesizer(Endpoint(server, "chat-model", key)),
    )
    yield engine
    engine.close()


async def test_vectors_come_from_the_embeddings_endpoint(engine: LocalEngine) -> None:
    receipt = await engine.store(Document.from_text("aaaa eeee"))
    await engine.store(Document.from_text("ssss tttt nnnn"))
    page = await engine.fetch(FetchRequest(query="aa ee", mode=FetchMode.VECTOR, limit=1))
    assert [hit.id for hit in page.hits] == [receipt.id]
    calls = [c for c in FakeOpenAI.seen if c["path"] == "/v1/embeddings"]
    assert calls[0]["body"]["model"] == "embed-model"
    assert calls[0]["auth"] == "Bearer sk-test-key"


async def test_storing_asks_the_endpoint_nothing_and_a_read_only_for_the_new_last_item(engine: LocalEngine) -> None:
    def asked() -> list[list[str]]:
        return [c["body"]["input"] for c in FakeOpenAI.seen if c["path"] == "/v1/embeddings"]

    engine._backlog.close()  # so every call counted is one a store or a read made
    first = [Document.from_text(f"note {n} aaaa") for n in range(3)]
    await engine.store_many(first)
    assert asked() == []
    await engine.fetch(FetchRequest(query="aaaa", mode=FetchMode.VECTOR, limit=1))
    assert sorted(asked()) == [["aaaa"], ["note 2 aaaa"]]  # the query, and the call's last item, promised
    receipts = await engine.store_many([*first, Document.from_text("a new one eeee")])
    assert [r.replayed for r in receipts] == [True, True, True, False]
    assert len(asked()) == 2
    await engine.fetch(FetchRequest(query="aaaa", mode=FetchMode.VECTOR, limit=1))  # its vector is kept
    assert asked()[2:] == [["a new one eeee"]]


async def test_recall_is_synthesised_by_the_chat_endpoint(engine: LocalEngine) -> None:
    await engine.store(Document.from_text("The deploy runs at noon."))
    answer = await engine.recall(RecallRequest(question="when is the deploy", limit=3, instructions="be brief"))
    assert (answer.answer, answer.model) == ("The deploy runs at noon [1].", "chat-model")
    assert len(answer.citations) == 1
    chat = next(c for c in FakeOpenAI.seen if c["path"] == "/v1/chat/completions")
    prompt = chat["body"]["messages"][1]["content"]
    assert "be brief" in prompt and "[1] The deploy runs at noon." in prompt


async def test_a_chat_answer_cites_passages_by_the_numbers_of_the_citations(engine: LocalEngine) -> None:
    FakeOpenAI.chat_reply = None  # the fake model cites whichever passage it was given about noon
    for text in ("The database migrates first.", "The deploy runs at noon.", "Deploys are announced in #ops."):
        await engine.store(Document.from_text(text))
    answer = await engine.recall(RecallRequest(question="when does the deploy run?", limit=3))
    assert answer.model == "chat-model"
    cited = int(re.fullmatch(r"It runs at noon \[(\d)\]\.", answer.answer).group(1))  # type: ignore[union-attr]
    assert answer.citations[cited - 1].snippet == "The deploy runs at noon."
    prompt = next(c for c in FakeOpenAI.seen if c["path"] == "/v1/chat/completions")["body"]["messages"][1]["content"]
    # The model was given exactly the cited passages, numbered as the citations are, best first.
    given = re.findall(r"^\[(\d+)\] (.*)$", prompt, re.MULTILINE)
    assert [text for _, text in given] == [c.snippet for c in answer.citations]
    assert [int(n) for n, _ in given] == list(range(1, len(answer.citations) + 1))


@pytest.mark.parametrize(("status", "reply"), [(500, "unused"), (401, "unused"), (200, "")])
async def test_a_failing_chat_endpoint_falls_back_to_the_extractive_answer(
    engine: LocalEngine, caplog: pytest.LogCaptureFixture, status: int, reply: str
) -> None:
    await engine.store(Document.from_text("The deploy runs at noon."))
    FakeOpenAI.chat_status, FakeOpenAI.chat_reply = status, reply
    answer = await engine.recall(RecallRequest(question="deploy", limit=3))
    assert answer.model == "local-extractive"
    assert "The deploy runs at noon." in answer.answer
    assert "answering extractively" in caplog.text
    assert "sk-test-key" not in caplog.text


@pytest.mark.parametrize(("status", "error"), [(429, UnavailableError), (503, UnavailableError), (400, EngineError)])
async def test_embedding_failures_map_to_contract_errors(status: int, error: type[Exception], server: str) -> None:
    FakeOpenAI.status = status
    embedder = OpenAIEmbedder(Endpoint(server, "embed-model", SecretStr("sk-test-key")), DIMENSIONS)
    with pytest.raises(error) as caught:
        await embedder.embed(["anything"])
    assert "sk-test-key" not in str(caught.value)


async def test_a_failing_embeddings_endpoint_never_fails_a_store(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("engines.local.backlog._PAUSES_S", (0.05,))
    FakeOpenAI.status = 503
    receipts = await engine.store_many([Document.from_text("aaaa first"), Document.from_text("eeee second")])
    page = await engine.fetch(FetchRequest(query="second", mode=FetchMode.HYBRID, limit=5))
    assert [hit.id for hit in page.hits] == [receipts[1].id]  # by keyword, while no vector can be had
    for _ in range(200):  # the backlog's first try fails soon after the store
        health = await engine.health()
        if health.state == "degraded":
            break
        await asyncio.sleep(0.02)
    assert health.state == "degraded" and "is failing" in (health.reason or "")
    FakeOpenAI.status = 200  # the endpoint is back: the backlog catches up
    assert await engine.wait_for_vectors(timeout_s=10)
    assert (await engine.health()).state == "ok"
    vector = await engine.fetch(FetchRequest(query="aa", mode=FetchMode.VECTOR, limit=1))
    assert [hit.id for hit in vector.hits] == [receipts[0].id]
    assert "sk-test-key" not in caplog.text


async def test_an_unreachable_endpoint_is_unavailable(tmp_path: Path) -> None:
    embedder = OpenAIEmbedder(Endpoint("http://127.0.0.1:9/v1", "m"), DIMENSIONS)
    with pytest.raises(UnavailableError, match="unreachable"):
        await embedder.embed(["x"])
