"""A model's tool arguments: decoded, searched for host-fixed keys, checked against the tool's schema.

docs/spec/tools-and-context.md §4 steps 3–5 and docs/spec/tools-and-context.md §5. The checks walk the very schema
`specs()` offers, so what a model is told and what it is held to cannot drift apart; the rules a schema cannot say
(which strings must not be blank, the wording of each refusal, the rules across fields) are the tables below. Every
refusal is an `InvalidRequestError` naming the tool and the dotted path of the field, so a model can correct it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date, datetime
from typing import Any

from engines.contract import InvalidRequestError
from engines.tools.names import MEMORY_FORGET, MEMORY_STORE
from engines.tools.schemas import JsonObject

Arguments = JsonObject | str | bytes | None
"""What `call` accepts: decoded JSON, JSON text, or nothing (no arguments)."""

FIXED_KEYS = frozenset({"namespace", "reach"})

# Field shapes (paths with every array position written `[]`) whose strings must not be blank, besides
# every string in `filter` that is not a choice.
_NOT_BLANK = frozenset({"question", "query", "cursor", "ids[]", "tags[]"})
_CHOICES = {
    "filter.kinds[]": "an item kind",
    "filter.sources[]": "a source kind",
    "facet": "a facet",
    "mode": "a fetch mode this memory offers",
    "conversation.turns[].role": "a role",
    "learning.learning_kind": "a learning kind",
}
_DAYS = frozenset({"refers_to.from", "refers_to.to"})
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "array": "an array",
    "object": "an object",
}
# Groups of top-level keys of which exactly one must be given, with the refusal.
_EXACTLY_ONE = {
    MEMORY_STORE: (
        ("learning", "document", "conversation"),
        "give exactly one of `learning`, `document` or `conversation`",
    ),
    MEMORY_FORGET: (("ids", "filter"), "give exactly one of `ids` or `filter`"),
}
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def decode(tool: str, args: Arguments) -> JsonObject:
    """The arguments as a JSON object: None is `{}`, text and bytes are parsed as JSON."""
    if args is None:
        return {}
    value: object = args
    if isinstance(args, str | bytes):
        try:
            value = json.loads(args, parse_constant=_refuse_constant)
        except (ValueError, RecursionError):
            raise InvalidRequestError(f"{tool}: arguments are not valid JSON") from None
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{tool}: arguments must be a JSON object")
    return value


def _refuse_constant(name: str) -> object:
    # Python's json reads NaN and Infinity, which JSON itself does not have.
    raise ValueError(f"{name} is not JSON")


def refuse_fixed_keys(tool: str, args: JsonObject) -> None:
    """Refuse the first `namespace` or `reach` key, at any depth, in depth-first key order."""
    # A stack of iterators rather than recursion: arguments may nest deeper than Python's stack allows.
    stack: list[Iterator[tuple[str, object, object]]] = [_children("", args)]
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            continue
        path, key, value = step
        if key in FIXED_KEYS:
            raise InvalidRequestError(f"{tool}: `{path}` is fixed by the host and cannot be set")
        stack.append(_children(path, value))


def _children(path: str, value: object) -> Iterator[tuple[str, object, object]]:
    """Each (path, key, value) directly inside `value`; array entries have no key."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield _join(path, str(key)), key, child
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield f"{path}[{index}]", None, child


def check(tool: str, schema: JsonObject, args: JsonObject) -> JsonObject:
    """The arguments checked against `schema` and normalised.

    Nulls are dropped (a null is an absent key), properties come back in schema order, date-time
    strings as `datetime` and days as `date`, duplicate `ids` dropped (first kept) and empty arrays
    in `filter` unset. The first broken rule raises.
    """
    checker = _Checker(tool)
    present = checker.present(schema, args, "")
    if tool in _EXACTLY_ONE:
        keys, message = _EXACTLY_ONE[tool]
        if sum(key in present for key in keys) != 1:
            raise InvalidRequestError(f"{tool}: {message}")
    checked = checker.properties(schema, present, "")
    _check_days(tool, checked.get("refers_to"))
    if "ids" in checked:
        checked["ids"] = list(dict.fromkeys(checked["ids"]))
    if "filter" in checked:
        checked["filter"] = {key: value for key, value in checked["filter"].items() if value != []}
        if tool == MEMORY_FORGET and not checked["filter"]:
            raise InvalidRequestError(f"{tool}: `filter` must set at least one field")
    return checked


