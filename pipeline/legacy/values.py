"""Reading v1 column values: text, instants, numbers and the JSON columns (docs/spec/legacy-import.md §7).

Pure functions over what SQLite hands back. A v1 column may hold anything a broken or hostile writer put
there (SQLite keeps a value's own type whatever the column says), so each function accepts any value and
answers "nothing" for what it cannot read; none of them raises.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from engines.contract import Role, ToolCallRef

BLANK_CHARACTERS = " \t\r\n"
"""What "blank" strips: spaces, tabs, CR and LF only (a no-break space is text)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SURROGATE = re.compile("[\ud800-\udfff]")
_EMPTY_JSON: dict[str, Callable[[], Any]] = {"[]": list, "{}": dict}
_REMEMBERED_CHARS = 512
"""A `tags_json` text up to this long is parsed once per import process: v1 rows repeat a few tag sets
(parsing them was a tenth of reading a document row), and longer ones are too rare to be worth holding."""

_ROLES = {
    "user": Role.USER,
    "human": Role.USER,
    "assistant": Role.ASSISTANT,
    "ai": Role.ASSISTANT,
    "agent": Role.ASSISTANT,
    "bot": Role.ASSISTANT,
    "model": Role.ASSISTANT,
    "system": Role.SYSTEM,
    "developer": Role.SYSTEM,
    "tool": Role.TOOL,
    "function": Role.TOOL,
    "tool_result": Role.TOOL,
}


def text_of(value: object) -> str | None:
    """A column's value as text: NULL is None, a blob is read as UTF-8 (bad bytes replaced), a number is
    written out (only a column without text affinity keeps one)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def is_blank(value: str | None) -> bool:
    return value is None or not value.strip(BLANK_CHARACTERS)


def non_blank(value: object) -> str | None:
    """`value` when it is a string that is not blank, else None."""
    return value if isinstance(value, str) and not is_blank(value) else None


def finite_number(value: object) -> float | None:
    """`value` as a float when it is a finite number (a JSON `true` is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        return None
    return number if math.isfinite(number) else None


def instant_from_seconds(value: object) -> datetime | None:
    """Unix seconds (v1's REAL columns) as a UTC instant, to the microsecond; None when not a usable time."""
    seconds = value if type(value) is float and math.isfinite(value) else finite_number(value)  # REAL, at once
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def instant_from_millis(value: object) -> datetime | None:
    """Unix milliseconds (the chunk store's INTEGER columns) as a UTC instant; None when not a usable time."""
    millis = finite_number(value)
    if millis is None:
        return None
    try:
        # An integer is added exactly: a float would round milliseconds beyond 2**53.
        return _EPOCH + (timedelta(milliseconds=value) if isinstance(value, int) else timedelta(milliseconds=millis))
    except OverflowError:
        return None


def confidence_of(value: object) -> float:
    """A finite number clamped to [0, 1]; anything else is 0.5."""
    number = finite_number(value)
    return 0.5 if number is None else min(1.0, max(0.0, number))


def role_of(value: object) -> Role:
    """A v1 role, stripped and lowercased, as a contract role; an unknown one is a user turn."""
    text = text_of(value)
    return _ROLES.get(text.strip(BLANK_CHARACTERS).lower(), Role.USER) if text is not None else Role.USER


def parse_json(value: object) -> Any:
    """The JSON a text column holds, or None when it holds none (NULL, not JSON, not valid Unicode)."""
    text = text_of(value)
    if text is None:
        return None
    if text in _EMPTY_JSON:  # what most v1 rows hold
        return _EMPTY_JSON[text]()
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    # `\ud800` escapes decode to lone surrogates, which no item may hold: repair them as UTF-8 does.
    return _valid_unicode(parsed) if "\\u" in text or "\\U" in text else parsed


def json_object(value: object) -> dict[str, Any]:
    """The JSON object a column holds; anything else is an empty object."""
    parsed = parse_json(value)
    return parsed if isinstance(parsed, dict) else {}


def compact_json(value: Any) -> str:
    """JSON written compactly with sorted keys, non-ASCII kept (how v1 values become text)."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def json_tags(value: object) -> list[str]:
    """The strings of a JSON array, blank and repeated ones dropped, in order; anything else is none."""
    text = text_of(value)
    if text is None:
        return []
    if len(text) <= _REMEMBERED_CHARS:
        return list(_tags_of(text))
    return list(_parsed_tags(text))


@lru_cache(maxsize=4096)
def _tags_of(text: str) -> tuple[str, ...]:
    return _parsed_tags(text)


def _parsed_tags(text: str) -> tuple[str, ...]:
    parsed = parse_json(text)
    return tuple(distinct_tags(parsed if isinstance(parsed, list) else []))


def distinct_tags(values: Iterable[object]) -> list[str]:
    """The non-blank strings among `values`, each once, in first-seen order."""
    return list(dict.fromkeys(v for v in values if isinstance(v, str) and not is_blank(v)))


def tool_calls_of(value: object) -> list[ToolCallRef]:
    """The calls a v1 `tool_calls_json` names: an array of calls, one call object, or an object whose
    `tool_calls` key holds the array. A call without a name is dropped."""
    if is_blank(text_of(value)):
        return []
    parsed = parse_json(value)
    if isinstance(parsed, dict):
        listed = parsed.get("tool_calls")
        parsed = listed if isinstance(listed, list) else [parsed]
    if not isinstance(parsed, list):
        return []
    calls = (_tool_call(call) for call in parsed if isinstance(call, dict))
    return [call for call in calls if call is not None]


def _tool_call(call: dict[str, Any]) -> ToolCallRef | None:
    function = call.get("function")
    names = [call.get("name"), call.get("tool"), call.get("tool_name")]
    names.append(function.get("name") if isinstance(function, dict) else None)
    name = next((n for n in names if non_blank(n) is not None), None)
    if name is None:
        return None
    return ToolCallRef(name=name, id=non_blank(call.get("id")))


def _valid_unicode(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_valid_unicode(v) for v in value]
    if isinstance(value, dict):
        return {_valid_unicode(k): _valid_unicode(v) for k, v in value.items()}
    return value
