"""What every reliability test shares: a way to print its figures past pytest's capture, so that a passing
run shows them too."""

from __future__ import annotations

from collections.abc import Callable

import pytest

Figures = Callable[..., None]


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """Print lines of figures under the test's name, even while pytest captures the output."""
    capman = request.config.pluginmanager.getplugin("capturemanager")

    def say(line: str, *details: str) -> None:
        with capman.global_and_fixture_disabled():
            print(f"\n[reliability] {request.node.name}: {line}", *(f"    {d}" for d in details), sep="\n", flush=True)

    return say
