"""Typed engine configuration: what a host says about the engine it wants, without credentials.

`EngineSettings` is plain data that can be logged or shared; the credential travels apart as an
`EngineCredential`, so no configuration file ever holds a key.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from engines.contract import ConfigError


class _Settings(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class EmbedderSettings(_Settings):
    """How the local engine turns text into vectors.

    `minilm` (the default) runs all-MiniLM-L6-v2, a sentence model shipped in packages, offline on
    onnxruntime (384 dimensions; `model` may name another ONNX file of the same model); `static` runs a
    packaged static embedding model, a hundred times cheaper and less exact (`model` picks one of the
    packaged models, `dimensions` keeps that many of its leading ones); `hashing` needs nothing and
    measures lexical similarity; `openai` calls any OpenAI-compatible `/embeddings` endpoint; `sentence`
    runs a local sentence-transformers model (the `sentence` extra). `dimensions` is the hashing and
    endpoint embedders' size (256 unless set) and a cut of the static model's; MiniLM's is fixed.
    """

    kind: Literal["minilm", "static", "hashing", "openai", "sentence"] = "minilm"
    dimensions: int | None = None
    endpoint: str | None = None
    model: str | None = None


class ChatSettings(_Settings):
    """An OpenAI-compatible chat endpoint that writes recall answers from the retrieved passages."""

    endpoint: str
    model: str


class EngineSettings(_Settings):
    """One engine's settings. Fields an engine does not use are ignored by it."""

    endpoint: str | None = None
    scope_root: str | None = None
    tenant_root: str | None = None
    path: Path | None = None
    tenant: str | None = None
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    chat: ChatSettings | None = None
    passage_chars: int = 3000


@runtime_checkable
class BearerSource(Protocol):
    """Hands out the current bearer token; an engine asks it again before every attempt (tokens expire)."""

    async def bearer(self) -> str: ...


@dataclass(frozen=True)
class EngineCredential:
    """The key an engine presents: none, a static token, or a source asked before each call."""

    static: str | None = None
    dynamic: Callable[[], str] | None = None
    source: BearerSource | None = None

    @classmethod
    def none(cls) -> EngineCredential:
        return cls()

    @classmethod
    def of(cls, token: str) -> EngineCredential:
        return cls(static=token)

    @classmethod
    def from_source(cls, source: BearerSource) -> EngineCredential:
        return cls(source=source)

    def token(self) -> str | None:
        """The current token, or None when there is none (a blank token counts as none); an async source
        cannot be asked here and gives None."""
        value = self.dynamic() if self.dynamic is not None else self.static
        return value if value and value.strip() else None

    def is_set(self) -> bool:
        """Whether there is a key to present: a source, or a token that is not blank."""
        return self.source is not None or self.token() is not None

    async def resolve(self) -> str | None:
        """The token to present now, asking the source when there is one."""
        if self.source is not None:
            return await self.source.bearer()
        return self.token()

    def __repr__(self) -> str:
        # Never print the token itself.
        kind = "source" if self.source else "dynamic" if self.dynamic else "static" if self.static else "none"
        return f"EngineCredential({kind})"


def check_endpoint(endpoint: str, credentialed: bool) -> str:
    """The endpoint, trimmed, when it is an http(s) URL that may carry a credential."""
    url = endpoint.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ConfigError("endpoint must be an http(s) URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("endpoint must be an http(s) URL")
    if credentialed and parts.scheme == "http" and not is_loopback(parts.hostname):
        raise ConfigError("credentialed memory endpoints must use https unless they are loopback")
    return url


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def masked_endpoint(endpoint: str) -> str:
    """The endpoint as messages, logs and printed settings may show it: a password in it replaced by `***`."""
    try:
        parts = urlsplit(endpoint)
        password = parts.password
    except ValueError:
        return "(an endpoint that is not a URL)"
    if password is None:
        return endpoint
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
