"""Building a `PostgresEngine` from `EngineSettings` (the registry's entry point for `postgres`)."""

from __future__ import annotations

import logging

from pydantic import SecretStr

from engines.contract import ConfigError, UnavailableError
from engines.local.factory import build_embedder
from engines.local.openai import ChatSynthesizer, Endpoint
from engines.postgres.connection import check_endpoint
from engines.postgres.engine import DESCRIPTOR, PostgresEngine
from engines.settings import EngineCredential, EngineSettings, masked_endpoint
from engines.settings import check_endpoint as check_http_endpoint

__all__ = ["DESCRIPTOR", "build"]

logger = logging.getLogger(__name__)


def build(settings: EngineSettings, credential: EngineCredential) -> PostgresEngine:
    """A PostgreSQL engine on `settings.endpoint`; the credential, when given, is the database password (libpq's
    usual places, PGPASSWORD or ~/.pgpass, otherwise). The database is settled now, so a server without
    pgvector, a newer schema or another embedder's vectors stop the process at start; a server not reachable
    yet is settled by the first call instead."""
    if not settings.endpoint:
        raise ConfigError(
            'engine "postgres" needs an endpoint, postgresql://user@host:5432/database (engines.postgres.endpoint)'
        )
    url = check_endpoint(settings.endpoint)
    key = credential.token()
    chat = None
    if settings.chat is not None:
        chat_url = check_http_endpoint(settings.chat.endpoint, credentialed=key is not None)
        chat = ChatSynthesizer(Endpoint(chat_url, settings.chat.model, SecretStr(key) if key else None))
    engine = PostgresEngine(
        url,
        password=key,
        tenant=settings.tenant,
        embedder=build_embedder(settings.embedder, None),
        chat=chat,
        passage_chars=settings.passage_chars,
    )
    try:
        engine.settle()
    except UnavailableError as err:
        where = masked_endpoint(url)
        logger.warning("postgresql at %s is not reachable yet (%s); the first call settles it", where, err)
    return engine
