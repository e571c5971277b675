"""Strategies for hostile wire JSON: any JSON value, and a valid document with one part of it broken.

Random JSON alone is refused at the top level and never reaches a nested validator; a valid dump with one
subtree replaced, one member dropped or one member added reaches every field's validator, one at a time.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# Values that sit on the edges the contract's validators draw: 64-bit and float32 bounds, instants that
# leave the years 1 to 9999 in UTC, lone surrogates (a JSON `\ud800` escape decodes to one), namespace-like
# paths, cursors of every engine, and blank text.
EDGE_VALUES: list[Any] = [
    0, -1, 1, 2**31, 2**32, 2**63, 2**64, -(2**63) - 1, 10**30, 10**400,
    1e308, -0.0, 3.4028235e38, 3.5e38, 1e-46, float("inf"), float("-inf"), float("nan"),
    "", " ", "\t\n", "\x00", "\ud800", "a\udfffb", "root", "ROOT", " root ", "user:a", "user:a/", "/user:a",
    "user:a//agent:b", "user:", ":a", "agent:" + "x" * 129, "/".join(["user:a"] * 9), "team:acme/agent:writer",
    "service:s/agent:a", "0001-01-01T00:00:00+00:01", "9999-12-31T23:59:59-00:01", "2024-02-30T00:00:00Z",
    "2024-06-01", "2024-06-01T12:00:00", "s0", "s01", "o-1", "s" + "9" * 40, "o" + "1" * 5000, "0", "00",
    "l7b7d", "Etc/Nowhere", "UTC", "../../etc/passwd", "keyword", "vector", "hybrid", "document", "learning",
    "conversation", "user", "assistant", "tool", "folder", "agent", "tag",
]  # fmt: skip

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | st.sampled_from(EDGE_VALUES)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _keys_of(value: Any) -> list[str]:
    return sorted(value) if isinstance(value, dict) else []


@st.composite
def broken(draw: st.DrawFn, value: Any, names: tuple[str, ...] = ()) -> Any:
    """`value` with one part replaced by hostile JSON, one member dropped, or one member added (a name from
    `names`, the fields a model knows, or any name)."""
    if draw(st.integers(0, 4)) == 0 or not isinstance(value, dict | list) or not value:
        return draw(JSON_VALUES)
    if isinstance(value, list):
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], draw(broken(value[index], names)), *value[index + 1 :]]
    key = draw(st.sampled_from(_keys_of(value)))
    action = draw(st.sampled_from(["descend", "drop", "add"]))
    if action == "drop":
        return {k: v for k, v in value.items() if k != key}
    if action == "add":
        added = draw(st.sampled_from(names) if names else st.text(max_size=10))
        return {**value, added: draw(JSON_VALUES)}
    return {**value, key: draw(broken(value[key], names))}
