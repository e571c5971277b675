"""One table from the contract's errors to HTTP statuses, and the handlers that answer with it.

Every failure answers `{"error": {"kind": ..., "message": ...}}`. Routes raise contract errors (or
`ForbiddenError`), never HTTP exceptions; anything else is a bug, logged here and answered with a bare 500 that
carries no trace and no detail. A body that is not the contract's shape is 422, as FastAPI validates it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from engines.contract import (
    ConfigError,
    ConflictError,
    EngineError,
    Error,
    InvalidRequestError,
    NotFoundError,
    UnauthorizedError,
    UnavailableError,
    UnsupportedError,
)

logger = logging.getLogger(__name__)

RETRY_AFTER_S: Final = 5


class ForbiddenError(UnauthorizedError):
    """The caller is known but may not do this: widen its reach, write with a read-only token, administer."""


@dataclass(frozen=True)
class Mapping:
    status: int
    kind: str


# Most specific first: ForbiddenError is an UnauthorizedError with its own status.
ERROR_TABLE: Final[Sequence[tuple[type[Error], Mapping]]] = (
    (ForbiddenError, Mapping(403, "forbidden")),
    (InvalidRequestError, Mapping(400, "invalid_request")),
    (UnauthorizedError, Mapping(401, "unauthorized")),
    (NotFoundError, Mapping(404, "not_found")),
    (ConflictError, Mapping(409, "conflict")),
    (UnsupportedError, Mapping(501, "unsupported")),
    (UnavailableError, Mapping(503, "unavailable")),
    (EngineError, Mapping(502, "engine")),
    (ConfigError, Mapping(500, "config")),
)


# Body validation answers 422 from `_invalid_body`, outside the table.
INVALID_BODY_STATUS: Final = 422


# The body of every failure, as the OpenAPI schema documents it on every route (`error_body` writes it).
ERROR_BODY_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["kind", "message"],
            "properties": {"kind": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}


def documented_errors() -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of every route: each status a failure may answer, with the one error body, so a
    client (and the schema fuzzer) knows every answer a route can give. An error is JSON even on the routes
    that answer text (`/metrics`, `/v1/context.md`)."""
    statuses = sorted({mapping.status for _, mapping in ERROR_TABLE} | {INVALID_BODY_STATUS})
    kinds = {status: [m.kind for _, m in ERROR_TABLE if m.status == status] for status in statuses}
    kinds[INVALID_BODY_STATUS] = ["invalid_request"]
    content = {"application/json": {"schema": ERROR_BODY_SCHEMA}}
    return {status: {"description": ", ".join(kinds[status]), "content": content} for status in statuses}


def mapping_of(error: Error) -> Mapping:
    return next(mapping for kind, mapping in ERROR_TABLE if isinstance(error, kind))


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"kind": kind, "message": message}}


def error_response(error: Error) -> JSONResponse:
    mapping = mapping_of(error)
    headers = {"Retry-After": str(RETRY_AFTER_S)} if mapping.status == 503 else None
    if mapping.status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return JSONResponse(error_body(mapping.kind, error.message), status_code=mapping.status, headers=headers)


async def _contract_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Error)
    return error_response(exc)


async def _invalid_body(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(error_body("invalid_request", _first_problem(exc.errors())), status_code=INVALID_BODY_STATUS)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    # Starlette's own: an unknown route (404) or method (405).
    assert isinstance(exc, StarletteHTTPException)
    kind = "not_found" if exc.status_code == 404 else "invalid_request"
    return JSONResponse(error_body(kind, str(exc.detail).lower()), status_code=exc.status_code, headers=exc.headers)


async def _bug(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unexpected error answering %s %s", request.method, request.url.path)
    return JSONResponse(error_body("internal", "the server failed unexpectedly; it is logged"), status_code=500)


def install(app: FastAPI) -> None:
    """Answer every failure of `app` from the table."""
    app.add_exception_handler(Error, _contract_error)
    app.add_exception_handler(RequestValidationError, _invalid_body)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _bug)


def _first_problem(errors: Sequence[Any]) -> str:
    if not errors:
        return "the body is not the contract's shape"
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    if where:
        return f"`{where}`: {message}"
    return f"the body: {message} (send a JSON object with `Content-Type: application/json`)"