def _check_days(tool: str, refers_to: JsonObject | None) -> None:
    if refers_to is not None and refers_to["from"] > refers_to["to"]:
        raise InvalidRequestError(f"{tool}: `refers_to.from` is after `refers_to.to`")


class _Checker:
    """Walks one tool's arguments beside its schema; `path` is the dotted path of the value at hand."""

    def __init__(self, tool: str) -> None:
        self._tool = tool

    def _refuse(self, path: str, problem: str) -> InvalidRequestError:
        return InvalidRequestError(f"{self._tool}: `{path}` {problem}")

    def value(self, schema: JsonObject, value: object, path: str) -> Any:
        kind = schema["type"]
        if kind == "object":
            return self.properties(schema, self.present(schema, value, path), path)
        if kind == "array":
            return self.array(schema, value, path)
        if kind == "string":
            return self.string(schema, value, path)
        return self.number(schema, value, path)

    def present(self, schema: JsonObject, value: object, path: str) -> JsonObject:
        """The keys given a value: unknown keys refused, nulls dropped, required keys there."""
        if not isinstance(value, dict):
            raise self._refuse(path, "must be an object")
        known = schema["properties"]
        for key in value:
            if key not in known:
                raise InvalidRequestError(f"{self._tool}: unknown field `{_join(path, str(key))}`")
        given = {key: entry for key, entry in value.items() if entry is not None}
        for key in schema.get("required", ()):
            if key not in given:
                raise self._refuse(_join(path, key), "is required")
        return given

    def properties(self, schema: JsonObject, given: JsonObject, path: str) -> JsonObject:
        known = schema["properties"]
        return {key: self.value(known[key], given[key], _join(path, key)) for key in known if key in given}

    def array(self, schema: JsonObject, value: object, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self._refuse(path, "must be an array")
        # Only id lists are bounded here; an empty turn list is the item's own check (`Conversation.check`).
        if "maxItems" in schema and not schema["minItems"] <= len(value) <= schema["maxItems"]:
            raise self._refuse(path, f"must hold between {schema['minItems']} and {schema['maxItems']} ids")
        return [self.value(schema["items"], entry, f"{path}[{index}]") for index, entry in enumerate(value)]

    def string(self, schema: JsonObject, value: object, path: str) -> str | datetime | date:
        if not isinstance(value, str):
            raise self._refuse(path, "must be a string")
        if not _is_unicode(value):
            raise self._refuse(path, "must be valid unicode text")
        shape = _shape(path)
        if "enum" in schema:
            if value not in schema["enum"]:
                raise self._refuse(path, f"`{value}` is not {_CHOICES[shape]}")
            return value
        if (shape in _NOT_BLANK or shape.startswith("filter.")) and not value.strip():
            raise self._refuse(path, "must not be empty")
        if schema.get("format") == "date-time":
            return self._instant(value, path)
        if shape in _DAYS:
            return self._day(value, path)
        return value

    def number(self, schema: JsonObject, value: object, path: str) -> int | float:
        # JSON booleans decode as bool, a subclass of int; and 10.0 is a number but not an integer.
        integer = schema["type"] == "integer"
        if isinstance(value, bool) or not isinstance(value, int | float) or (integer and isinstance(value, float)):
            raise self._refuse(path, f"must be {_TYPE_NAMES[schema['type']]}")
        low, high = schema["minimum"], schema["maximum"]
        # Negated so that NaN, which compares false with everything, is refused too.
        if not low <= value <= high:
            raise self._refuse(path, f"must be between {low:g} and {high:g}")
        return value

    def _instant(self, value: str, path: str) -> datetime:
        if _RFC3339.fullmatch(value):
            try:
                return datetime.fromisoformat(value.upper().replace(" ", "T").replace("Z", "+00:00"))
            except ValueError:
                pass
        raise self._refuse(path, "must be an RFC 3339 time")

    def _day(self, value: str, path: str) -> date:
        if _DAY.fullmatch(value):
            try:
                return date.fromisoformat(value)
            except ValueError:
                pass
        raise self._refuse(path, "must be a date written YYYY-MM-DD")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _shape(path: str) -> str:
    return re.sub(r"\[[0-9]+\]", "[]", path)


def _is_unicode(value: str) -> bool:
    # A lone surrogate (JSON allows `"\ud800"`) cannot be stored: the contract's text fields refuse it.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
