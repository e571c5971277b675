"""Bearer tokens for the API: who may read which part of memory, write, or administer.

A token fixes its holder's place and reach exactly like a tool scope (docs/spec/tools-and-context.md §2): every read is
confined to the reach, a write lands at the place, and only an admin token reaches the admin routes. The
tokens file keeps only each token's SHA-256 digest, so reading the file never reveals a token; a token is
shown once, when it is made. The file is JSON, written to a temporary file beside it and renamed over it,
readable by its owner only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from engines.contract import ConfigError, InvalidRequestError, Namespace, NotFoundError, Reach

TOKEN_PREFIX: Final = "tm_"
ReachShape = Literal["inherit", "exact", "subtree"]
_LOCK = threading.Lock()


class TokenRecord(BaseModel):
    """One token as the file keeps it: its name, digest and what it allows (never the token itself)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    digest: str
    place: str = ""
    reach: ReachShape = "inherit"
    read_only: bool = False
    admin: bool = False
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not value.strip() or any(c.isspace() or not c.isprintable() for c in value):
            raise ValueError("a token name is required, without spaces")
        return value

    @field_validator("place")
    @classmethod
    def _check_place(cls, value: str) -> str:
        try:
            Namespace.parse(value)
        except InvalidRequestError as err:
            raise ValueError(err.message) from None
        return value

    def namespace(self) -> Namespace:
        return Namespace.parse(self.place)

    def reach_of(self) -> Reach:
        """The reach every read through this token is confined to."""
        return reach_for(self.namespace(), self.reach)


class _TokensFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: list[TokenRecord] = Field(default_factory=list)


def reach_for(place: Namespace, shape: ReachShape) -> Reach:
    """The reach of a scope at `place`: it and its ancestors (inherit), it alone (exact), it and below (subtree)."""
    return {"inherit": Reach.of, "exact": Reach.exact, "subtree": Reach.subtree}[shape](place)


def digest_of(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenStore:
    """The tokens file at `path` (it need not exist: then there are no tokens)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Every request asks; the file is parsed again only once it changed (a revocation applies at once).
        self._cached: tuple[tuple[int, int, int], list[TokenRecord]] | None = None

    def records(self) -> list[TokenRecord]:
        """Every token's record, in the order they were made; a damaged file is a `ConfigError` naming it."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return []
        except OSError as err:
            raise ConfigError(f"cannot read the tokens file {self.path}: {err.strerror or err}") from err
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        try:
            records = _TokensFile.model_validate_json(self.path.read_bytes()).tokens
        except OSError as err:
            raise ConfigError(f"cannot read the tokens file {self.path}: {err.strerror or err}") from err
        except ValidationError as err:
            raise ConfigError(f"the tokens file {self.path} is not valid: {err.errors()[0]['msg']}") from err
        self._cached = (key, records)
        return records

    def add(
        self, name: str, *, place: str = "", reach: ReachShape = "inherit", read_only: bool = False, admin: bool = False
    ) -> tuple[TokenRecord, str]:
        """A new token and its record; the token is returned this once and never stored."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        try:
            record = TokenRecord(
                name=name, digest=digest_of(token), place=place, reach=reach, read_only=read_only, admin=admin
            )
        except ValidationError as err:
            raise InvalidRequestError(str(err.errors()[0]["msg"]).removeprefix("Value error, ")) from None
        with _LOCK:
            records = self.records()
            if any(r.name == name for r in records):
                raise InvalidRequestError(f"a token named {name!r} exists; revoke it first or choose another name")
            self._write([*records, record])
        return record, token

    def revoke(self, name: str) -> TokenRecord:
        """Remove the token `name`; `NotFoundError` when there is none."""
        with _LOCK:
            records = self.records()
            kept = [r for r in records if r.name != name]
            if len(kept) == len(records):
                raise NotFoundError(f"no token named {name!r}; `tinymemory tokens list` shows them")
            self._write(kept)
        return next(r for r in records if r.name == name)

    def authenticate(self, token: str) -> TokenRecord | None:
        """The record of `token`, or None when it is not one of this file's (compared in constant time)."""
        digest = digest_of(token)
        found = None
        for record in self.records():
            if hmac.compare_digest(record.digest, digest):
                found = record
        return found

    def _write(self, records: list[TokenRecord]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps(_TokensFile(tokens=records).model_dump(mode="json"), indent=2)
        fd, scratch = tempfile.mkstemp(prefix=f".{self.path.name}.tmp-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(body + "\n")
            Path(scratch).replace(self.path)  # mkstemp made it readable by its owner only
        except BaseException:
            Path(scratch).unlink(missing_ok=True)
            raise
