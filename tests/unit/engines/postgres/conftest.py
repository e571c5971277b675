"""The PostgreSQL engine's tests share one server per session and take a fresh database each."""

from tests.fixtures.postgres import postgres_server, postgres_url

__all__ = ["postgres_server", "postgres_url"]
