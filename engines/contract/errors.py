"""The contract's one error tree.

    Error
    ├── UnsupportedError        unsupported:          operation or fetch mode not offered
    ├── InvalidRequestError     invalid request:      malformed request (every check(), cursors, namespaces)
    ├── UnauthorizedError       unauthorized:         credential missing, expired or rejected
    ├── NotFoundError           not found:            addressed item or route missing
    ├── ConflictError           conflict:             write conflicts with held state
    ├── UnavailableError        unavailable:          transient; the same call may succeed later
    ├── EngineError             engine error:         the engine's own failure, already cleaned
    └── ConfigError             configuration error:  the engine was configured wrongly

Messages are lowercase, carry no trailing punctuation and never a credential. Only
`UnavailableError` is transient: hosts retry it and nothing else.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar


class ErrorKind(StrEnum):
    """What a host can do about a failure, one value per error class."""

    UNSUPPORTED = "unsupported"
    INVALID_REQUEST = "invalid_request"
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    UNAVAILABLE = "unavailable"
    ENGINE = "engine"
    CONFIG = "config"


class Error(Exception):
    """Base of every contract error; `str(err)` is `"{prefix} {message}"`."""

    kind: ClassVar[ErrorKind]
    prefix: ClassVar[str]

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.prefix} {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Error):
            return NotImplemented
        return type(self) is type(other) and self.message == other.message

    def __hash__(self) -> int:
        return hash((type(self), self.message))

    def is_transient(self) -> bool:
        """True only for `UnavailableError`: the same call may succeed later."""
        return False

    def __reduce__(self) -> tuple[type[Error], tuple[str]]:
        # Errors cross process boundaries (converter pools, Celery); keep them picklable.
        return (type(self), (self.message,))


class UnsupportedError(Error):
    """The engine does not offer the operation or fetch mode."""

    kind = ErrorKind.UNSUPPORTED
    prefix = "unsupported:"


class InvalidRequestError(Error):
    """The request is malformed."""

    kind = ErrorKind.INVALID_REQUEST
    prefix = "invalid request:"


class UnauthorizedError(Error):
    """The credential was missing, expired or rejected."""

    kind = ErrorKind.UNAUTHORIZED
    prefix = "unauthorized:"


class NotFoundError(Error):
    """The addressed item or route does not exist."""

    kind = ErrorKind.NOT_FOUND
    prefix = "not found:"


class ConflictError(Error):
    """The write conflicts with what the engine holds."""

    kind = ErrorKind.CONFLICT
    prefix = "conflict:"


class UnavailableError(Error):
    """Transient failure (timeout, rate limit, upstream down); retrying may succeed."""

    kind = ErrorKind.UNAVAILABLE
    prefix = "unavailable:"

    def is_transient(self) -> bool:
        return True


class EngineError(Error):
    """The engine's own failure, already cleaned of credentials."""

    kind = ErrorKind.ENGINE
    prefix = "engine error:"


class ConfigError(Error):
    """The engine was configured wrongly (unknown id, missing endpoint or key, cleartext endpoint)."""

    kind = ErrorKind.CONFIG
    prefix = "configuration error:"


ERROR_CLASSES: dict[ErrorKind, type[Error]] = {
    cls.kind: cls
    for cls in (
        UnsupportedError,
        InvalidRequestError,
        UnauthorizedError,
        NotFoundError,
        ConflictError,
        UnavailableError,
        EngineError,
        ConfigError,
    )
}


def error_for(kind: ErrorKind, message: str) -> Error:
    """Rebuild the contract error of `kind` (for errors carried as data across a wire)."""
    return ERROR_CLASSES[kind](message)
