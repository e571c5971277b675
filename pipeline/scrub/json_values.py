"""Scrubbing a JSON value: secrets by member name, everything too deep, and every string as text."""

from __future__ import annotations

import re
from typing import Any

from pipeline.scrub.report import DEFAULT_POLICY, Policy, SanitizationReport, Sanitized
from pipeline.scrub.text_stages import sanitize_text

SECRET_TOKEN = "[REDACTED_SECRET]"
MAX_DEPTH = 128
"""A value at this depth or deeper (the top value is depth 0) is replaced without being read."""

_SENSITIVE_KEYS = frozenset(
    {"apikey", "token", "accesstoken", "refreshtoken", "authorization", "password", "secret", "clientsecret"}
)
_SENSITIVE_SUFFIXES = ("token", "apikey", "clientsecret", "key")
_SENSITIVE_PARTS = ("password", "secret")
_NOT_ASCII_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def is_sensitive_key(key: object) -> bool:
    """True when a member's name marks its value as a secret: `API-Key`, `api_key` and `apiKey` all do,
    and so does `monkey`, an accepted false positive."""
    # Only ASCII letters and digits survive, so lower() cannot change the length or miss a letter.
    name = _NOT_ASCII_ALNUM.sub("", str(key)).lower()
    return (
        name in _SENSITIVE_KEYS or name.endswith(_SENSITIVE_SUFFIXES) or any(part in name for part in _SENSITIVE_PARTS)
    )


class _JsonScrubber:
    """One walk over a value, summing the reports of its parts."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.report = SanitizationReport()

    def walk(self, value: Any, depth: int) -> Any:
        if depth >= MAX_DEPTH:
            self.report.depth_redactions += 1
            return SECRET_TOKEN
        if isinstance(value, str):
            scrubbed = sanitize_text(value, self.policy)
            self.report = self.report.merge(scrubbed.report)
            return scrubbed.value
        if isinstance(value, dict):
            return {key: self._member(key, member, depth + 1) for key, member in value.items()}
        if isinstance(value, list | tuple):
            return [self.walk(element, depth + 1) for element in value]
        return value  # numbers, booleans and None carry no text

    def _member(self, key: object, value: Any, depth: int) -> Any:
        # The name decides before the depth does: a secret member is replaced unread at any depth.
        if is_sensitive_key(key):
            self.report.key_redactions += 1
            return SECRET_TOKEN
        return self.walk(value, depth)


def sanitize_json(value: Any, policy: Policy = DEFAULT_POLICY) -> Sanitized[Any]:
    """Scrub a JSON value (dicts, lists, strings, numbers, booleans, None) into a new one; never raises.

    Members keep their order; the input is not modified. Tuples are walked as lists; any other object
    is returned as it is.
    """
    scrubber = _JsonScrubber(policy)
    scrubbed = scrubber.walk(value, 0)
    return Sanitized(scrubbed, scrubber.report)
