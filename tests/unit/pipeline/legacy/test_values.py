"""Reading v1 column values (docs/spec/legacy-import.md §7, value conversions): a table of vectors per function."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engines.contract import Role, ToolCallRef
from pipeline.legacy.values import (
    compact_json,
    confidence_of,
    instant_from_millis,
    instant_from_seconds,
    is_blank,
    json_tags,
    parse_json,
    role_of,
    text_of,
    tool_calls_of,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1_700_000_000.25, EPOCH + timedelta(seconds=1_700_000_000.25)),
        (1_700_000_000, EPOCH + timedelta(seconds=1_700_000_000)),
        (0.0000004, EPOCH),  # kept to the microsecond
        (-86_400.0, EPOCH - timedelta(days=1)),
        (None, None),
        ("1700000000", None),  # text in a REAL column is not a time
        (b"\x00", None),
        (float("nan"), None),
        (float("inf"), None),
        (1e300, None),
        (10**400, None),
        (True, None),
    ],
)
def test_seconds(value: Any, expected: datetime | None) -> None:
    assert instant_from_seconds(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1_700_000_000_123, EPOCH + timedelta(milliseconds=1_700_000_000_123)),
        (0, EPOCH),
        (1.5, EPOCH + timedelta(microseconds=1500)),
        (2**62, None),
        (-(2**62), None),
        (None, None),
        ("soon", None),
    ],
)
def test_milliseconds(value: Any, expected: datetime | None) -> None:
    assert instant_from_millis(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.7, 0.7), (1.4, 1.0), (-3, 0.0), (1, 1.0), (None, 0.5), ("high", 0.5), (float("nan"), 0.5), (False, 0.5)],
)
def test_confidence(value: Any, expected: float) -> None:
    assert confidence_of(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("user", Role.USER),
        (" Human ", Role.USER),
        ("ASSISTANT", Role.ASSISTANT),
        ("ai", Role.ASSISTANT),
        ("agent", Role.ASSISTANT),
        ("bot", Role.ASSISTANT),
        ("model", Role.ASSISTANT),
        ("system", Role.SYSTEM),
        ("developer", Role.SYSTEM),
        ("tool", Role.TOOL),
        ("function", Role.TOOL),
        ("tool_result", Role.TOOL),
        ("narrator", Role.USER),
        ("", Role.USER),
        (None, Role.USER),
        (7, Role.USER),
    ],
)
def test_roles(value: Any, expected: Role) -> None:
    assert role_of(value) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            '[{"name": "a", "id": "1"}, {"tool": "b"}, {"tool_name": "c"}, {"function": {"name": "d"}}]',
            ["a:1", "b", "c", "d"],
        ),
        ('{"name": "one", "id": 5}', ["one"]),  # a single call; an id that is not a string is no id
        ('{"tool_calls": [{"name": "x"}, {"nope": 1}, "text"]}', ["x"]),
        ('{"tool_calls": "not a list", "name": "self"}', ["self"]),
        ('[{"name": " ", "tool": "second"}]', ["second"]),  # the first non-blank name wins
        ('[{"function": "f"}]', []),
        ('"just text"', []),
        ("[1, 2]", []),
        ("{oops", []),
        ("   ", []),
        (None, []),
    ],
)
def test_tool_calls(value: str | None, expected: list[str]) -> None:
    calls = tool_calls_of(value)
    assert [call.name if call.id is None else f"{call.name}:{call.id}" for call in calls] == expected
    assert all(isinstance(call, ToolCallRef) for call in calls)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('["a", "b", "a", "", " ", 3, null, "c"]', ["a", "b", "c"]),
        ('{"a": 1}', []),
        ("nope", []),
        ('["\\ud800x", "\\ud83d\\ude00"]', ["\ufffdx", "😀"]),  # a lone surrogate is repaired, a pair decoded
        (None, []),
    ],
)
def test_tags(value: str | None, expected: list[str]) -> None:
    assert json_tags(value) == expected


def test_json_that_nests_too_deep_is_no_json() -> None:
    assert parse_json("[" * 100_000 + "]" * 100_000) is None


def test_compact_json_sorts_keys_and_keeps_text() -> None:
    assert compact_json({"b": [1, 2], "a": "é"}) == '{"a":"é","b":[1,2]}'
    assert json.loads(compact_json({"x": None})) == {"x": None}


@pytest.mark.parametrize(
    ("value", "expected"), [("", True), (" \t\r\n", True), ("\u00a0", False), ("x", False), (None, True)]
)
def test_blank_strips_only_spaces_tabs_and_line_ends(value: str | None, expected: bool) -> None:
    assert is_blank(value) is expected


@pytest.mark.parametrize(
    ("value", "expected"), [("t", "t"), (b"ok\xff", "ok\ufffd"), (12, "12"), (1.5, "1.5"), (None, None)]
)
def test_text_of_any_column_value(value: Any, expected: str | None) -> None:
    assert text_of(value) == expected


def test_tags_of_long_and_repeated_texts_read_alike() -> None:
    many = [f"tag-{n}" for n in range(100)]
    long_text = json.dumps([*many, *many])
    assert len(long_text) > 512  # past what is remembered: parsed each time
    assert json_tags(long_text) == many
    first = json_tags('["a", "b"]')
    first.append("changed by a caller")
    assert json_tags('["a", "b"]') == ["a", "b"]  # a remembered parse hands out a fresh list each time
    assert json_tags(b'["a", "b"]') == ["a", "b"]
