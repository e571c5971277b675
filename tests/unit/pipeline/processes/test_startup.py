"""The start-up's pieces that run in this process too: naming a target, and the package's public surface."""

from __future__ import annotations

import types

import pytest

import pipeline.processes as processes
from pipeline.processes import load_named


def test_a_named_callable_is_loaded() -> None:
    assert load_named("os.path:join") is __import__("os").path.join


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("os:sep", TypeError),  # not callable
        ("os:no_such_name", AttributeError),
        ("no_such_module_here:main", ModuleNotFoundError),
    ],
)
def test_a_bad_name_raises(path: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        load_named(path)


def test_all_is_sorted_and_complete() -> None:
    public = {
        name
        for name, value in vars(processes).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    order = sorted(processes.__all__, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    assert processes.__all__ == order
    assert set(processes.__all__) == public
