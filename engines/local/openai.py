"""OpenAI-compatible endpoints: `/embeddings` for vectors and `/chat/completions` for answers.

`base_url` is the API root the way OpenAI clients take it (`https://api.openai.com/v1`,
`http://127.0.0.1:11434/v1`); routes are appended to it. Failures map to contract errors at this
edge, and no message carries the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx
import numpy as np
from pydantic import SecretStr

from engines.contract import EngineError, Hit, UnauthorizedError, UnavailableError
from engines.local.embed import Vectors, normalise_rows

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Endpoint:
    """Where an OpenAI-compatible service lives and how to call it."""

    base_url: str
    model: str
    api_key: SecretStr | None = None
    timeout: float = 60.0

    def headers(self) -> dict[str, str]:
        key = self.api_key.get_secret_value() if self.api_key else ""
        return {"Authorization": f"Bearer {key}"} if key else {}


async def post_json(endpoint: Endpoint, route: str, body: dict[str, object]) -> dict[str, object]:
    """POST `body` to `base_url/route`; errors become Unavailable, Unauthorized or Engine."""
    url = endpoint.base_url.rstrip("/") + route
    try:
        async with httpx.AsyncClient(timeout=endpoint.timeout) as client:
            response = await client.post(url, json=body, headers=endpoint.headers())
    except httpx.TransportError as err:
        raise UnavailableError(f"{route} endpoint unreachable: {type(err).__name__}") from err
    if response.status_code in (401, 403):
        raise UnauthorizedError(f"{route} endpoint refused the key (status {response.status_code})")
    if response.status_code in _TRANSIENT_STATUS:
        raise UnavailableError(f"{route} endpoint answered status {response.status_code}")
    if response.status_code >= 400:
        raise EngineError(f"{route} endpoint answered status {response.status_code}: {response.text[:300]}")
    try:
        data = response.json()
    except ValueError as err:
        raise EngineError(f"{route} endpoint answered with invalid JSON") from err
    if not isinstance(data, dict):
        raise EngineError(f"{route} endpoint answered with a JSON {type(data).__name__}, not an object")
    return data


class OpenAIEmbedder:
    """Vectors from any OpenAI-compatible `/embeddings` endpoint (semantic similarity)."""

    def __init__(self, endpoint: Endpoint, dimensions: int) -> None:
        self._endpoint = endpoint
        self._dimensions = dimensions

    @property
    def identity(self) -> str:
        return f"openai:{self._endpoint.model}/{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        data = await post_json(self._endpoint, "/embeddings", {"model": self._endpoint.model, "input": list(texts)})
        rows = data.get("data")
        if not isinstance(rows, list) or len(rows) != len(texts):
            raise EngineError("/embeddings answered a different number of vectors than texts sent")
        ordered = sorted(rows, key=lambda row: int(row.get("index", 0)))
        try:
            matrix = np.array([row["embedding"] for row in ordered], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as err:
            raise EngineError("/embeddings answered rows without a numeric embedding") from err
        if matrix.shape != (len(texts), self._dimensions):
            raise EngineError(f"/embeddings answered vectors of shape {matrix.shape}, expected {self._dimensions} wide")
        return normalise_rows(matrix)


_SYSTEM_PROMPT = (
    "You answer questions from an agent's memory. Use only the numbered passages given. "
    "Cite the passages you use as [n]. If they do not contain the answer, say so briefly."
)


class ChatSynthesizer:
    """Writes a recall answer from the ranked passages through `/chat/completions`."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint

    @property
    def model(self) -> str:
        return self._endpoint.model

    async def answer(self, question: str, instructions: str | None, hits: list[Hit]) -> str:
        passages = "\n\n".join(f"[{n}] {hit.text}" for n, hit in enumerate(hits, start=1))
        user = f"Question: {question}\n\nPassages:\n{passages}"
        if instructions:
            user = f"{instructions}\n\n{user}"
        body: dict[str, object] = {
            "model": self._endpoint.model,
            "messages": [{"role": "system", "content": _SYSTEM_PROMPT}, {"role": "user", "content": user}],
            "temperature": 0,
        }
        data = await post_json(self._endpoint, "/chat/completions", body)
        try:
            content = data["choices"][0]["message"]["content"]  # type: ignore[index]
        except (KeyError, IndexError, TypeError) as err:
            raise EngineError("/chat/completions answered without a message") from err
        if not isinstance(content, str) or not content.strip():
            raise EngineError("/chat/completions answered an empty message")
        return content.strip()
