"""What every reliability test shares: a way to print its figures past pytest's capture, so that a passing
run shows them too."""

from __future__ import annotations

from collections.abc import Callable

import pytest

Figures = Callable[[str], None]


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """Print one line of figures under the test's name, even while pytest captures the output."""
    capman = request.config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        with capman.global_and_fixture_disabled():
            print(f"\n[reliability] {request.node.name}: {line}", flush=True)

    return say
