"""The PostgreSQL engine: a database with pgvector shared by every process, keyword (BM25), vector (HNSW) and
hybrid search, with the local engine's words, embedders and fusion."""

from engines.postgres.engine import DESCRIPTOR, PostgresEngine

__all__ = ["DESCRIPTOR", "PostgresEngine"]
