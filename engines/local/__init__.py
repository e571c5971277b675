"""The embedded default engine: one SQLite file with keyword (FTS5 BM25, stemmed), vector and hybrid search."""

from engines.local.embed import Embedder, HashingEmbedder, Vectors
from engines.local.engine import DESCRIPTOR, LocalEngine
from engines.local.openai import ChatSynthesizer, Endpoint, OpenAIEmbedder
from engines.local.static import StaticEmbedder

__all__ = [
    "DESCRIPTOR",
    "ChatSynthesizer",
    "Embedder",
    "Endpoint",
    "HashingEmbedder",
    "LocalEngine",
    "OpenAIEmbedder",
    "StaticEmbedder",
    "Vectors",
]
