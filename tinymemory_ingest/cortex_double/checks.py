"""What the double refuses, with CortexDB's own statuses and codes (docs/spec/cortexdb.md §13.5).

A refusal is raised with the Direct server's status and code; the hosted wire relays it through the backend's
table (`relayed`), as the real backend does.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from tinymemory_ingest.cortex_double.config import DoubleConfig

EXPERIENCE_KEYS = frozenset(
    {"scope", "modality", "content", "context", "directives", "idempotency_key", "observed_actor", "subject", "source"}
)
ROLES = frozenset({"user", "assistant", "system", "tool"})
EXTRACTS = frozenset({"facts", "entities", "beliefs", "episodes", "understanding"})
WAITS = ("accepted", "captured", "indexed", "consolidated", "settled")
_SEGMENT = re.compile(r"([a-z][a-z0-9_]{0,31}):[A-Za-z0-9_-]{1,128}")
DIRECT_SEGMENTS = 32
HOSTED_SEGMENTS = 31


class RefusalError(Exception):
    """A request the server refuses: the Direct status and code, a message, optional details."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details

    def relayed(self) -> RefusalError:
        """The refusal as the hosted backend relays it (docs/spec/cortexdb.md §13.11)."""
        if self.status in (401, 403):
            return RefusalError(502, "UPSTREAM_UNAVAILABLE", self.message)
        table = {
            402: "USER_INSUFFICIENT_CREDITS",
            404: "NOT_FOUND",
            413: "PAYLOAD_TOO_LARGE",
            503: "UPSTREAM_UNAVAILABLE",
        }
        if self.status in table:
            return RefusalError(self.status, table[self.status], self.message)
        if self.status == 409:
            return RefusalError(400, "CONFLICT", self.message)
        if 400 <= self.status < 500:
            return RefusalError(400, "BAD_REQUEST", self.message, self.details)
        return RefusalError(502, "UPSTREAM_UNAVAILABLE", self.message)


def invalid(message: str, code: str = "INVALID_BODY", details: dict[str, Any] | None = None) -> RefusalError:
    return RefusalError(422, code, message, details)


def check_scope(scope: object, config: DoubleConfig, limit: int = DIRECT_SEGMENTS) -> str:
    if not isinstance(scope, str) or not scope:
        raise invalid("scope must be a non-empty string")
    segments = scope.split("/")
    if len(segments) > limit:
        raise invalid(f"scope has {len(segments)} segments; at most {limit} are allowed")
    for segment in segments:
        found = _SEGMENT.fullmatch(segment)
        if found is None:
            raise invalid(f"scope segment `{segment}` is not type:id")
        allowed = config.allowed_scope_types
        if allowed is not None and found.group(1) not in allowed:
            raise invalid(f"scope type `{found.group(1)}` is not registered", "UNREGISTERED_SCOPE_TYPE")
    return scope


def check_wait(wait: str | None) -> str | None:
    if wait is not None and wait not in WAITS:
        raise invalid(f"wait must be one of {', '.join(WAITS)}")
    return wait


def flattened_size(content: dict[str, Any]) -> int:
    text = content.get("text")
    if content.get("kind") == "message":
        return len(f"[{content.get('role')}] {text}".encode())
    return len(str(text if text is not None else content).encode())


def check_experience(body: object, config: DoubleConfig) -> dict[str, Any]:
    """An experience body the server accepts, else `RefusalError` (422 on Direct)."""
    if not isinstance(body, dict):
        raise invalid("the body must be a JSON object")
    unknown = sorted(set(body) - EXPERIENCE_KEYS)
    if unknown:
        raise invalid(f"unknown field(s) {', '.join(unknown)}")
    check_scope(body.get("scope"), config)
    modality = body.get("modality")
    if not isinstance(modality, str) or not modality:
        raise invalid("modality must be a non-empty string")
    _check_content(body.get("content"), config)
    _check_context(body.get("context"), config)
    _check_directives(body.get("directives"))
    key = body.get("idempotency_key")
    if key is not None and (not isinstance(key, str) or len(key) > 64):
        raise invalid("idempotency_key must be a string of at most 64 characters")
    return body


def _check_content(content: object, config: DoubleConfig) -> None:
    if not isinstance(content, dict):
        raise invalid("content must be an object")
    kind = content.get("kind")
    if kind == "message":
        if content.get("role") not in ROLES:
            raise invalid("content.role must be one of user, assistant, system, tool")
        if not isinstance(content.get("text"), str) or not content["text"]:
            raise invalid("content.text must be a non-empty string")
    elif kind == "text":
        if not isinstance(content.get("text"), str) or not content["text"]:
            raise invalid("content.text must be a non-empty string")
    elif kind not in ("json", "blob_ref", "triple"):
        raise invalid("content.kind must be message, text, json, blob_ref or triple")
    size = flattened_size(content)
    if size > config.max_text_bytes:
        raise invalid(f"flattened content is {size} bytes; at most {config.max_text_bytes}", "INVALID_ENVELOPE")


def _check_context(context: object, config: DoubleConfig) -> None:
    if context is None:
        return
    if not isinstance(context, dict):
        raise invalid("context must be an object")
    labels = context.get("labels", [])
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise invalid("context.labels must be a list of strings")
    if len(labels) > config.max_labels:
        raise invalid(f"{len(labels)} labels; at most {config.max_labels}")
    for label in labels:
        if len(label.encode()) > config.max_label_bytes:
            raise invalid(f"a label is over {config.max_label_bytes} bytes")
        if label.startswith("lang:"):
            raise invalid("the `lang:` label prefix is reserved")
    observed = context.get("observed_at")
    if observed is not None and not _rfc3339(observed):
        raise invalid("context.observed_at must be an RFC 3339 instant")


def _rfc3339(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


def _check_directives(directives: object) -> None:
    if directives is None:
        return
    if not isinstance(directives, dict):
        raise invalid("directives must be an object")
    extract = directives.get("extract", [])
    if not isinstance(extract, list) or not all(isinstance(e, str) and e in EXTRACTS for e in extract):
        raise invalid(f"directives.extract must list some of {', '.join(sorted(EXTRACTS))}")
    if "embed" in directives and not isinstance(directives["embed"], str):
        raise invalid("directives.embed must be a string")
