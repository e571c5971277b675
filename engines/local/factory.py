"""Building a `LocalEngine` from `EngineSettings` (the registry's entry point for `local`)."""

from __future__ import annotations

import importlib

from pydantic import SecretStr

from engines.contract import ConfigError
from engines.local.embed import Embedder, HashingEmbedder
from engines.local.engine import DEFAULT_PASSAGE_CHARS, DESCRIPTOR, LocalEngine
from engines.local.minilm import DIMENSIONS, MiniLMEmbedder
from engines.local.openai import ChatSynthesizer, Endpoint, OpenAIEmbedder
from engines.local.static import DEFAULT_STATIC_MODEL, StaticEmbedder
from engines.settings import EmbedderSettings, EngineCredential, EngineSettings, check_endpoint

__all__ = ["DESCRIPTOR", "build"]

DEFAULT_DIMENSIONS = 256
"""The hashing and endpoint embedders' size when the settings name none."""


def build(settings: EngineSettings, credential: EngineCredential) -> LocalEngine:
    """A local engine on `settings.path`; the credential, when given, is the key of its endpoints."""
    if settings.path is None:
        raise ConfigError('engine "local" needs a path for its memory file (engines.local.path)')
    key = credential.token()
    chat = None
    if settings.chat is not None:
        url = check_endpoint(settings.chat.endpoint, credentialed=key is not None)
        chat = ChatSynthesizer(Endpoint(url, settings.chat.model, _secret(key)))
    engine = LocalEngine(
        settings.path,
        tenant=settings.tenant,
        embedder=build_embedder(settings.embedder, key),
        chat=chat,
        passage_chars=settings.passage_chars or DEFAULT_PASSAGE_CHARS,
    )
    return engine


def _secret(key: str | None) -> SecretStr | None:
    return SecretStr(key) if key else None


def build_embedder(settings: EmbedderSettings, key: str | None) -> Embedder:
    """The embedder the settings name; a remote one needs its endpoint and model."""
    if settings.kind == "minilm":
        if settings.dimensions not in (None, DIMENSIONS):
            raise ConfigError(f"the minilm embedder has {DIMENSIONS} dimensions, not {settings.dimensions}")
        return MiniLMEmbedder(settings.model)
    if settings.kind == "static":
        return StaticEmbedder(settings.model or DEFAULT_STATIC_MODEL, settings.dimensions)
    size = settings.dimensions or DEFAULT_DIMENSIONS
    if settings.kind == "hashing":
        try:
            return HashingEmbedder(size)
        except ValueError as err:
            raise ConfigError(f"embedder: {err}") from err
    if not settings.model:
        raise ConfigError(f'the "{settings.kind}" embedder needs a model name (embedder.model)')
    if settings.kind == "openai":
        if not settings.endpoint:
            raise ConfigError('the "openai" embedder needs an endpoint (embedder.endpoint)')
        url = check_endpoint(settings.endpoint, credentialed=key is not None)
        return OpenAIEmbedder(Endpoint(url, settings.model, _secret(key)), size)
    # Imported only when chosen: it pulls in a large optional dependency.
    sentence = importlib.import_module("engines.local.sentence")
    embedder: Embedder = sentence.SentenceEmbedder(settings.model)
    return embedder
