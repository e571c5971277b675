"""Printing a reliability test's figures past pytest's capture, so that a passing run shows them too; and the
figures of a backfill that must store each unit exactly once. Any test may print this way (the kill and
outage tests under `tests/integration/` and `tests/e2e/` do), taking pytest's `request` fixture."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable

import pytest


def print_figures(request: pytest.FixtureRequest, line: str, *details: str) -> None:
    """Print `[reliability] <test>: line` and the details under it, even while pytest captures the output: on
    stderr, which an xdist worker shares with the terminal (its stdout is not the terminal's)."""
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        print(
            f"\n[reliability] {request.node.name}: {line}",
            *(f"    {d}" for d in details),
            sep="\n",
            file=sys.stderr,
            flush=True,
        )


def exactly_once(expected: Iterable[str], stored: Iterable[str]) -> tuple[int, int]:
    """(items lost, items duplicated): the expected names not stored, and the stored ones past their first."""
    counted = Counter(stored)
    return len(set(expected) - set(counted)), sum(n - 1 for n in counted.values())
